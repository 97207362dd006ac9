"""Where a program trial's files go: the folder the trial process names in ``$HARNESS_TRIAL_DIR``
(the runner's child sets it beside the trial's spec file), emptied first so a retry starts clean;
a fresh temporary folder when the trial function is called outside a trial process.

Only a folder this module made is ever emptied (it holds ``MARKER``): a variable pointing at
anything else is refused, never deleted."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from harness.errors import ConfigError
from harness.trainers.faults import ProgramTrialError

TRIAL_DIR_ENV = "HARNESS_TRIAL_DIR"
MARKER = ".harness-trial"
#: where a trial process keeps the checkpoints its segments pause at and resume from (a compute-look
#: study's trials: ``harness.decide.sequential.segments``): one folder per whole trial, beside the
#: trial's spec file in the study's work folder, so every segment of a trial, on any machine that
#: shares the study folder, finds the one before it
CHECKPOINTS_ENV = "HARNESS_CHECKPOINTS"


def fresh_trial_dir(trial_id: str) -> Path:
    """An empty folder for the trial's files (bar its marker), as an absolute path."""
    given = os.environ.get(TRIAL_DIR_ENV)
    folder = Path(given).resolve() if given else Path(tempfile.mkdtemp(prefix=f"{trial_id}-")).resolve()
    if folder.exists() and any(folder.iterdir()):
        if not (folder / MARKER).is_file():
            raise ProgramTrialError(
                f"${TRIAL_DIR_ENV} is {folder}, a folder with files that is not a trial's (no {MARKER}): "
                "it is left as it is; unset the variable or point it at a new folder"
            )
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER).touch()
    return folder


def checkpoint_dir(whole_trial_id: str) -> Path:
    """The folder of a trial's pause checkpoints (kept across its segments, never emptied here):
    ``$HARNESS_CHECKPOINTS/<whole trial id>``; refused outside a trial process, where no later
    segment could find it."""
    root = os.environ.get(CHECKPOINTS_ENV)
    if not root:
        raise ConfigError(
            f"${CHECKPOINTS_ENV} is not set: a trial that runs in segments (compute_looks:) runs under "
            "`harness run` or `harness worker`, which keep its checkpoints in the study folder"
        )
    return Path(root).resolve() / whole_trial_id
