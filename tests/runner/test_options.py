"""One options type from the command line to the worker process, and errors that cross the
trial process's boundary as typed records."""

from __future__ import annotations

import json

import pytest
import typer
from runner_helpers import options, write_study

from harness.cli import app
from harness.errors import ErrorRecord, one_line
from harness.runner import child
from harness.runner.launch import run_trial_process
from harness.runner.options import RunOptions, flag_of
from harness.runner.worker_config import WorkerConfig
from harness.study.expand import condition_spec
from harness.study.load import load_study

PASSWORD = "pw-5d1e"
STORAGE = f"postgresql://user:{PASSWORD}@db.example/studies"
TRACKING = f"http://user:{PASSWORD}@mlflow.example"


def worker_config(**run) -> WorkerConfig:
    return WorkerConfig(
        name="w1", device="cpu", study_file="s.yaml", study_dir="out/s", queues=["s"], run=options(**run)
    )


def test_the_worker_config_holds_no_url_and_the_worker_reads_them_from_its_environment():
    config = worker_config(storage=STORAGE, tracking_uri=TRACKING, heartbeat_interval=2.0, grace_period=None)
    text = config.to_json()
    assert PASSWORD not in text and "storage" not in json.loads(text)["run"]
    env = config.secret_env()
    assert env == {"HARNESS_WORKER_STORAGE": STORAGE, "HARNESS_WORKER_TRACKING": TRACKING}
    again = WorkerConfig.from_json(text, env)
    assert again.run.storage == STORAGE and again.run.tracking_uri == TRACKING
    assert again.run.heartbeat_interval == 2.0 and again.run.grace_period == config.run.grace_period == 60.0
    assert again.model_dump() == config.model_dump()
    assert WorkerConfig.from_json(text, {}).run.storage is None  # nothing in the file to fall back on


def test_a_worker_removes_every_url_variable_before_its_trials_start():
    assert set(RunOptions.secret_env_vars()) == {
        "HARNESS_STORAGE",
        "HARNESS_TRACKING_URI",
        "HARNESS_WORKER_STORAGE",
        "HARNESS_WORKER_TRACKING",
    }


def _flags(command: str) -> set[str]:
    group = typer.main.get_command(app)
    params = group.commands[command].params  # type: ignore[attr-defined]
    return {p.name for p in params if p.param_type_name == "option"}


def test_every_runner_flag_is_a_field_of_the_options_under_the_same_name():
    fields = {name for name, field in RunOptions.model_fields.items() if (field.json_schema_extra or {}).get("flag")}
    assert _flags("run") == fields
    # run alone starts a version, and chooses an executor (a worker is the hand-started local pool)
    assert _flags("worker") == fields - {"retries", "kill_grace", "new_version", "executor", "address"}
    group = typer.main.get_command(app)
    run = {p.name: p for p in group.commands["run"].params}  # type: ignore[attr-defined]
    for name in fields:
        assert flag_of(name) in run[name].opts
        assert run[name].help == RunOptions.model_fields[name].description
    assert run["storage"].envvar == "HARNESS_STORAGE" and run["tracking_uri"].envvar == "HARNESS_TRACKING_URI"


def _spec_file(tmp_path):
    study = load_study(write_study(tmp_path, ["ok_a"]))
    spec = condition_spec(study, "ok_a", 0)
    path = tmp_path / "spec.json"
    path.write_text(spec.model_dump_json())
    return spec, path


def test_a_failing_trial_writes_a_typed_error_record(tmp_path, fake_env):
    _spec, spec_path = _spec_file(tmp_path)
    result = tmp_path / "result.json"
    assert child.run(spec_path, result, "fake_trials:failing_seed_check") == 1
    payload = json.loads(result.read_text())
    assert payload["ok"] is False
    record = ErrorRecord.from_dict(payload["error"])
    assert record.type == "SeedCheckError"
    assert record.message == "seeds 0 and 1 gave identical rollouts in arm ok_a's first step"


@pytest.mark.parametrize("message", ["short", "two\nlines  and   spaces", "x" * 2000])
def test_the_recorded_reason_reads_as_one_line_of_the_error(message):
    err = RuntimeError(message)
    assert ErrorRecord.of(err).line() == one_line(err)
    assert len(ErrorRecord.of(err).line()) <= 500


def test_the_launcher_reads_the_record_back_and_keeps_its_type(tmp_path, fake_env, monkeypatch):
    monkeypatch.setenv("HARNESS_TRIAL_START", "exec")  # a fresh interpreter: this test's env, not an earlier one's
    spec, _ = _spec_file(tmp_path)
    outcome = run_trial_process(
        spec.model_dump_json(),
        trial_fn="fake_trials:failing_seed_check",
        work_dir=tmp_path / "tmp",
        log_path=tmp_path / "trial.log",
        stem="t",
        timeout_s=60,
    )
    assert outcome.result is None and outcome.error is not None
    assert outcome.error.type == "SeedCheckError"
    assert outcome.reason == "SeedCheckError: seeds 0 and 1 gave identical rollouts in arm ok_a's first step"
