"""Trial records: the local, authoritative result of a trial."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

import harness
from harness.engine.spec import TrialResult
from harness.errors import HarnessError
from harness.ground.urls import redact_text, redact_url
from harness.tracking import records


def test_make_record_fills_contract_fields_and_provenance(make_record, make_spec):
    rec = make_record("grpo", 2)
    spec = make_spec("grpo", 2)
    assert rec.trial_id == spec.trial_id
    assert (rec.study, rec.arm, rec.seed, rec.config_hash) == ("demo", "grpo", 2, spec.config_hash())
    assert rec.spec == spec.model_dump(mode="json")
    assert rec.status == "completed" and rec.error is None
    assert rec.started_at.startswith("2025-01-02T03:04:05") and rec.finished_at.startswith("2025-01-02T03:04:07")
    assert rec.host == records.host() and rec.device == "cpu"
    assert rec.harness_version == records.harness_version()
    assert rec.harness_path == str(Path(harness.__file__).resolve().parent)
    checkout = Path(harness.__file__).resolve().parents[1]
    if (checkout / ".git").exists():  # run from a checkout: the record names its HEAD
        head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True)
        assert rec.git_commit == records.git_commit() == head.stdout.strip() and len(rec.git_commit) == 40
    else:  # an installed package has no commit to name
        assert rec.git_commit is None
    assert (rec.attempt, rec.phase) == (1, "compare")
    dumped = json.loads(rec.model_dump_json())
    assert set(dumped) == {
        "trial_id",
        "study",
        "arm",
        "seed",
        "config_hash",
        "spec",
        "status",
        "error",
        "final",
        "history",
        "wall_time_s",
        "started_at",
        "finished_at",
        "host",
        "device",
        "git_commit",
        "harness_version",
        "harness_path",
        "attempt",
        "phase",
    }


def test_write_read_roundtrip_is_exact_and_atomic(tmp_path, make_record):
    rec = make_record("grpo", 0)
    rec.final["train/kl_ref"] = float("nan")
    rec.history[0]["train/grad_norm"] = float("inf")
    path = records.write_record(tmp_path, rec)
    assert path == tmp_path / "records" / f"{rec.trial_id}.json"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left behind
    (back,) = records.read_records(tmp_path)
    assert math.isnan(back.final["train/kl_ref"]) and back.history[0]["train/grad_norm"] == math.inf
    assert back.fingerprint() == rec.fingerprint()
    assert back.history == rec.history
    assert back.model_dump_json() == rec.model_dump_json()


def test_retry_keeps_latest_and_archives_failed_attempts(tmp_path, make_record):
    first = make_record("grpo", 0, status="failed", attempt=1)
    second = make_record("grpo", 0, status="failed", attempt=2)
    third = make_record("grpo", 0, status="completed", attempt=3)
    for rec in (first, second, third):
        records.write_record(tmp_path, rec)
    (latest,) = records.read_records(tmp_path)
    assert latest.attempt == 3 and latest.status == "completed"
    archived = records.read_failed_attempts(tmp_path)
    assert [(r.attempt, r.status) for r in archived] == [(1, "failed"), (2, "failed")]
    assert (tmp_path / "records" / "failed" / f"{first.trial_id}.1.json").is_file()
    assert archived[0].error.startswith("NonFiniteError")


def test_unreadable_record_is_skipped_with_a_warning_naming_it(tmp_path, make_record):
    records.write_record(tmp_path, make_record("grpo", 0))
    bad = tmp_path / "records" / "broken.json"
    bad.write_text("{not json")
    with pytest.warns(UserWarning, match="broken.json"):
        assert len(records.read_records(tmp_path)) == 1
    with pytest.raises(HarnessError, match="broken.json"):
        records.read_records(tmp_path, strict=True)
    assert records.read_records(tmp_path / "nowhere") == []


def test_trial_ids_never_escape_the_records_folder(tmp_path):
    path = records.record_path(tmp_path, "a/../../b")
    assert path.parent == tmp_path / "records"
    with pytest.raises(HarnessError):
        records.record_path(tmp_path, "..")


def test_flatten_and_history_points(make_record):
    assert records.flatten({"a": {"b": 1, "c": {"d": [1, 2]}}, "e": None}) == {"a.b": 1, "a.c.d": [1, 2], "e": None}
    rec = make_record("grpo", 1, steps=2)
    points = records.history_points(rec)
    assert (0, "train/reward_mean", 1.0) in points and (1, "eval/accuracy", pytest.approx(0.11)) in points
    assert all(key != "step" for _, key, _ in points)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://alice:s3cret@mlflow.local:5000/x", "http://alice:***@mlflow.local:5000/x"),
        ("https://TOKEN123@host/api", "https://***@host/api"),
        ("https://host/p?token=abc&user=bob", "https://host/p?token=***&user=bob"),
        ("sqlite:////abs/study/mlflow.db", "sqlite:////abs/study/mlflow.db"),
        ("http://127.0.0.1:5000", "http://127.0.0.1:5000"),
        ("databricks://profile", "databricks://profile"),
    ],
)
def test_redact_url(url, shown):
    assert redact_url(url) == shown


def test_redact_text_masks_url_and_secret_everywhere():
    url = "http://alice:s3cret@h:5000"
    text = redact_text(f"API request to {url}/api/2.0/x failed (auth s3cret)", url)
    assert "s3cret" not in text and "http://alice:***@h:5000/api/2.0/x" in text


def test_failure_result_for_a_trial_that_raised(tmp_path, make_spec):
    spec = make_spec("grpo", 3)
    result = TrialResult(trial_id=spec.trial_id, status="failed", error="ValueError: loss is nan", wall_time_s=2.0)
    rec = records.make_record(spec, result, attempt=2, phase="compare", started_at=0.0, device="cuda:1")
    assert (rec.status, rec.error, rec.attempt, rec.device) == ("failed", "ValueError: loss is nan", 2, "cuda:1")
    assert rec.started_at.startswith("1970-01-01T00:00:00")
    records.write_record(tmp_path, rec)
    assert records.read_records(tmp_path)[0].error == "ValueError: loss is nan"
