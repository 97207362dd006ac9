"""Results frames (records + Optuna states) and the mirror-to-mlflow / ui / results commands."""

from __future__ import annotations

import json
import math
import sys

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

import harness
from harness.cli import app
from harness.cli.results_cmds import ui_command, ui_environment
from harness.errors import ConfigError, HarnessError
from harness.study.load import load_study
from harness.tracking import records, study_ref
from harness.tracking.results import BASE_COLUMNS, CURVE_COLUMNS, load_results

STUDY = {
    "name": "demo",
    "primary_metric": "eval/accuracy",
    "direction": "maximize",
    "control": "grpo",
    "seeds": 3,
    "train": {"steps": 4, "eval_every": 2},
    "arms": [{"name": "grpo", "algorithm": "grpo"}, {"name": "drgrpo", "algorithm": "dr_grpo"}],
}


@pytest.fixture(scope="module")
def filled(tmp_path_factory, make_record, make_spec):
    """A study folder: 3 completed, 1 failed and 1 tuning record; 2 queued and 1 failed Optuna trials.

    Shared by the tests of this module, which only read it.
    """
    folder = tmp_path_factory.mktemp("filled") / "demo"
    folder.mkdir()
    (folder / "study.yaml").write_text(yaml.safe_dump({**STUDY, "output_dir": str(folder)}))
    recs = [
        make_record("grpo", 0),
        make_record("grpo", 1),
        make_record("drgrpo", 0, preset="dr_grpo", offset=0.1),
        make_record("drgrpo", 1, preset="dr_grpo", status="failed", steps=3),
        make_record("grpo", 100, phase="tune"),
    ]
    for rec in recs:
        records.write_record(folder, rec)

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=f"sqlite:///{folder / 'optuna.db'}", study_name="demo/compare")
    waiting, running = make_spec("grpo", 2), make_spec("drgrpo", 2, preset="dr_grpo")
    study.enqueue_trial(
        {},
        user_attrs={
            "trial_id": running.trial_id,
            "arm": running.arm,
            "seed": running.seed,
            "phase": "compare",
            "spec": json.dumps(running.model_dump(mode="json")),
        },
    )
    study.ask()  # the enqueued trial is now RUNNING
    failed = study.ask()  # a trial with no record: the worker died before writing one
    failed.set_user_attr("trial_id", "grpo-s7-0123abcd")
    failed.set_user_attr("reason", "worker lost (heartbeat stale)")
    study.tell(failed, state=optuna.trial.TrialState.FAIL)
    study.enqueue_trial({}, user_attrs={"trial_id": waiting.trial_id, "arm": "grpo", "seed": 2})
    return folder, recs, {"waiting": waiting, "running": running}


def test_trials_frame_has_records_and_queue_states(filled):
    folder, recs, queued = filled
    res = load_results(folder)
    trials = res.trials.set_index("trial_id")
    compare = [r for r in recs if r.phase == "compare"]
    assert len(res.trials) == len(compare) + 3
    assert list(res.trials.columns[: len(BASE_COLUMNS)]) == BASE_COLUMNS
    finals = ["eval/accuracy", "eval/mean_reward", "eval/accuracy_start", "tokens/total", "train/loss"]
    params = [c for c in res.trials.columns if c.startswith("param/")]
    assert list(res.trials.columns) == BASE_COLUMNS + finals + params
    assert params == sorted(params) and {"param/algorithm.lr", "param/train.steps", "param/seed"} <= set(params)
    assert res.trials["seed"].dtype == "int64"

    for rec in compare:
        row = trials.loc[rec.trial_id]
        assert (row["arm"], row["seed"], row["status"], row["config_hash"]) == (
            rec.arm,
            rec.seed,
            rec.status,
            rec.config_hash,
        )
        assert row["wall_time_s"] == rec.wall_time_s
        for key in finals:
            assert row[key] == rec.final[key] if rec.final else math.isnan(row[key])
        assert row["param/algorithm.name"] == rec.spec["algorithm"]["name"]
        assert row["param/algorithm.lr"] == rec.spec["algorithm"]["lr"]

    failed = trials.loc[recs[3].trial_id]
    assert failed["status"] == "failed" and failed["error"] == "NonFiniteError: loss is nan at step 3"
    assert trials.loc[queued["waiting"].trial_id, "status"] == "waiting"
    running = trials.loc[queued["running"].trial_id]
    assert (running["status"], running["arm"], running["seed"]) == ("running", "drgrpo", 2)
    assert running["config_hash"] == queued["running"].config_hash()
    assert running["param/algorithm.name"] == "dr_grpo" and math.isnan(running["eval/accuracy"])
    lost = trials.loc["grpo-s7-0123abcd"]
    assert (lost["status"], lost["error"], lost["seed"]) == ("failed", "worker lost (heartbeat stale)", 7)
    assert recs[4].trial_id not in trials.index  # tuning trials are not comparison trials


