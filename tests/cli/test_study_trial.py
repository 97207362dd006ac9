"""`harness trial --study FILE --arm NAME --seed N` (issue 37, item 21): one trial of a study's
arm as the runner would run it (the same spec, the same trial id), its record beside the
study's and never among them; ``--steps`` shortens it under another trial id, and says so."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from cli_main import run_main

import harness.trainers.dispatch as dispatch
from harness.cli.study_trial import STUDY_TRIALS_DIR
from harness.engine.spec import TrialResult
from harness.study.expand import expand
from harness.study.load import load_study
from harness.tracking.mlflow_mirror import Tracker
from harness.tracking.records import read_record, read_records, record_path
from harness.tracking.results import load_results


def _study(tmp_path: Path, **extra) -> Path:
    data = {
        "name": "st",
        "output_dir": str(tmp_path / "out" / "st"),
        "seeds": [3, 4],
        "control": "base",
        "train": {"steps": 6, "eval_every": 2},
        "arms": [
            {"name": "base", "algorithm": "grpo"},
            {"name": "wide", "algorithm": "grpo", "set": {"eps_high": 0.28}},
        ],
        **extra,
    }
    path = tmp_path / "st.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def ran(monkeypatch, tmp_path):
    """The specs the (fake) trial function was given, in order; it scores every trial 0.5. The
    MLflow mirror is noted, not run (its own tests run it): (tracking URI, experiment, trial id)."""
    monkeypatch.chdir(tmp_path)
    specs = []

    def fake(spec):
        specs.append(spec)
        return TrialResult(trial_id=spec.trial_id, final={"eval/accuracy": 0.5}, wall_time_s=0.1)

    def noted(tracker, record):
        mirrored.append((tracker.tracking_uri, tracker.study_name, record.trial_id))
        return True

    mirrored.clear()
    monkeypatch.setattr(dispatch, "run_trial", fake)
    monkeypatch.setattr(Tracker, "log_record", noted)
    return specs


mirrored: list[tuple[str, str, str]] = []


def test_a_study_trial_is_the_runners_spec_and_its_record_stays_apart(tmp_path, monkeypatch, capsys, ran):
    path = _study(tmp_path)
    code, out, err = run_main(monkeypatch, capsys, "trial", "--study", str(path), "--arm", "wide", "--seed", "4")
    assert code == 0, err
    (spec,) = ran
    (runners,) = [s for s in expand(load_study(path)) if s.arm == "wide" and s.seed == 4]
    assert spec.trial_id == runners.trial_id and spec.model_dump() == runners.model_dump()
    assert spec.algorithm.eps_high == 0.28 and spec.train.steps == 6
    study_dir = tmp_path / "out" / "st"
    folder = study_dir / STUDY_TRIALS_DIR
    record = read_record(record_path(folder, spec.trial_id))
    assert record.status == "completed" and record.study == "st" and record.warnings == []
    assert f"record: {record_path(folder, spec.trial_id)} (mirrored to MLflow sqlite:///" in out
    assert mirrored == [(f"sqlite:///{folder.resolve()}/mlflow.db", "st/trials", spec.trial_id)]  # not the study's
    assert read_records(study_dir) == []  # the study's own records: none
    assert not (study_dir / "records").exists() and not (study_dir / "mlflow.db").exists()
    assert load_results(folder).trials["trial_id"].tolist() == [spec.trial_id]


def test_the_seed_defaults_to_the_arms_first_and_a_grid_condition_is_an_arm(tmp_path, monkeypatch, capsys, ran):
    path = _study(tmp_path, grid={"lr": [1e-4, 2e-4]})
    condition = "base[lr=0.0002]"
    code, _, err = run_main(monkeypatch, capsys, "trial", "--study", str(path), "--arm", condition, "--no-record")
    assert code == 0, err
    (spec,) = ran
    (runners,) = [s for s in expand(load_study(path)) if s.arm == condition and s.seed == 3]
    assert spec.trial_id == runners.trial_id and spec.algorithm.lr == 2e-4
    assert not (tmp_path / "out").exists()


def test_a_shortened_trial_has_its_own_id_and_says_so(tmp_path, monkeypatch, capsys, ran):
    path = _study(tmp_path)
    args = ("trial", "--study", str(path), "--arm", "base", "--seed", "3", "--steps", "2")
    code, out, err = run_main(monkeypatch, capsys, *args)
    assert code == 0, err
    (spec,) = ran
    (runners,) = [s for s in expand(load_study(path)) if s.arm == "base" and s.seed == 3]
    assert spec.train.steps == 2 and spec.trial_id != runners.trial_id
    assert spec.model_dump(exclude={"train"}) == runners.model_dump(exclude={"train"})
    assert spec.train.model_dump(exclude={"steps"}) == runners.train.model_dump(exclude={"steps"})
    record = read_record(record_path(tmp_path / "out" / "st" / STUDY_TRIALS_DIR, spec.trial_id))
    (line,) = record.warnings
    assert line == "shortened: 2 of arm base's 6 steps (harness trial --steps); not a trial of study st"
    assert f"warning: {line}" in out and record.spec["train"]["steps"] == 2


@pytest.mark.parametrize(
    "args, message",
    [
        (["--arm", "nope"], "--arm 'nope': study 'st' has no such arm; valid: base, wide"),
        (["--arm", "base", "--seed", "0"], "--seed 0: not one of arm base's seeds in study 'st' (3, 4)"),
        (["--arm", "base", "--steps", "7"], "--steps 7: it shortens the trial, to 1 to 5 of the arm's 6 steps"),
        (["--arm", "base", "--steps", "0"], "--steps 0: it shortens the trial"),
        (["--arm", "base", "--set", "lr=1"], "--set: not with --study"),
        (["--arm", "base", "--task", "sorting", "--name", "x"], "--task, --name: not with --study"),
        (["--algorithm", "grpo"], "--study runs one trial of a study's arm: give --arm NAME"),
        ([], "--study runs one trial of a study's arm: give --arm NAME"),
    ],
)
def test_bad_input_is_one_line_and_runs_nothing(tmp_path, monkeypatch, capsys, ran, args, message):
    code, out, err = run_main(monkeypatch, capsys, "trial", "--study", str(_study(tmp_path)), *args)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith(f"error: {message}"), err
    assert ran == [] and not (tmp_path / "out").exists()


def test_an_arm_without_a_study_and_no_trial_at_all_are_refused(tmp_path, monkeypatch, capsys, ran):
    code, _, err = run_main(monkeypatch, capsys, "trial", "--arm", "base")
    assert code == 2 and "--arm names an arm of a study: give the study's file with --study" in err
    code, _, err = run_main(monkeypatch, capsys, "trial")
    assert code == 2 and "give --algorithm (an ad hoc trial) or --study FILE --arm NAME" in err
    code, _, err = run_main(monkeypatch, capsys, "trial", "--study", "nope.yaml", "--arm", "base")
    assert code == 2 and err.strip() == "error: study file not found: nope.yaml"
    assert ran == [] and not any(tmp_path.iterdir())


def test_a_tuned_study_is_refused(tmp_path, monkeypatch, capsys, ran):
    tuning = {"n_trials": 2, "seeds": [9], "search_space": {"lr": {"low": 1e-5, "high": 1e-3, "log": True}}}
    path = _study(tmp_path, tuning=tuning)
    code, _, err = run_main(monkeypatch, capsys, "trial", "--study", str(path), "--arm", "base")
    assert code == 2 and "tunes its arms first" in err, err
    assert ran == []


@pytest.mark.slow
def test_a_real_shortened_trial_of_a_tiny_study_runs_and_mirrors_apart(tmp_path, monkeypatch, capsys):
    """The builtin trainer on a tiny study, one of its 4 steps, mirrored to MLflow for real."""
    monkeypatch.chdir(tmp_path)
    tiny = {
        "task": {"name": "addition", "max_digits": 2, "n_train": 200, "n_eval": 8, "reward": "partial_match"},
        "model": {"name": "tiny", "tiny": {"hidden_size": 32, "layers": 1, "heads": 2, "intermediate_size": 64}},
        "warmstart": {"steps": 5, "batch_size": 8},
        "train": {"steps": 4, "prompts_per_step": 2, "max_new_tokens": 4, "eval_every": 0, "eval_samples": 1},
    }
    path = _study(tmp_path, **tiny)
    code, out, err = run_main(monkeypatch, capsys, "trial", "--study", str(path), "--arm", "wide", "--steps", "1")
    assert code == 0, err
    folder = tmp_path / "out" / "st" / STUDY_TRIALS_DIR
    (record,) = read_records(folder)
    assert record.status == "completed" and record.seed == 3 and [row["step"] for row in record.history] == [0, 1]
    assert record.warnings[-1].startswith("shortened: 1 of arm wide's 4 steps")
    assert Tracker.holds(Tracker(None, folder, "st/trials").trial_runs(record.trial_id)[record.trial_id], record)
    assert read_records(tmp_path / "out" / "st") == []
