"""Where a compute-look study's trials keep their pause checkpoints, and their removal once no
segment can need them.

A segment of a trial (``harness.decide.sequential.segments``) pauses with a checkpoint of the
whole training state, which the next segment resumes from (``harness.engine.resume``). The trial
process keeps them in ``$HARNESS_CHECKPOINTS/<whole trial id>`` (``harness.trainers.trial_dir``),
which the trial's child process points at the study's work folder (``<study>/tmp/checkpoints``,
beside the spec files). Every checkpoint of a trial is kept while a segment of it may still run
(a failed segment is retried from the one before it), and the trial's folder is removed once
none can: when its last segment's completed record is kept, or when the looks stopped its arm.
A checkpoint of a full fine-tune holds the weights and the optimiser's moments, so a study that
kept them all would hold several copies of the model per trial.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

from harness.runner.child import CHECKPOINTS_FOLDER

#: the worker's work folder in the study folder, where the trial processes' spec files go
WORK_FOLDER = "tmp"


def checkpoints_of(study_dir: Path, whole_trial_id: str) -> Path:
    """The folder of one trial's checkpoints (``whole_trial_id``: its design trial's id)."""
    return Path(study_dir) / WORK_FOLDER / CHECKPOINTS_FOLDER / whole_trial_id


def remove_checkpoints(study_dir: Path, whole_trial_ids: Iterable[str]) -> int:
    """Remove those trials' checkpoint folders (those present); how many were removed."""
    removed = 0
    for trial_id in whole_trial_ids:
        folder = checkpoints_of(study_dir, trial_id)
        if folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    return removed
