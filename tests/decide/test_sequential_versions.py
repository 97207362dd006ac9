"""The decision rule of a sequential study: what it holds, how a change is named, and when a new
version may start."""

import datetime as dt
from dataclasses import replace

import pytest

from harness.decide.rules import DecisionRules, ReadOptions
from harness.decide.sequential.rule import SequentialRule, rule_of_meta, rule_of_study
from harness.decide.sequential.versions import (
    RuleChanged,
    next_version,
    read_rules,
    rule_in_force,
    versions_line,
)
from harness.errors import ConfigError
from harness.study.expand import condition_spec
from harness.study.load import parse_study
from harness.tracking.results import load_results

T0 = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def study(tmp_path, **changes):
    data = {
        "name": "seq",
        "output_dir": str(tmp_path / "seq"),
        "control": "grpo",
        "seeds": 10,
        "min_effect": 0.05,
        "calibration": "aa",
        "sequential": {"looks": [3, 5, 8], "spending": "pocock"},
        "arms": [{"name": "grpo", "algorithm": "grpo"}, {"name": "dr", "algorithm": "dr_grpo"}],
    }
    data.update(changes)
    return parse_study(data)


def read_as(results, **options) -> DecisionRules:
    """The rules ``results`` are read under with a command's ``options``."""
    return DecisionRules.of(results.meta, ReadOptions(**options))


def fixed(rule: SequentialRule, version: int = 1) -> SequentialRule:
    return rule.model_copy(update={"version": version, "fixed_at": T0})


def test_the_rule_holds_the_design_and_each_conditions_config_without_its_seed(tmp_path):
    s = study(tmp_path)
    rule = rule_of_study(s)
    assert (
        rule.looks,
        rule.spending,
        rule.alpha,
        rule.correction,
        rule.min_effect,
        rule.test,
        rule.primary_metric,
        rule.direction,
        rule.failures,
        rule.control,
    ) == ([3, 5, 8], "pocock", 0.05, "bonferroni", 0.05, "auto", "eval/accuracy", "maximize", "drop", "grpo")
    assert rule.seeds == list(range(8))  # the seeds the looks read: the pool's first, up to the last look
    assert rule.configs == {c: condition_spec(s, c, 0).config_hash() for c in ("grpo", "dr", "grpo-aa")}


def test_the_study_file_and_the_results_meta_give_the_same_rule(tmp_path):
    s = study(tmp_path)
    meta = load_results(s).meta
    assert meta.sequential_rules == []  # nothing fixed before the first look
    from_meta = rule_of_meta(meta, alpha=0.05, correction="bonferroni", min_effect=meta.min_effect)
    assert from_meta.decision() == rule_of_study(s).decision()


def test_a_change_names_each_field_old_to_new_on_one_line(tmp_path):
    before = fixed(rule_of_study(study(tmp_path)))
    after = rule_of_study(
        study(
            tmp_path,
            min_effect=0.02,
            sequential={"looks": [3, 6], "spending": "obrien_fleming"},
            calibration="none",
            arms=[{"name": "grpo", "algorithm": "grpo"}, {"name": "dr", "algorithm": "dr_grpo", "set": {"lr": 2.5e-4}}],
        )
    )
    changes = before.changes_to(after)
    assert changes[:3] == ["looks [3, 5, 8] -> [3, 6]", "spending pocock -> obrien_fleming", "min_effect 0.05 -> 0.02"]
    assert (
        changes[3].startswith(f"condition dr {before.configs['dr']} -> ") and changes[4] == "condition grpo-aa removed"
    )
    assert len(changes) == 5  # the looks read fewer of the same seeds: that is the looks' change, not the seeds'
    with pytest.raises(RuleChanged) as caught:
        rule_in_force(after, [before], study="seq")
    line = str(caught.value)
    assert "\n" not in line and "; ".join(changes) in line
    assert line.startswith(
        "study 'seq': the study file changes the sequential rule fixed at its first look "
        f"(rule {before.label}, fixed 2026-01-02 03:04:05 UTC): looks [3, 5, 8] -> [3, 6]; "
    )
    assert "start a new study (give it a new name: and seeds: this one has not run" in line
    assert "`harness run --new-version`" in line


def test_other_seeds_are_a_change_and_the_same_rule_is_in_force(tmp_path):
    before = fixed(rule_of_study(study(tmp_path)))
    assert before.changes_to(rule_of_study(study(tmp_path, seeds=[1, 0, 2, 3, 4, 5, 6, 7]))) == [
        "seeds 0..7 -> [1, 0, 2, 3, 4, 5, 6, 7]"
    ]
    assert before.changes_to(rule_of_study(study(tmp_path, seeds=20))) == []  # a longer pool: the looks read the same
    assert rule_in_force(rule_of_study(study(tmp_path)), [before], study="seq") == before
    assert rule_in_force(rule_of_study(study(tmp_path)), [], study="seq") is None  # not fixed yet


