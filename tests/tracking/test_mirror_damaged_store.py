"""A damaged MLflow store: the warning says what helps (move the file aside, rebuild it from the
local records with `harness mirror-to-mlflow`), not `harness mirror-to-mlflow` alone, the command that just failed; and
doing what it says restores the mirror."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness.tracking import records
from harness.tracking.mlflow_mirror import TrackingWarning, sync


def damage(study_dir, how: str) -> None:
    store = study_dir / "mlflow.db"
    if how == "not a database":
        store.write_bytes(b"\x00garbage" * 512)
    else:  # a real store whose pages were overwritten
        assert sync(study_dir).ok
        data = bytearray(store.read_bytes())
        data[4096:] = b"\xab" * (len(data) - 4096)
        store.write_bytes(bytes(data))


def failed_sync_warning(study_dir, n: int) -> str:
    with pytest.warns(TrackingWarning) as caught:
        report = sync(study_dir)
    assert report.failed == n
    (message,) = [str(w.message) for w in caught if issubclass(w.category, TrackingWarning)]
    return message


@pytest.fixture
def recs(study_dir, make_record):
    out = [make_record("grpo", 0), make_record("rloo", 1, preset="rloo")]
    for rec in out:
        records.write_record(study_dir, rec)
    return out


@pytest.mark.parametrize("how", ["not a database", "malformed"])
def test_the_warning_says_to_move_the_damaged_store_aside(study_dir, recs, how):
    damage(study_dir, how)
    message = failed_sync_warning(study_dir, len(recs))
    store = (study_dir / "mlflow.db").resolve()
    assert (
        f"the MLflow store {store} is damaged: move it aside (mv {store} {store}.damaged), then run "
        f"`harness mirror-to-mlflow {study_dir.resolve()}` to rebuild it from the local records" in message
    )
    assert "to send it later" not in message  # sync is what just failed


@pytest.mark.slow  # a new MLflow store runs its migrations
def test_moving_it_aside_and_syncing_rebuilds_the_store(study_dir, recs):
    damage(study_dir, "malformed")
    failed_sync_warning(study_dir, len(recs))
    store = study_dir / "mlflow.db"
    store.rename(store.with_name("mlflow.db.damaged"))  # what the warning says, then the command it names
    out = subprocess.run(  # a new process, as the user runs it (this one's MLflow holds the damaged file)
        [sys.executable, "-c", "from harness.cli import main; main()", "mirror-to-mlflow", str(study_dir.resolve())],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"},
    )
    assert out.returncode == 0, out.stderr
    n = len(recs)
    assert out.stdout.strip().endswith(f"{n} records; 0 already present, {n} sent, 0 failed")
    assert "TrackingWarning" not in out.stderr
