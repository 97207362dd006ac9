"""Fixtures for the runner tests: tiny studies in tmp dirs, fake trial functions, fast timings."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # fake_trials, for this process and (via PYTHONPATH) its workers


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
