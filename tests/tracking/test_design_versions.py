"""A study's analysis uses exactly the trials of its current design; trials of an earlier
version of the study are listed, never pooled."""

from __future__ import annotations

import yaml

from harness.engine.spec import TrialResult
from harness.study.expand import expand, tuned_spec
from harness.study.load import load_study
from harness.tracking import records
from harness.tracking.results import load_results


def write_study(folder, **changes):
    data = {
        "name": "edited",
        "output_dir": str(folder / "out"),
        "control": "grpo",
        "seeds": 3,
        "train": {"steps": 4, "eval_every": 2},
        "arms": [{"name": "grpo", "algorithm": "grpo"}, {"name": "rloo", "algorithm": "rloo"}],
        **changes,
    }
    path = folder / "edited.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run_fake(study, specs, value):
    for spec in specs:
        result = TrialResult(trial_id=spec.trial_id, final={"eval/accuracy": value + 0.01 * spec.seed})
        records.write_record(study.output_dir, records.make_record(spec, result))


def test_an_edited_arm_is_analysed_at_its_current_config_only(tmp_path):
    first = load_study(write_study(tmp_path))
    run_fake(first, expand(first), 0.5)
    edited_arms = [{"name": "grpo", "algorithm": "grpo", "set": {"lr": 3.0e-4}}, {"name": "rloo", "algorithm": "rloo"}]
    second = load_study(write_study(tmp_path, arms=edited_arms))
    run_fake(second, [s for s in expand(second) if s.arm == "grpo"], 0.6)

    res = load_results(tmp_path / "edited.yaml")
    assert sorted(res.trials["trial_id"]) == sorted(s.trial_id for s in expand(second))
    assert (res.trials.loc[res.trials["arm"] == "grpo", "eval/accuracy"] >= 0.6).all()  # never pooled
    assert sorted(res.earlier["trial_id"]) == sorted(s.trial_id for s in expand(first) if s.arm == "grpo")
    assert res.meta.earlier_design == ["3 trials from an earlier version of arm grpo are not used"]
    assert res.meta.seed_matched is True  # the paired design survives the edit
    assert set(res.curves["trial_id"]) <= set(res.trials["trial_id"])


def test_a_renamed_arm_and_a_dropped_seed_are_listed(tmp_path):
    first = load_study(write_study(tmp_path))
    run_fake(first, expand(first), 0.5)
    renamed = [{"name": "grpo", "algorithm": "grpo"}, {"name": "loo", "algorithm": "rloo"}]
    load_study(write_study(tmp_path, arms=renamed, seeds=2))
    res = load_results(tmp_path / "edited.yaml")
    assert sorted(res.trials["trial_id"]) == sorted(s.trial_id for s in expand(first) if s.arm == "grpo" and s.seed < 2)
    assert res.meta.conditions == ["grpo", "loo"]
    assert res.meta.earlier_design == [
        "3 trials from arm rloo (no longer in the study) are not used",
        "1 trial from seed 2 (no longer among the study's seeds) is not used",
    ]


def test_tuned_trials_from_an_earlier_search_space_are_listed(tmp_path):
    tuning = {"n_trials": 2, "seeds": [100], "search_space": {"lr": {"low": 1.0e-5, "high": 1.0e-3, "log": True}}}
    first = load_study(write_study(tmp_path, tuning=tuning))
    old = [tuned_spec(first, arm, {"lr": 9.48e-5}, seed) for arm in ("grpo", "rloo") for seed in first.seeds]
    run_fake(first, old, 0.5)
    shrunk = {**tuning, "search_space": {"lr": {"low": 1.0e-6, "high": 2.0e-6, "log": True}}}
    second = load_study(write_study(tmp_path, tuning=shrunk))
    new = [tuned_spec(second, arm, {"lr": 1.5e-6}, seed) for arm in ("grpo", "rloo") for seed in second.seeds]
    run_fake(second, new, 0.4)
    res = load_results(tmp_path / "edited.yaml")
    assert sorted(res.trials["trial_id"]) == sorted(s.trial_id for s in new)
    assert res.meta.earlier_design == [
        "3 trials from arm grpo tuned over an earlier search space are not used",
        "3 trials from arm rloo tuned over an earlier search space are not used",
    ]


def test_plan_and_status_show_the_same_split(tmp_path):
    from typer.testing import CliRunner

    from harness.cli.app import app
    from harness.runner.outcomes import StatusReport, TrialOutcome

    first = load_study(write_study(tmp_path))
    run_fake(first, expand(first), 0.5)
    edited_arms = [{"name": "grpo", "algorithm": "grpo", "set": {"lr": 3.0e-4}}, {"name": "rloo", "algorithm": "rloo"}]
    path = write_study(tmp_path, arms=edited_arms)
    out = CliRunner().invoke(app, ["plan", str(path)]).stdout
    assert "total: 6 trials (3 done, 3 to run)" in out
    assert "earlier design: 3 trials from an earlier version of arm grpo are not used" in out

    second = load_study(path)
    old = [s for s in expand(first) if s.arm == "grpo"]
    outcomes = [TrialOutcome("compare", s.trial_id, "completed", 1, spec=s.model_dump(mode="json")) for s in old]
    outcomes += [
        TrialOutcome("compare", s.trial_id, "completed", 1, spec=s.model_dump(mode="json")) for s in expand(second)
    ]
    from harness.study.design import earlier_design_of

    for t in outcomes:
        t.earlier = earlier_design_of(second, t.spec, t.key.rsplit("-s", 1)[0])
    text = StatusReport("edited", tmp_path / "out", "sqlite:///x", outcomes).format()
    assert "comparison: 6 trials: 6 completed" in text
    assert text.endswith("3 trials from an earlier version of arm grpo are not used")


def test_the_report_lists_the_trials_it_does_not_use(tmp_path):
    from harness.report import write_report

    first = load_study(write_study(tmp_path))
    run_fake(first, expand(first), 0.5)
    edited_arms = [{"name": "grpo", "algorithm": "grpo", "set": {"lr": 3.0e-4}}, {"name": "rloo", "algorithm": "rloo"}]
    second = load_study(write_study(tmp_path, arms=edited_arms))
    run_fake(second, [s for s in expand(second) if s.arm == "grpo"], 0.6)
    write_report(load_results(tmp_path / "edited.yaml"), tmp_path / "report")
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert "3 trials from an earlier version of arm grpo are not used" in summary