def test_options_that_change_the_rule_are_refused_apart_from_the_study_file(tmp_path):
    s = study(tmp_path)
    results = load_results(s)
    results.meta = replace(results.meta, sequential_rules=[fixed(rule_of_study(s)).model_dump(mode="json")])
    rules = read_rules(results, read_as(results, alpha=0.05, correction="bonferroni", min_effect=0.05))
    assert rules.in_force.version == 1 and rules.current.decision() == rules.in_force.decision()
    with pytest.raises(
        RuleChanged,
        match=r"the options change it: alpha 0.05 -> 0.1; correction bonferroni -> none; "
        r"leave those options out",
    ):
        read_rules(results, read_as(results, alpha=0.1, correction="none", min_effect=0.05))


def test_a_new_version_needs_seeds_no_earlier_version_read(tmp_path):
    v1 = fixed(rule_of_study(study(tmp_path)))
    with pytest.raises(ConfigError, match=r"seeds 0\.\.7 were read under rule v1 .*\(e\.g\. 8\.\.15\)"):
        next_version(rule_of_study(study(tmp_path, min_effect=0.02)), [v1], study="seq")
    with pytest.raises(ConfigError, match=r"seeds \[7\] were read"):
        next_version(rule_of_study(study(tmp_path, seeds=list(range(7, 17)))), [v1], study="seq")
    v2 = next_version(rule_of_study(study(tmp_path, min_effect=0.02, seeds=list(range(8, 18)))), [v1], study="seq")
    assert (v2.version, v2.seeds, v2.min_effect) == (2, list(range(8, 16)), 0.02)


def test_the_header_line_gives_the_rule_in_force_and_the_versions_it_replaced(tmp_path):
    s = study(tmp_path)
    results = load_results(s)
    assert versions_line(
        read_rules(results, read_as(results, alpha=0.05, correction="bonferroni", min_effect=0.05))
    ).startswith("not recorded")
    v1 = fixed(rule_of_study(study(tmp_path, seeds=list(range(20, 30)))))
    v2 = fixed(rule_of_study(s), version=2)
    results.meta = replace(results.meta, sequential_rules=[v1.model_dump(mode="json"), v2.model_dump(mode="json")])
    line = versions_line(read_rules(results, read_as(results, alpha=0.05, correction="bonferroni", min_effect=0.05)))
    assert line == (
        f"rule {v2.label}, fixed 2026-01-02 03:04:05 UTC: looks at 3, 5, 8 seeds per arm (seeds 0..7), "
        "pocock spending, alpha 0.05 (bonferroni), min_effect 0.05, test auto on eval/accuracy "
        f"(maximize), failures drop, control grpo; replaces {v1.label} (fixed 2026-01-02 03:04:05 UTC; "
        "its trials are kept and listed, not used)"
    )


def test_where_the_comparison_reads_each_trial_is_part_of_the_rule(tmp_path):
    final = fixed(rule_of_study(study(tmp_path)))
    assert final.primary_at is None and "primary_at" not in final.decision()  # fingerprints of older rules stay
    at_budget = {"point": "budget", "axis": "compute/flops", "budget": 2e9}
    moved = rule_of_study(study(tmp_path, primary_at=at_budget))
    assert moved.primary_at == at_budget
    assert final.changes_to(moved) == [
        "primary_at eval/accuracy at the final evaluation -> eval/accuracy at 2.0e9 FLOPs (interpolated between "
        "evaluations)"
    ]
    with pytest.raises(RuleChanged, match="primary_at eval/accuracy at the final evaluation -> "):
        rule_in_force(moved, [final], study="seq")
    fixed_at_budget = fixed(moved)
    other_budget = rule_of_study(study(tmp_path, primary_at={**at_budget, "budget": 3e9}))
    with pytest.raises(RuleChanged, match=r"at 2\.0e9 FLOPs .* -> eval/accuracy at 3\.0e9 FLOPs"):
        rule_in_force(other_budget, [fixed_at_budget], study="seq")
    assert rule_in_force(rule_of_study(study(tmp_path, primary_at=at_budget)), [fixed_at_budget], study="seq")
    assert "read as eval/accuracy at 2.0e9 FLOPs" in fixed_at_budget.line()
    s = study(tmp_path, primary_at=at_budget)
    meta = load_results(s).meta
    from_meta = rule_of_meta(meta, alpha=0.05, correction="bonferroni", min_effect=meta.min_effect)
    assert from_meta.decision() == rule_of_study(s).decision()