def test_curves_frame_holds_every_history_value(filled):
    folder, recs, _ = filled
    curves = load_results(folder).curves
    assert list(curves.columns) == CURVE_COLUMNS
    assert [str(curves[c].dtype) for c in ("seed", "step", "value")] == ["int64", "int64", "float64"]
    compare = [r for r in recs if r.phase == "compare"]
    assert len(curves) == sum(len(records.history_points(r)) for r in compare)
    for rec in compare:
        got = curves[curves["trial_id"] == rec.trial_id]
        expected = pd.DataFrame(records.history_points(rec), columns=["step", "metric", "value"])
        pd.testing.assert_frame_equal(
            got[["step", "metric", "value"]].reset_index(drop=True), expected, check_dtype=False
        )
        assert set(got["arm"]) == {rec.arm} and set(got["seed"]) == {rec.seed}


def test_meta_describes_the_study(filled):
    folder, recs, _ = filled
    meta = load_results(folder).meta
    assert meta.study == "demo"
    assert (meta.primary_metric, meta.direction, meta.control) == ("eval/accuracy", "maximize", "grpo")
    assert meta.conditions == ["grpo", "drgrpo"]
    assert meta.comparisons == [("drgrpo", "grpo")]
    assert meta.seeds == [0, 1, 2]
    assert meta.seeds_by_condition == {"grpo": [0, 1], "drgrpo": [0]}
    assert meta.seed_matched is False
    assert meta.harness_version == harness.__version__
    assert meta.git_commit == recs[0].git_commit
    assert meta.status_counts == {"completed": 3, "failed": 2, "running": 1, "waiting": 1}


def test_study_yaml_path_study_object_and_package_shortcut(filled, monkeypatch):
    folder, _, _ = filled
    expected = load_results(folder).trials
    via_yaml = load_results(folder / "study.yaml")
    pd.testing.assert_frame_equal(via_yaml.trials, expected)
    pd.testing.assert_frame_equal(harness.results(folder).trials, expected)
    study = load_study(folder / "study.yaml")
    pd.testing.assert_frame_equal(load_results(study).trials, expected)

    # a snapshot that no longer loads (an older schema): its raw fields give the same frames and meta
    def older_schema(path):
        raise ConfigError(f"{path}: unknown key")

    monkeypatch.setattr(study_ref, "load_study", older_schema)
    with pytest.warns(UserWarning, match="using its raw fields"):
        plain = load_results(folder)
    pd.testing.assert_frame_equal(plain.trials, expected)
    assert plain.meta.comparisons == [("drgrpo", "grpo")] and plain.meta.seeds == [0, 1, 2]


@pytest.mark.parametrize("first", ["optuna_trials", "read_records"])
def test_a_trial_finishing_while_the_results_are_read_never_reads_as_a_failure(
    tmp_path, make_record, monkeypatch, first
):
    """A worker writes a trial's record, then its Optuna state. Whichever of the two reads of
    load_results comes first, the trial finishing right after it reads as running or completed,
    never as a finished trial without a result (which a sequential replay would count as done)."""
    import optuna

    from harness.tracking import results as results_module

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    folder = tmp_path / "demo"
    folder.mkdir()
    (folder / "study.yaml").write_text(yaml.safe_dump({**STUDY, "output_dir": str(folder)}))
    record = make_record("grpo", 0)
    queue = optuna.create_study(storage=f"sqlite:///{folder / 'optuna.db'}", study_name="demo/compare")
    queue.enqueue_trial({}, user_attrs={"trial_id": record.trial_id, "arm": "grpo", "seed": 0, "phase": "compare"})
    running = queue.ask()

    def finish() -> None:  # what a worker does: the record first, then the state
        records.write_record(folder, record)
        queue.tell(running, record.final["eval/accuracy"])

    original = getattr(results_module, first)

    def then_finish(*args, **kwargs):
        out = original(*args, **kwargs)
        monkeypatch.setattr(results_module, first, original)  # once
        finish()
        return out

    monkeypatch.setattr(results_module, first, then_finish)
    row = load_results(folder).trials.set_index("trial_id").loc[record.trial_id]
    assert row["status"] in ("running", "completed"), row["error"]
    assert (row["status"] == "completed") == (not math.isnan(row.get("eval/accuracy", math.nan)))
    assert load_results(folder).trials.set_index("trial_id").loc[record.trial_id, "status"] == "completed"


