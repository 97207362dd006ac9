"""Trials as Ray tasks on an existing cluster (``ray.init(address=...)``): one task per trial with
its arm's CPUs, GPUs and memory, named ``study/arm/seedN`` in the dashboard, retried by Ray when
its node is lost (``max_retries``; the one-trial entry waits for the lost attempt's claim to go
stale, then runs the trial once).

The task runs the one-trial entry as a subprocess (an argument list) with its output in a log file
on the node, in the node's environment plus the storage URL and the variables that
``$HARNESS_FORWARD_ENV`` names (comma-separated, e.g. ``HF_HOME,PYTHONPATH``) from the runner's.
Those are arguments of the task, put into the subprocess's environment only: Ray shows a task's
runtime environment in its dashboard, never its arguments. Ray tasks
belong to the driver that submitted them, so ``harness cancel`` asks that driver (the running
``harness run``) to cancel them, through the study database.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from harness.errors import ConfigError
from harness.runner.executors.base import GONE, Executor, JobHandle, JobRequest, too_many_gpus
from harness.study.resources import Resources

#: names the variables (comma-separated) that the runner copies into every trial task's environment
FORWARD_ENV = "HARNESS_FORWARD_ENV"
#: how often Ray runs a task again after its node (or worker process) died
NODE_LOSS_RETRIES = 3


def run_logged(argv: list[str], env: Mapping[str, str], log: str, cwd: str) -> int:
    """The task's body: the one-trial entry as a subprocess (``env`` over the node's environment),
    its output appended to ``log``."""
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.run(
            argv, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, check=False
        ).returncode


def forwarded_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The runner's variables that ``$HARNESS_FORWARD_ENV`` names (those it has)."""
    names = [name.strip() for name in environ.get(FORWARD_ENV, "").split(",") if name.strip()]
    return {name: environ[name] for name in names if name in environ}


def task_options(request: JobRequest) -> dict:
    """``remote.options(...)`` for one trial's task."""
    r = request.resources
    options = {
        "name": request.name,
        "num_cpus": r.cpus or 1,
        "num_gpus": r.gpus or 0,
        "max_retries": NODE_LOSS_RETRIES,
        "retry_exceptions": False,
    }
    if r.memory_bytes is not None:
        options["memory"] = r.memory_bytes
    return options


class RayExecutor(Executor):
    """Connects to a running Ray cluster (``address``, else ``$RAY_ADDRESS``, else ``auto``)."""

    name = "ray"

    def __init__(self, log_dir: Path, *, address: str | None = None):
        try:
            import ray
        except ImportError:
            raise ConfigError("--executor ray needs Ray: pip install 'ray[default]'") from None
        target = address or os.environ.get("RAY_ADDRESS") or "auto"
        try:
            ray.init(address=target, logging_level=logging.WARNING, log_to_driver=False, configure_logging=False)
        except (ConnectionError, RuntimeError) as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise ConfigError(f"--executor ray: cannot reach a Ray cluster at {target}: {first}") from None
        self.ray = ray
        self.log_dir = log_dir.absolute()  # the task opens it in the Ray worker's working directory
        self.remote = ray.remote(run_logged)
        self.refs: dict[str, object] = {}

    def check(self, needs: Mapping[str, Resources]) -> None:
        most = max((int(n["Resources"].get("GPU", 0)) for n in self.ray.nodes() if n.get("Alive")), default=0)
        error = too_many_gpus(needs, most, "the largest Ray node")
        if error:
            raise ConfigError(error)

    def submit(self, request: JobRequest) -> JobHandle:
        log = self.log_dir / f"{request.name.replace('/', '.')}.log"
        ref = self.remote.options(**task_options(request)).remote(
            list(request.argv), {**forwarded_env(os.environ), **request.secret_env}, str(log), os.getcwd()
        )
        task_id = ref.task_id().hex()
        self.refs[task_id] = ref
        return JobHandle(self.name, task_id, request.name, (str(log),))

    def states(self, handles: list[JobHandle]) -> dict[str, str]:
        mine = [self.refs[h.id] for h in handles if h.id in self.refs]
        ready, _ = self.ray.wait(mine, num_returns=len(mine), timeout=0) if mine else ([], [])
        done = {ref.task_id().hex() for ref in ready}
        return {h.id: GONE if h.id not in self.refs or h.id in done else "SUBMITTED" for h in handles}

    def cancel(self, handles: list[JobHandle]) -> list[str]:
        cancelled = []
        for h in handles:
            ref = self.refs.get(h.id)
            if ref is not None:
                self.ray.cancel(ref, force=True)
                cancelled.append(h.id)
        return cancelled

    def close(self) -> None:
        self.ray.shutdown()
