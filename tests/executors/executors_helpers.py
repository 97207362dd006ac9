"""Helpers for the executor tests: the runner tests' fake trials and study files, a study run in a
thread (so a test can act on its jobs meanwhile), and what the study database and records say."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest
from slowness import Deadline, slowness

RUNNER_TESTS = Path(__file__).resolve().parent.parent / "runner"
if str(RUNNER_TESTS) not in sys.path:
    sys.path.insert(0, str(RUNNER_TESTS))

from runner_helpers import calls, options, write_study  # noqa: E402  (the path above first)

from harness import store as study_db  # noqa: E402
from harness.runner import queue  # noqa: E402
from harness.tracking.records import read_records  # noqa: E402

__all__ = ["calls", "options", "write_study"]


@pytest.fixture(name="trial_env")
def trial_env_fixture(tmp_path, monkeypatch):
    """Environment for the runner, its jobs and their trial processes (Slurm exports it to the
    jobs; Ray gets the names in HARNESS_FORWARD_ENV): where the fake trials count their calls."""
    counters = tmp_path / "calls"
    monkeypatch.setenv("FAKE_TRIALS_DIR", str(counters))
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(RUNNER_TESTS), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv(
        "HARNESS_FORWARD_ENV", "FAKE_TRIALS_DIR,FAKE_SLOW_FIRST_S,FAKE_RELEASE_FILE,PYTHONPATH,MLFLOW_DISABLE_TELEMETRY"
    )
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    for var in ("FAKE_TRIAL_SLEEP", "FAKE_SLOW_FIRST_S", "FAKE_RELEASE_FILE", "HARNESS_MIN_FREE_MB"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    return counters


class Background:
    """``run_study`` in a thread: ``summary`` once it returns, ``error`` if it raised."""

    def __init__(self, path: Path, opts):
        from harness.runner.run import run_study

        self.summary = self.error = None

        def go():
            try:
                self.summary = run_study(path, opts)
            except BaseException as err:  # noqa: BLE001 - the test reads it
                self.error = err

        self.thread = threading.Thread(target=go, daemon=True)
        self.thread.start()

    def wait(self, timeout: float):
        """The run's summary once it ends; ``timeout`` (seconds on an idle machine, a
        :class:`Deadline` stretched by the load while it waits) only bounds a hang."""
        deadline = Deadline(timeout)
        while self.thread.is_alive() and not deadline.passed():
            self.thread.join(min(1.0, max(deadline.left(), 0.05)))
        assert not self.thread.is_alive(), f"the run did not end within {deadline.limit():g}s"
        assert self.error is None, repr(self.error)
        return self.summary


def wait_for(condition, timeout: float, what: str) -> None:
    """Wait until ``condition()`` holds; ``timeout`` (seconds on an idle machine, stretched by the
    load while it waits) only bounds a hang."""
    deadline = Deadline(timeout)
    while not condition():
        assert not deadline.passed(), f"{what} did not happen within {deadline.limit():g}s"
        time.sleep(0.2)


def timings(**kw) -> dict:
    """Heartbeats every second; a trial is stale 3 s after its last one on an idle machine,
    stretched by :func:`slowness` (a busy machine's late heartbeat is not a lost trial)."""
    return {"grace_period": 3 * slowness(), "heartbeat_interval": 1, "poll_interval": 0.5, **kw}


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie left for its parent's reaper is not running anything)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def trial_pids(counters: Path, trial_id: str) -> list[int]:
    """The pids of the fake trial's calls for ``trial_id`` so far."""
    path = counters / f"{trial_id}.started"
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def latest_jobs(study_dir: Path, name: str) -> dict:
    """The comparison queue's latest attempt of every trial."""
    storage = study_db.open_storage(study_db.default_storage_url(study_dir), create=False)
    try:
        return queue.latest(queue.jobs(queue.load_queue(storage, study_db.compare_study_name(name))))
    finally:
        storage.engine.dispose()


def trial_ids(study_dir: Path, name: str = "t") -> dict[str, str]:
    """Each arm's trial id (one seed) as the queue holds it: ``ok`` -> ``ok-s0-<hash>``."""
    return {key.split("-s", 1)[0]: key for key in latest_jobs(study_dir, name)}


def started(counters: Path, arm: str) -> int:
    """Calls of an arm's trial so far (the queue may not be readable yet)."""
    return sum(calls(counters, path.stem) for path in counters.glob(f"{arm}-s0-*.started"))


def completed_records(study_dir: Path) -> dict[str, list]:
    out: dict[str, list] = {}
    for record in read_records(study_dir):
        if record.status == "completed":
            out.setdefault(record.trial_id, []).append(record)
    return out
