"""The MLflow tracking server goes down in the middle of a study and comes back later: trials
keep running and keep their local records; `harness mirror-to-mlflow` then restores everything, and MLflow
holds exactly the local records, value by value."""

from __future__ import annotations

import math
import re

import pytest
from faults_helpers import (
    FAST,
    Machine,
    queue_jobs,
    record_files,
    trial_ids,
    wait_for,
    write_study,
)
from optuna.trial import TrialState

from harness.tracking.mlflow_layout import (
    FINAL_PREFIX,
    SYNCED_TAG,
    mlflow_key,
    param_items,
)
from harness.tracking.mlflow_mirror import Tracker, sync
from harness.tracking.records import history_points, read_records


def _mirrored(tracker: Tracker) -> dict[str, list]:
    """Complete trial runs in MLflow, by trial id."""
    runs = tracker.trial_runs()
    return {tid: [r for r in rs if r.data.tags.get(SYNCED_TAG) == "1"] for tid, rs in runs.items()}


def assert_same_values(tracker: Tracker, record) -> None:
    """MLflow's run for ``record`` holds each of its values exactly (and nothing else)."""
    client = tracker.client
    runs = tracker.trial_runs(record.trial_id)[record.trial_id]
    assert len(runs) == 1, f"{record.trial_id}: {len(runs)} runs"
    run = client.get_run(runs[0].info.run_id)
    assert run.data.tags[SYNCED_TAG] == "1"
    assert run.data.tags["status"] == record.status and run.data.tags["attempt"] == str(record.attempt)
    assert run.data.params == param_items(record.spec)
    finals = {k[len(FINAL_PREFIX) :]: v for k, v in run.data.metrics.items() if k.startswith(FINAL_PREFIX)}
    assert set(finals) == {mlflow_key(k) for k in record.final}
    for key, value in record.final.items():
        assert finals[mlflow_key(key)] == value, (record.trial_id, key)  # exact, not approx
    assert run.data.metrics["wall_time_s"] == record.wall_time_s
    expected: dict[str, list[tuple[int, float]]] = {}
    for step, key, value in history_points(record):
        expected.setdefault(mlflow_key(key), []).append((step, value))
    for key, points in expected.items():
        logged = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))
        assert logged == sorted(points), (record.trial_id, key)
        assert all(math.isfinite(v) for _, v in logged)


@pytest.mark.slow
def test_tracking_server_down_mid_study_then_sync_restores_everything(tmp_path, fault_env, pg_url, mlflow_server):
    a = Machine(tmp_path, "machine_a")
    study = write_study(a.dir, "mlstop", ["ok_a", "ok_b"], seeds=3)
    ids = trial_ids(study)
    folder = a.study_dir("mlstop")
    try:
        runner = a.start(
            "run",
            study.name,
            "--storage",
            pg_url,
            "--tracking-uri",
            mlflow_server.url,
            "--workers",
            "1",
            *FAST,
            label="run",
            env={"FAKE_TRIAL_SLEEP": "1"},
        )
        wait_for(lambda: len(record_files(folder)) >= 1, 90, "the first record")
        mlflow_server.stop()  # down mid-study
        down_at = len(record_files(folder))
        wait_for(lambda: len(record_files(folder)) >= down_at + 2, 60, "two trials while MLflow is down")
        mlflow_server.start()  # back before the study ends
        code = a.finish(runner, 120)
    finally:
        a.stop_all()
    out, err = a.output("run")
    assert code == 0, out + err  # trials kept running: every one completed
    assert f"MLflow tracking at {mlflow_server.url} failed" in err
    assert f"harness mirror-to-mlflow {folder.resolve()} --tracking-uri {mlflow_server.url}" in err
    assert "INFO mlflow" not in err and "alembic" not in err  # MLflow's chatter stays quiet

    records = read_records(folder)
    assert sorted(r.trial_id for r in records) == sorted(ids)
    assert all(r.status == "completed" for r in records)
    assert [j.state for j in queue_jobs(pg_url, "mlstop")] == [TrialState.COMPLETE] * len(ids)

    tracker = Tracker(mlflow_server.url, folder, "mlstop")
    before = _mirrored(tracker)
    missing = [tid for tid in ids if not before.get(tid)]
    assert len(missing) >= 2, "the trials that ran while MLflow was down are not mirrored"

    code, out, err = a.run("mirror-to-mlflow", "runs/mlstop", "--tracking-uri", mlflow_server.url, label="sync")
    assert code == 0, out + err
    sent = int(re.search(r"(\d+) sent", out).group(1))
    assert sent >= len(missing) and "0 failed" in out
    for record in records:
        assert_same_values(tracker, record)

    assert "View run" not in out  # MLflow's own lines (they print the URL) stay quiet
    again = sync(folder, mlflow_server.url)
    assert (again.already_present, again.sent, again.failed) == (len(ids), 0, 0)  # idempotent