def test_the_rules_of_seed_looks_keep_their_fingerprints():
    """Rules fixed before looks over compute existed must match what is stored: the compute-look
    fields are left out of a seed-look rule's decision, so its fingerprint stays."""
    stored = {
        "version": 1,
        "fixed_at": T0.isoformat(),
        "looks": [3, 5, 8],
        "spending": "pocock",
        "alpha": 0.05,
        "correction": "bonferroni",
        "min_effect": 0.05,
        "test": "auto",
        "primary_metric": "eval/accuracy",
        "direction": "maximize",
        "failures": "drop",
        "control": "grpo",
        "seeds": list(range(8)),
        "configs": {"grpo": "abc123", "dr": "def456"},
    }
    rule = SequentialRule.model_validate(stored)  # as a rule fixed before the compute-look fields was stored
    assert rule.fingerprint() == "827b7bd10327" and not rule.over_compute and rule.kind == "sequential"
    assert not {"at", "catch_up", "against", "primary_at"} & set(rule.decision())
    at_budget = {"point": "budget", "axis": "compute/flops", "budget": 2e9}
    assert SequentialRule.model_validate({**stored, "primary_at": at_budget}).fingerprint() == "1291156fa230"
    again = SequentialRule.model_validate(rule.model_dump(mode="json"))  # stored now, with the new keys as null
    assert again.fingerprint() == rule.fingerprint() and again.changes_to(rule) == []


def compute_study(tmp_path, **looks):
    """The study above with looks over compute instead of over seeds."""
    section = {"at": [0.25, 0.5, 1.0], "spending": "pocock", **looks}
    return study(tmp_path, sequential=None, compute_looks=section, train={"steps": 8}, seeds=4)


def test_a_compute_look_rule_holds_its_looks_with_the_catch_up_resolved(tmp_path):
    s = compute_study(tmp_path)
    rule = rule_of_study(s)
    assert (rule.at, rule.spending, rule.catch_up, rule.against) == ([0.25, 0.5, 1.0], "pocock", 0.05, "control")
    assert rule.forecast is False and rule.decision()["forecast"] is False  # a compute-look rule always says it
    assert (rule.looks, rule.seeds, rule.kind, rule.section) == ([4], [0, 1, 2, 3], "compute-look", "compute_looks")
    assert rule.configs == {
        c: condition_spec(s, c, 0).model_copy(update={"looks": None}).config_hash() for c in ("grpo", "dr", "grpo-aa")
    }
    meta = load_results(s).meta
    assert meta.sequential_rules == []  # nothing fixed before the first segments are queued
    from_meta = rule_of_meta(meta, alpha=0.05, correction="bonferroni", min_effect=meta.min_effect)
    assert from_meta.decision() == rule.decision()
    assert rule_of_study(compute_study(tmp_path, catch_up=0.1)).catch_up == 0.1  # its own, where it sets one


def test_a_change_of_a_compute_look_rule_is_named_field_by_field(tmp_path):
    before = fixed(rule_of_study(compute_study(tmp_path)))
    after = rule_of_study(
        compute_study(tmp_path, at=[0.5, 1.0], spending="obrien_fleming", catch_up=0.1, forecast=True)
    )
    assert before.changes_to(after) == [
        "spending pocock -> obrien_fleming",
        "at [0.25, 0.5, 1.0] -> [0.5, 1.0]",
        "catch_up 0.05 -> 0.1",
        "forecast False -> True",
    ]  # the conditions' configs leave the looks' points out: the looks name that change
    with pytest.raises(RuleChanged) as caught:
        rule_in_force(after, [before], study="seq")
    assert str(caught.value).startswith(
        f"study 'seq': the study file changes the compute-look rule fixed at its first look (rule {before.label}, "
        "fixed 2026-01-02 03:04:05 UTC): spending pocock -> obrien_fleming; "
    )
    assert rule_in_force(rule_of_study(compute_study(tmp_path)), [before], study="seq") == before
    more_seeds = rule_of_study(
        study(
            tmp_path,
            sequential=None,
            compute_looks={"at": [0.25, 0.5, 1.0], "spending": "pocock"},
            train={"steps": 8},
            seeds=6,
        )
    )
    assert before.changes_to(more_seeds) == ["looks [4] -> [6]", "seeds 0..3 -> 0..5"]  # every look reads them all
    seed_looks = fixed(rule_of_study(study(tmp_path)))
    assert "at none -> [0.25, 0.5, 1.0]" in seed_looks.changes_to(rule_of_study(compute_study(tmp_path)))


def test_the_header_line_of_a_compute_look_rule(tmp_path):
    rule = fixed(rule_of_study(compute_study(tmp_path)))
    assert rule.line() == (
        f"rule {rule.label}, fixed 2026-01-02 03:04:05 UTC: compute looks at 0.25, 0.5, 1 of the budget on 4 seeds "
        "per arm (seeds 0..3), catch-up 0.05 against the control, pocock spending, alpha 0.05 (bonferroni), "
        "min_effect 0.05, test auto on eval/accuracy (maximize), failures drop, control grpo"
    )
    forecasts = fixed(rule_of_study(compute_study(tmp_path, forecast=True)))
    assert "catch-up 0.05 against the control, forecasts on, pocock spending" in forecasts.line()
