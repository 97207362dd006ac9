"""Trials as Slurm jobs, submitted through ``submitit``: one job per trial, with its arm's
resources, named ``study/arm/seedN``, requeued by Slurm on preemption or node failure
(``--requeue``: the one-trial entry never runs a finished trial twice).

The job's pickled callable is a :class:`submitit.helpers.CommandFunction` over the one-trial
argument list; the storage URL reaches the job through the environment ``sbatch`` exports at
submission, so neither the job script nor submitit's pickled files hold it. Job states come from
``squeue`` (Slurm without accounting has no ``sacct``), cancelling is ``scancel``.
"""

from __future__ import annotations

import getpass
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.runner.executors.base import GONE, Executor, JobHandle, JobRequest, environment, too_many_gpus
from harness.study.resources import Resources

#: the time limit of a trial without ``resources.time`` and without ``--trial-timeout``
DEFAULT_TIME_MIN = 24 * 60
#: minutes a job gets past ``--trial-timeout`` (start-up, the record, the mirror)
TIMEOUT_MARGIN_MIN = 10
_TIMEOUT_S = 60  # a Slurm command that takes longer than this is a broken controller
_GPU_GRES = re.compile(r"gpu(?::[^:(,]+)?:(\d+)")


def sbatch_parameters(request: JobRequest, *, trial_timeout_s: float | None) -> dict[str, Any]:
    """submitit's ``SlurmExecutor`` parameters for one trial's job."""
    r = request.resources
    if r.time_minutes is not None:
        minutes = r.time_minutes
    elif trial_timeout_s is not None:
        minutes = -(-int(trial_timeout_s) // 60) + TIMEOUT_MARGIN_MIN
    else:
        minutes = DEFAULT_TIME_MIN
    params: dict[str, Any] = {
        "job_name": request.name,
        "time": minutes,
        "cpus_per_task": r.cpus or 1,
        "ntasks_per_node": 1,
        "additional_parameters": {"requeue": True, **r.extra},
    }
    if r.gpus:
        params["gpus_per_node"] = r.gpus
    if r.memory is not None:
        params["mem"] = r.memory
    for key in ("partition", "account", "qos", "constraint"):
        if (value := getattr(r, key)) is not None:
            params[key] = value
    return params


def most_gpus(sinfo_gres: str) -> int:
    """The most GPUs one node has, from ``sinfo --format=%G`` lines (``gpu:a100:8(S:0-1)``)."""
    return max((sum(int(n) for n in _GPU_GRES.findall(line)) for line in sinfo_gres.splitlines()), default=0)


def _slurm(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)


def slurm_states(ids: list[str]) -> dict[str, str]:
    """Each job's state from ``squeue`` (``GONE`` once Slurm no longer holds it, ``UNKNOWN`` when
    ``squeue`` cannot answer: a busy controller, or no Slurm here)."""
    try:
        out = _slurm("squeue", "--noheader", "--format=%i|%T", f"--user={getpass.getuser()}")
    except (OSError, subprocess.SubprocessError):
        out = None
    if out is None or out.returncode != 0:
        return dict.fromkeys(ids, "UNKNOWN")
    held = dict(line.split("|", 1) for line in out.stdout.split() if "|" in line)
    return {i: held.get(i, GONE) for i in ids}


class SlurmExecutor(Executor):
    """Submits to the Slurm cluster this machine is a login node of (``sbatch`` on PATH)."""

    name = "slurm"

    def __init__(self, folder: Path, *, trial_timeout_s: float | None = None):
        try:
            import submitit  # noqa: F401  (checked here: the one dependency Slurm needs)
        except ImportError:
            raise ConfigError("--executor slurm needs submitit: pip install submitit") from None
        if shutil.which("sbatch") is None:
            raise ConfigError("--executor slurm: sbatch is not on PATH; run on a machine of the Slurm cluster")
        self.folder = folder
        self.trial_timeout_s = trial_timeout_s

    def check(self, needs: Mapping[str, Resources]) -> None:
        out = _slurm("sinfo", "--noheader", "--format=%G")
        if out.returncode != 0:
            return  # the controller will say it at submission
        error = too_many_gpus(needs, most_gpus(out.stdout), "the largest Slurm node (sinfo)")
        if error:
            raise ConfigError(error)

    def submit(self, request: JobRequest) -> JobHandle:
        import submitit

        executor = submitit.SlurmExecutor(folder=self.folder / "%j")
        executor.update_parameters(**sbatch_parameters(request, trial_timeout_s=self.trial_timeout_s))
        command = submitit.helpers.CommandFunction(list(request.argv), cwd=os.getcwd())
        with environment(request.secret_env):  # sbatch exports it to the job; nothing writes it down
            job = executor.submit(command)
        paths = job.paths
        return JobHandle(self.name, str(job.job_id), request.name, (str(paths.stdout), str(paths.stderr)))

    def states(self, handles: list[JobHandle]) -> dict[str, str]:
        return slurm_states([h.id for h in handles])  # UNKNOWN counts as live: asked again next poll

    def cancel(self, handles: list[JobHandle]) -> list[str]:
        ids = [h.id for h in handles]
        if ids:
            _slurm("scancel", *ids)
        return ids
