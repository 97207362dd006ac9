"""Where a program trial's files go: the folder the trial process names in ``$HARNESS_TRIAL_DIR``
(the runner's child sets it, one per attempt), emptied first so a retry starts clean; a fresh
temporary folder when the trial function is called outside a trial process."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

TRIAL_DIR_ENV = "HARNESS_TRIAL_DIR"


def fresh_trial_dir(trial_id: str) -> Path:
    """An empty folder for the trial's files, as an absolute path (the program runs in it)."""
    given = os.environ.get(TRIAL_DIR_ENV)
    if not given:
        return Path(tempfile.mkdtemp(prefix=f"{trial_id}-")).resolve()
    folder = Path(given).resolve()
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder
