"""The MLflow mirror holds exactly what the local records hold, and never breaks a trial."""

from __future__ import annotations

import json
import socket
import threading
import time
import warnings
from pathlib import Path

import pytest

from harness.tracking import records
from harness.tracking.mlflow_layout import (
    FINAL_PREFIX,
    MAX_PARAM_VALUE,
    SYNCED_TAG,
    mlflow_key,
    param_items,
    trial_tags,
)
from harness.tracking.mlflow_mirror import (
    Tracker,
    TrackingWarning,
    default_tracking_uri,
    sync,
)


def closed_port_uri(auth: str = "") -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://{auth}127.0.0.1:{port}"  # nothing listens there once the socket is closed


def assert_mirrors(tracker: Tracker, record: records.TrialRecord) -> None:
    """MLflow's run for ``record`` holds its params, tags, final metrics and every history value."""
    client = tracker.client
    runs = tracker.trial_runs(record.trial_id)[record.trial_id]
    assert len(runs) == 1, "exactly one active run per trial"
    run = client.get_run(runs[0].info.run_id)
    data, info = run.data, run.info

    assert data.params == param_items(record.spec)
    assert data.params["algorithm.lr"] == str(record.spec["algorithm"]["lr"])
    assert data.params["train.steps"] == str(record.spec["train"]["steps"])
    for key, value in trial_tags(record).items():
        assert data.tags[key] == value, key
    assert data.tags[SYNCED_TAG] == "1"
    assert data.tags["mlflow.parentRunId"] == tracker.parent_run_id()
    assert info.status == ("FINISHED" if record.status == "completed" else "FAILED")
    assert info.run_name == record.trial_id
    assert info.start_time == records.iso_to_ms(record.started_at)
    assert info.end_time == records.iso_to_ms(record.finished_at)

    finals = {k: v for k, v in data.metrics.items() if k.startswith(FINAL_PREFIX)}
    assert finals == pytest.approx({mlflow_key(FINAL_PREFIX + k): v for k, v in record.final.items()}, nan_ok=True)
    assert data.metrics["wall_time_s"] == record.wall_time_s

    expected: dict[str, list[tuple[int, float]]] = {}
    for step, key, value in records.history_points(record):
        expected.setdefault(mlflow_key(key), []).append((step, value))
    history_keys = {k for k in data.metrics if not k.startswith(FINAL_PREFIX) and k != "wall_time_s"}
    assert history_keys == set(expected)
    for key, points in expected.items():
        logged = sorted((m.step, m.value) for m in client.get_metric_history(info.run_id, key))
        assert logged == sorted(points), key

    folder = Path(client.download_artifacts(info.run_id, "", dst_path=str(tracker.study_dir / "dl" / info.run_id)))
    assert sorted(p.name for p in folder.iterdir()) == [
        "config.json",
        "config.yaml",
        "history.csv",
        "history.json",
        "record.json",
    ]
    assert json.loads((folder / "config.json").read_text()) == record.spec
    assert json.loads((folder / "history.json").read_text()) == record.history
    assert records.read_record(folder / "record.json").fingerprint() == record.fingerprint()
    assert (folder / "history.csv").read_text().count("\n") == len(record.history) + 1


@pytest.fixture
def recs(make_record, make_spec):
    long_spec = make_spec("rloo", 1, preset="rloo").model_copy(update={"cache_dir": "x" * (MAX_PARAM_VALUE + 50)})
    odd = make_record("grpo", 0)
    odd.history[1]["eval/pass@1"] = 0.75  # a name MLflow rejects: mirrored as eval/pass_1
    odd.final["eval/pass@1"] = 0.75
    assert mlflow_key("eval/pass@1") == "eval/pass_1" and mlflow_key("train/loss") == "train/loss"
    return [
        odd,
        make_record("grpo[lr=0.003]", 1, lr=0.003),
        make_record("rloo", 1, spec=long_spec),
        make_record("dr_grpo", 0, status="failed", steps=3),
    ]


def test_mirror_holds_exactly_the_records(study_dir, recs):
    tracker = Tracker(None, study_dir, "demo")
    assert tracker.tracking_uri == default_tracking_uri(study_dir)
    for rec in recs:
        records.write_record(study_dir, rec)
        assert tracker.log_record(rec) is True
    for rec in recs:
        assert_mirrors(tracker, rec)
    long = param_items(recs[2].spec)["cache_dir"]
    assert len(long) == MAX_PARAM_VALUE and long.endswith("full value in config.json]")

    experiment = tracker.client.get_experiment(tracker.experiment_id())
    assert experiment.name == "demo"
    assert experiment.artifact_location == (study_dir.resolve() / "mlartifacts").as_uri()
    assert (study_dir / "mlartifacts").is_dir()
    parents = tracker._search("tags.`harness.role` = 'study'")
    assert [p.info.run_id for p in parents] == [tracker.parent_run_id()]

    # another process (a fresh Tracker) finds the same experiment, parent and runs: nothing new
    again = Tracker(None, study_dir, "demo")
    for rec in recs:
        assert again.log_record(rec) is True
    assert again.parent_run_id() == tracker.parent_run_id()
    assert sum(len(v) for v in again.trial_runs().values()) == len(recs)
    report = sync(study_dir)
    assert (report.already_present, report.sent, report.failed) == (len(recs), 0, 0)


def test_partial_or_stale_runs_are_replaced_not_duplicated(study_dir, make_record):
    tracker = Tracker(None, study_dir, "demo")
    rec = make_record("grpo", 0)
    # a partial mirror: a crash after create_run, before the completeness marker
    tracker.client.create_run(
        tracker.experiment_id(), tags={"harness.role": "trial", "trial_id": rec.trial_id}, run_name="partial"
    )
    assert tracker.find_trial_run(rec.trial_id) is None
    assert tracker.log_record(rec)
    assert_mirrors(tracker, rec)

    # a retry of the trial gives a new record (attempt 2): the old mirror is replaced
    retry = make_record("grpo", 0, attempt=2, offset=0.5)
    assert tracker.log_record(retry)
    assert_mirrors(tracker, retry)
    assert tracker.find_trial_run(rec.trial_id).data.tags["attempt"] == "2"


def test_parent_run_is_created_once_under_concurrency(study_dir):
    trackers = [Tracker(None, study_dir, "race") for _ in range(3)]
    for t in trackers:
        t.experiment_id()
    ids: list[str] = []
    threads = [threading.Thread(target=lambda t=t: ids.append(t.parent_run_id())) for t in trackers]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(set(ids)) == 1
    assert len(trackers[0]._search("tags.`harness.role` = 'study'")) == 1

    # a duplicate made elsewhere (another machine) loses to the oldest parent
    later = trackers[0].client.create_run(
        trackers[0].experiment_id(),
        start_time=int(time.time() * 1000) + 60_000,
        tags={"harness.role": "study"},
    )
    assert Tracker(None, study_dir, "race").parent_run_id() == ids[0] != later.info.run_id


def test_unreachable_server_warns_fast_keeps_record_then_sync_restores(study_dir, recs):
    uri = closed_port_uri("alice:s3cret@")
    tracker = Tracker(uri, study_dir, "demo")
    for rec in recs:
        path = records.write_record(study_dir, rec)
        before = path.read_bytes()
        start = time.monotonic()
        with pytest.warns(TrackingWarning) as caught:
            assert tracker.log_record(rec) is False
        assert time.monotonic() - start < 5
        message = str(caught[0].message)
        assert "s3cret" not in message and "alice:***@127.0.0.1" in message
        assert "local record is safe" in message and f"harness mirror-to-mlflow {study_dir.resolve()}" in message
        assert "cannot connect" in message
        assert path.read_bytes() == before

    with pytest.warns(TrackingWarning):
        report = sync(study_dir, uri)
    assert (report.sent, report.failed) == (0, len(recs)) and not report.ok
    assert "s3cret" not in str(report)

    report = sync(study_dir)  # the study's own sqlite store is reachable
    assert (report.already_present, report.sent, report.failed) == (0, len(recs), 0)
    local = Tracker(None, study_dir, "demo")
    for rec in records.read_records(study_dir):
        assert_mirrors(local, rec)
    report = sync(study_dir)
    assert (report.already_present, report.sent, report.failed) == (len(recs), 0, 0)
    assert str(report).endswith("4 records; 4 already present, 0 sent, 0 failed")


def test_log_record_never_raises(study_dir, make_record, monkeypatch):
    tracker = Tracker(None, study_dir, "demo")
    rec = make_record("grpo", 0)

    def broken(*args, **kwargs):
        raise RuntimeError("disk I/O error")

    monkeypatch.setattr(tracker.client, "create_run", broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert tracker.log_record(rec) is False
    (warning,) = [w for w in caught if issubclass(w.category, TrackingWarning)]
    assert "RuntimeError: disk I/O error" in str(warning.message)
    assert "harness mirror-to-mlflow" in str(warning.message)
