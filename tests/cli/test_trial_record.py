"""`harness trial` keeps what it ran and shares the studies' warm start (issue 13, item 6): it built
a second warm-start cache (its default config keyed differently from the studies') and wrote no
record and no MLflow run. Its record now goes to runs/trials/<name>/records/, mirrored like a
study trial's, and a trial set up like a study's arm finds that study's warm start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from cli_main import run_main

from harness.cli.trial import TRIALS_DIR, build_spec
from harness.engine.spec import WARMSTART_BELOW_TARGET, TrialResult
from harness.engine.warmstart_key import WarmStartInputs, cache_key
from harness.study.expand import expand
from harness.study.load import load_study
from harness.tracking.mlflow_mirror import Tracker
from harness.tracking.records import make_record, read_record, record_path
from harness.tracking.results import load_results

REPO = Path(__file__).resolve().parents[2]
TINY_SETS = [
    "task.n_train=300",
    "task.n_eval=16",
    "task.reward=partial_match",
    "model.tiny.hidden_size=32",
    "model.tiny.layers=1",
    "model.tiny.heads=2",
    "model.tiny.intermediate_size=64",
    "warmstart.steps=10",
    "train.prompts_per_step=2",
    "train.max_new_tokens=4",
    "train.eval_every=0",
    "train.eval_samples=1",
]
SETS = [arg for s in TINY_SETS for arg in ("--set", s)]


@pytest.fixture(autouse=True)
def _here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    torch.set_num_threads(1)


def test_a_trial_writes_its_record_and_mirrors_it(tmp_path, monkeypatch, capsys):
    code, out, err = run_main(monkeypatch, capsys, "trial", "-a", "rloo", "--steps", "1", *SETS)
    assert code == 0, err
    folder = TRIALS_DIR / "adhoc"
    (path,) = (folder / "records").glob("*.json")
    record = read_record(path)
    assert record.status == "completed" and record.study == "adhoc" and record.arm == "rloo"
    assert f"record: {path} (mirrored to MLflow sqlite:///{(tmp_path / folder).resolve()}/mlflow.db)" in out
    (warning,) = record.warnings  # 10 SFT steps do not reach the 0.4 target
    assert warning.startswith(WARMSTART_BELOW_TARGET) and f"warning: {warning}" in out
    tracker = Tracker(None, folder, "adhoc")
    assert Tracker.holds(tracker.trial_runs(record.trial_id)[record.trial_id], record)
    assert load_results(folder).trials["warnings"].tolist() == [warning]

    code, out, err = run_main(monkeypatch, capsys, "trial", "-a", "rloo", "--steps", "1", "--json", *SETS)
    assert code == 0, err
    assert json.loads(out)["warnings"] == [warning] and f"record: {path}" in err
    assert read_record(path).attempt == 2  # a re-run is the next attempt; the first is kept
    assert read_record(folder / "records" / "superseded" / f"{record.trial_id}.1.json") == record


@pytest.mark.slow
def test_a_failed_trial_is_recorded_as_failed(monkeypatch, capsys):
    import harness.engine.trial as engine_trial

    def fail(spec, folder=None):
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(engine_trial, "run_trial", fail)
    code, out, err = run_main(monkeypatch, capsys, "trial", "-a", "grpo", "--name", "probe")
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    spec = build_spec("grpo", None, None, 0, [], "probe")
    record = read_record(record_path(TRIALS_DIR / "probe", spec.trial_id))
    assert record.status == "failed" and record.error == "RuntimeError: CUDA out of memory"


def test_no_record_writes_no_record(tmp_path, monkeypatch, capsys):
    code, out, err = run_main(monkeypatch, capsys, "trial", "-a", "grpo", "--steps", "1", "--no-record", *SETS)
    assert code == 0, err
    assert out.startswith("trial grpo-s0-") and "record:" not in out
    assert not (tmp_path / "runs").exists()


def test_a_bad_name_is_refused_before_anything_runs(tmp_path, monkeypatch, capsys):
    code, out, err = run_main(monkeypatch, capsys, "trial", "-a", "grpo", "--name", "../up")
    assert code == 2 and err.strip().startswith("error: --name '../up' must not contain a path separator"), err
    assert not any(tmp_path.iterdir())


def test_a_trial_set_up_like_the_quickstart_shares_its_warm_start(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # dtype auto is float32 here, as on CPU
    study = expand(load_study(REPO / "studies" / "quickstart.yaml"))[0]
    trial = build_spec("grpo", None, None, 0, [])
    assert trial.model.dtype == "auto" and study.model.dtype == "float32"
    assert trial.cache_dir == study.cache_dir
    assert cache_key(WarmStartInputs.of(trial)) == cache_key(WarmStartInputs.of(study))
    bf16 = build_spec("grpo", None, None, 0, ["model.dtype=bfloat16"])
    assert cache_key(WarmStartInputs.of(bf16)) != cache_key(WarmStartInputs.of(study))


def test_a_record_without_warnings_dumps_as_before_the_field():
    spec = build_spec("grpo", None, None, 0, [])
    plain = make_record(spec, TrialResult(trial_id=spec.trial_id), started_at=0, finished_at=0)
    assert "warnings" not in json.loads(plain.model_dump_json())
    line = f"{WARMSTART_BELOW_TARGET}: ..."
    warned = make_record(spec, TrialResult(trial_id=spec.trial_id, warnings=[line]), started_at=0, finished_at=0)
    assert json.loads(warned.model_dump_json())["warnings"] == [line]
    assert warned.fingerprint() != plain.fingerprint()