def test_grid_conditions_without_study_file_and_broken_queue(tmp_path, make_record, monkeypatch):
    folder = tmp_path / "grid"
    for arm in ("grpo[lr=0.001]", "grpo[lr=0.003]", "cispo[lr=0.001]", "cispo[lr=0.003]"):
        for seed in (0, 1):
            records.write_record(folder, make_record(arm, seed))
    (folder / "optuna.db").write_bytes(b"this is not a database")
    with pytest.warns(UserWarning, match="Optuna storage"):
        res = load_results(folder)
    assert len(res.trials) == 8 and set(res.trials["status"]) == {"completed"}
    assert res.meta.study == "demo" and res.meta.seed_matched is True
    assert res.meta.control is None and res.meta.comparisons == []
    assert res.meta.conditions == sorted(res.meta.conditions)
    nothing = tmp_path / "nothing"
    nothing.mkdir()
    none = load_results(nothing)
    assert list(none.trials.columns) == BASE_COLUMNS and none.trials.empty and none.curves.empty
    with pytest.raises(HarnessError, match="no study file or study folder"):
        load_results(tmp_path / "missing")


def test_results_command_prints_table_and_writes_csvs(filled, tmp_path):
    folder, recs, _ = filled
    out = CliRunner().invoke(
        app, ["results", str(folder), "--csv", str(tmp_path / "t.csv"), "--curves-csv", str(tmp_path / "c.csv")]
    )
    assert out.exit_code == 0, out.output
    assert recs[0].trial_id in out.output and "NonFiniteError: loss is nan" in out.output
    assert "drgrpo: eval/accuracy" in out.output and "n=2" in out.output
    trials = pd.read_csv(tmp_path / "t.csv")
    assert len(trials) == 7 and "param/algorithm.lr" in trials.columns
    assert len(pd.read_csv(tmp_path / "c.csv")) == len(load_results(folder).curves)


def test_sync_and_ui_commands(study_dir, make_record, tmp_path):
    for seed in (0, 1):
        records.write_record(study_dir, make_record("grpo", seed))
    runner = CliRunner()
    with pytest.warns(UserWarning):
        out = runner.invoke(
            app, ["mirror-to-mlflow", str(study_dir), "--tracking-uri", "http://bob:hunter22@127.0.0.1:9"]
        )
    assert out.exit_code == 1 and "hunter22" not in out.output and "2 failed" in out.output
    out = runner.invoke(app, ["mirror-to-mlflow", str(study_dir)])
    assert out.exit_code == 0 and "0 already present, 2 sent, 0 failed" in out.output

    command = ui_command(host="127.0.0.1", port=5123)
    assert command[1:] == ["-m", "mlflow", "ui", "--host", "127.0.0.1", "--port", "5123"]
    store = f"sqlite:///{study_dir.resolve()}/mlflow.db"
    assert ui_environment(study_dir)["MLFLOW_BACKEND_STORE_URI"] == store
    out = runner.invoke(app, ["ui", str(study_dir), "--port", "5123", "--dry-run"])
    assert out.exit_code == 0 and "http://127.0.0.1:5123" in out.output
    assert f"MLFLOW_BACKEND_STORE_URI={store} {sys.executable} -m mlflow ui --host" in out.output
    out = runner.invoke(app, ["ui", str(study_dir), "--dry-run", "--tracking-uri", "postgresql://h:hunter22@db/m"])
    assert out.exit_code == 0 and "MLFLOW_BACKEND_STORE_URI=postgresql://h:***@db/m " in out.output
    assert "hunter22" not in out.output
    empty = tmp_path / "fresh"
    empty.mkdir()
    out = runner.invoke(app, ["ui", str(empty)])
    assert isinstance(out.exception, HarnessError) and "harness mirror-to-mlflow" in str(out.exception)
