"""Shared fixtures: hand-built trial records and a pre-migrated MLflow sqlite store.

Creating a fresh MLflow sqlite database runs its migrations (seconds on a small machine), so
one empty store is created per session and copied into each study folder that needs one.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import pytest

from harness.algorithms.presets import resolve_algorithm
from harness.engine.spec import TrainConfig, TrialResult, TrialSpec
from harness.tracking import records as _records

T0 = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def build_spec(arm: str = "grpo", seed: int = 0, study: str = "demo", preset: str = "grpo", **algo) -> TrialSpec:
    return TrialSpec(
        study=study,
        arm=arm,
        seed=seed,
        train=TrainConfig(steps=4, eval_every=2),
        algorithm=resolve_algorithm(preset, algo),
    )


def build_record(
    arm: str = "grpo",
    seed: int = 0,
    *,
    study: str = "demo",
    status: str = "completed",
    steps: int = 4,
    attempt: int = 1,
    phase: str = "compare",
    offset: float = 0.0,
    spec: TrialSpec | None = None,
    **algo,
):
    """A record with a recognisable history: value = seed + step/10 + offset, evals every 2 steps."""
    spec = spec or build_spec(arm, seed, study, **algo)
    history = []
    for step in range(steps):
        row = {
            "step": step,
            "train/reward_mean": seed + step / 10 + offset,
            "train/loss": 1.0 / (step + 1) + offset,
            "time/step_s": 0.25,
            "tokens/generated": 64 * (step + 1),
        }
        if step % 2 == 1:
            row["eval/accuracy"] = 0.1 * step + 0.01 * seed + offset
        history.append(row)
    final = {}
    error = None
    if status == "completed":
        final = {
            "eval/accuracy": 0.5 + 0.01 * seed + offset,
            "eval/mean_reward": 0.25 + offset,
            "eval/accuracy_start": 0.2,
            "tokens/total": 1000.0,
            "time/total_s": 1.0,
            "train/loss": history[-1]["train/loss"] if history else 0.0,
        }
    else:
        error = "NonFiniteError: loss is nan at step 3"
    result = TrialResult(
        trial_id=spec.trial_id, status=status, error=error, final=final, history=history, wall_time_s=1.5
    )
    return _records.make_record(
        spec,
        result,
        attempt=attempt,
        phase=phase,
        started_at=T0,
        finished_at=T0 + dt.timedelta(seconds=2),
        device="cpu",
    )


@pytest.fixture(scope="session")
def mlflow_template(request, tmp_path_factory):
    """An empty, migrated MLflow sqlite store, kept in pytest's cache between sessions."""
    import mlflow
    from mlflow import MlflowClient

    folder = request.config.cache.mkdir(f"harness-mlflow-template-{mlflow.__version__}")
    path = Path(folder) / "mlflow.db"
    if not path.is_file():
        scratch = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
        MlflowClient(tracking_uri=f"sqlite:///{scratch}").search_experiments()
        shutil.copy(scratch, path.with_suffix(".tmp"))
        os.replace(path.with_suffix(".tmp"), path)
    return path


@pytest.fixture
def study_dir(tmp_path, mlflow_template):
    """A study folder whose default MLflow store already exists (copied from the template)."""
    folder = tmp_path / "study"
    folder.mkdir()
    shutil.copy(mlflow_template, folder / "mlflow.db")
    return folder


@pytest.fixture(scope="session")
def make_record():
    return build_record


@pytest.fixture(scope="session")
def make_spec():
    return build_spec
