"""Helpers for the fault tests: study files, harness commands as processes, waiting, counting."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import yaml
from runner_helpers import FAKE
from slowness import Deadline

HARNESS = [sys.executable, "-c", "from harness.cli import main; main()"]


def fast(grace_s: float = 3.0) -> list[str]:
    """Fast timings: a dead worker's trial is stale ``grace_s`` seconds after its last heartbeat.
    A test in which no worker dies gives a long grace (:data:`NO_DEATHS_GRACE_S`, stretched by
    :func:`slowness`), so a live trial whose heartbeat a busy machine delays is never taken for lost."""
    return ["--trial-fn", FAKE, "--poll-interval", "0.2", "--heartbeat-interval", "1", "--grace-period", f"{grace_s:g}"]


#: a grace period no heartbeat of a live worker misses, for tests in which no worker dies
NO_DEATHS_GRACE_S = 60.0
FAST = fast()


def write_study(folder: Path, name: str, arms: list[str], *, seeds=1, output_dir: str | None = None) -> Path:
    """A study whose arms are named for the outcome the fake trial gives them (fake_trials).
    Without ``output_dir`` its folder is ``runs/<name>`` under the current folder: each
    "machine" (a folder the commands run in) has its own."""
    data = {
        "name": name,
        "seeds": seeds,
        "control": arms[0],
        "arms": [{"name": arm, "algorithm": "grpo"} for arm in arms],
    }
    if output_dir is not None:
        data["output_dir"] = output_dir
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


class Machine:
    """A folder standing for one machine: the harness commands run there, with their output
    kept in files (``<label>.out`` / ``<label>.err``)."""

    def __init__(self, root: Path, name: str):
        self.name = name
        self.dir = root / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.procs: list[subprocess.Popen] = []

    def study_dir(self, study: str) -> Path:
        return self.dir / "runs" / study

    def start(self, *args: str, label: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        with open(self.dir / f"{label}.out", "wb") as out, open(self.dir / f"{label}.err", "wb") as err:
            proc = subprocess.Popen(
                [*HARNESS, *args],
                cwd=self.dir,
                env={**os.environ, **(env or {})},
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
            )
        self.procs.append(proc)
        return proc

    def run(self, *args: str, label: str, env: dict[str, str] | None = None, timeout: float = 180):
        """Run a harness command to its end: (exit code, stdout, stderr). ``timeout`` (seconds on
        an idle machine, a :class:`Deadline` stretched by the load while it runs) only bounds a hang."""
        deadline = Deadline(timeout)
        proc = self.start(*args, label=label, env=env)
        code = wait_process(proc, deadline)
        if code is None:
            proc.kill()
            proc.wait()
            raise AssertionError(
                f"`harness {' '.join(args)}` on {self.name} ran past {deadline.limit():g}s:\n"
                f"{self.output(label)[1][-3000:]}"
            )
        return (code, *self.output(label))

    def finish(self, proc: subprocess.Popen, timeout: float) -> int:
        """The exit code of a command started here; ``timeout`` (seconds on an idle machine, a
        :class:`Deadline` stretched by the load while it waits) only bounds a hang."""
        deadline = Deadline(timeout)
        code = wait_process(proc, deadline)
        if code is None:
            raise AssertionError(f"{' '.join(map(str, proc.args[-8:]))} on {self.name} ran past {deadline.limit():g}s")
        return code

    def output(self, label: str) -> tuple[str, str]:
        return (
            (self.dir / f"{label}.out").read_text(errors="replace"),
            (self.dir / f"{label}.err").read_text(errors="replace"),
        )

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)


def wait_process(proc: subprocess.Popen, deadline: Deadline) -> int | None:
    """``proc``'s exit code once it ends, or None when ``deadline`` passes first."""
    while True:
        try:
            return proc.wait(timeout=min(1.0, max(deadline.left(), 0.05)))
        except subprocess.TimeoutExpired:
            if deadline.passed():
                return None


def wait_for(predicate, timeout: float, what: str, poll: float = 0.2, *, unless_ended=None) -> None:
    """Wait until ``predicate()`` holds. ``timeout`` (seconds on an idle machine, a
    :class:`Deadline` stretched by the load while it waits) only bounds a hang; ``unless_ended``
    (a process) fails the wait at once when that process ends first, since what it was to bring
    about can no longer come."""
    deadline = Deadline(timeout)
    while not predicate():
        if unless_ended is not None and unless_ended.poll() is not None:
            if predicate():
                return
            code = unless_ended.returncode
            raise AssertionError(f"{what}: the process that was to bring it about ended (exit code {code})")
        if deadline.passed():
            raise AssertionError(f"timed out after {deadline.limit():g}s waiting for {what}")
        time.sleep(poll)


def calls(counters: Path, trial_id: str, what: str = "started") -> list[int]:
    """The pids of the fake trial's calls for ``trial_id`` (``started`` or ``done``)."""
    path = counters / f"{trial_id}.{what}"
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped) is not running
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except (OSError, IndexError):
        return True


def trial_ids(study_path: Path) -> list[str]:
    from harness.study.expand import expand
    from harness.study.load import load_study

    return [s.trial_id for s in expand(load_study(study_path))]


def queue_jobs(storage_url: str, name: str):
    """Every Optuna trial (job) of the study's comparison queue in the shared storage
    (none while the storage is not set up yet)."""
    from harness import store as study_db
    from harness.runner import queue

    try:
        storage = study_db.open_storage(storage_url)
    except study_db.StorageError:
        return []  # the runner is still creating the schema
    q = queue.load_queue(storage, name)
    jobs = [] if q is None else queue.jobs(q)
    storage.engine.dispose()
    return jobs


def record_files(study_dir: Path) -> dict[str, Path]:
    folder = study_dir / "records"
    return {p.stem: p for p in folder.glob("*.json")} if folder.is_dir() else {}
