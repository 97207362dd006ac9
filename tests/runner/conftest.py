"""Fixtures for the runner tests: tiny studies in tmp dirs, fake trial functions, fast timings."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # fake_trials, for this process and (via PYTHONPATH) its workers

FAKE = "fake_trials:by_arm"


@pytest.fixture
def fake_env(tmp_path, monkeypatch):
    """Environment for workers and trial processes: where fake trials count their calls."""
    counters = tmp_path / "calls"
    monkeypatch.setenv("FAKE_TRIALS_DIR", str(counters))
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.delenv("FAKE_TRIAL_SLEEP", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # CPU workers, whatever the machine has
    monkeypatch.chdir(tmp_path)
    return counters


def write_study(tmp_path: Path, arms: list[str], *, seeds=1, name="t", **extra) -> Path:
    """A study whose arms are named for the fake outcome they produce (see fake_trials)."""
    data = {
        "name": name,
        "output_dir": str(tmp_path / "out" / name),
        "seeds": seeds,
        "control": arms[0],
        "arms": [{"name": arm, "algorithm": "grpo"} for arm in arms],
        **extra,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def options(**kw):
    from harness.runner import RunOptions

    defaults = dict(
        trial_fn=FAKE, tracking=False, poll_interval=0.2, heartbeat_interval=1, grace_period=3,
        kill_grace=2, progress_every=60, stream=io.StringIO(), gpus=[],
    )
    defaults.update(kw)
    return RunOptions(**defaults)


def calls(counters: Path, trial_id: str, what: str = "started") -> int:
    path = counters / f"{trial_id}.{what}"
    return len(path.read_text().splitlines()) if path.exists() else 0
