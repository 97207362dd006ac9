"""Helpers for the executor tests: the runner tests' fake trials and study files, a study run in a
thread (so a test can act on its jobs meanwhile), and what the study database and records say."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

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
    monkeypatch.setenv("HARNESS_FORWARD_ENV", "FAKE_TRIALS_DIR,FAKE_SLOW_FIRST_S,PYTHONPATH,MLFLOW_DISABLE_TELEMETRY")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    for var in ("FAKE_TRIAL_SLEEP", "FAKE_SLOW_FIRST_S", "HARNESS_MIN_FREE_MB"):
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
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the run did not end within {timeout}s"
        assert self.error is None, repr(self.error)
        return self.summary


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout}s"
        time.sleep(0.2)


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
