"""Where a study's trials run: ``local`` (this machine's worker pool, the default), ``slurm`` (one
Slurm job per trial, through submitit) or ``ray`` (one Ray task per trial on a running cluster).

Whichever runs them, every trial goes through the same worker machinery (claim, heartbeats,
fencing, local record, fenced commit, MLflow mirror), so the study database stays the one record
of what is queued, running and done. A scheduler's job runs exactly one trial
(:mod:`harness.runner.one_trial`), and :mod:`.scheduled` is the runner's loop that submits and
watches those jobs; :mod:`.cancel` is ``harness cancel``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from harness.runner.executors.base import Executor
from harness.runner.options import RunOptions


def executor_name(study, opts: RunOptions) -> str:
    """``--executor``, else the study's ``executor:``, else local."""
    return opts.executor or study.executor or "local"


def make_executor(name: str, *, study_dir: Path, opts: RunOptions) -> Executor:
    """A scheduler executor (``slurm`` or ``ray``) for a study whose files are under ``study_dir``.

    Its folders are absolute: a job or task runs in another working directory (a Ray worker's is
    its session folder), and the log paths it records are what ``harness status`` prints."""
    study_dir = study_dir.absolute()
    if name == "slurm":
        from harness.runner.executors.slurm import SlurmExecutor

        return SlurmExecutor(study_dir / "slurm", trial_timeout_s=opts.trial_timeout)
    if name == "ray":
        from harness.runner.executors.ray_tasks import RayExecutor

        return RayExecutor(study_dir / "logs" / "ray", address=opts.address)
    raise ValueError(f"no scheduler executor {name!r}")


def check_resources(study) -> None:
    """``harness validate``: a trial asking for more GPUs than any node has is a ``ConfigError``
    where this machine can tell: the study's executor is local (its visible GPUs) or Slurm with
    ``sinfo`` here. A Ray cluster is asked when ``harness run`` connects to it."""
    needs = {arm.name: study.resources_of(arm.name) for arm in study.arms}
    if study.executor == "local":
        from harness.runner.executors.local import local_slots

        local_slots(study, RunOptions())
    elif study.executor == "slurm" and shutil.which("sinfo") is not None:
        from harness.runner.executors.slurm import SlurmExecutor

        SlurmExecutor(Path(".")).check(needs)
