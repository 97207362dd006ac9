"""Ceilings and efficiency of a study (harness.decide.scaling): which trials and points are
fitted, when a fit runs (scaling.fit), and the verdicts on a study with planted differences."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from rules_under import under
from scaling_fakes import AXIS, PRIMARY, R0, TOKENS_PER_STEP, make_scaling_results

from harness.decide.analysis import analyze
from harness.decide.rules import ReadOptions
from harness.decide.scaling import (
    MIN_EVALUATIONS,
    NO_VERDICT,
    prompt_tables,
    scaling_analysis,
    scaling_settings,
    seed_curves,
)
from harness.errors import ConfigError
from harness.tracking.study_meta import StudyMeta


def by_condition(frame: pd.DataFrame) -> dict[str, dict]:
    return {r["condition"]: r for r in frame.to_dict(orient="records")}


def test_planted_ceiling_and_efficiency_differences_are_found():
    s = scaling_analysis(*under(make_scaling_results(), min_effect=0.05))
    params = by_condition(s.parameters)
    assert all(p["converged"] and p["identified"] for p in params.values())
    for cond, (a, c_mid) in {"grpo": (0.70, 3000), "high": (0.85, 3000), "fast": (0.70, 1000)}.items():
        p = params[cond]
        assert p["A_low"] <= a <= p["A_high"] and p["C_mid_low"] <= c_mid <= p["C_mid_high"]
        assert p["r0"] == pytest.approx(R0) and p["seeds"] == 5
    v = by_condition(s.verdicts)
    assert (v["high"]["ceiling_verdict"], v["high"]["efficiency_verdict"]) == ("better", "equally efficient")
    assert (v["fast"]["ceiling_verdict"], v["fast"]["efficiency_verdict"]) == ("equivalent", "more efficient")
    assert v["fast"]["efficiency_ratio"] == pytest.approx(1 / 3, rel=0.15)
    assert v["fast"]["efficiency_low"] < v["fast"]["efficiency_ratio"] < v["fast"]["efficiency_high"]
    # two comparisons in each family: Bonferroni, as the main verdicts
    assert set(s.verdicts["ceiling_level"]) == {0.975} and set(s.verdicts["efficiency_level"]) == {0.975}
    assert set(s.verdicts["test"]) == {"seed jackknife, paired"}
    assert s.axis == AXIS and s.metric == PRIMARY and s.efficiency_margin == 1.25


def test_direction_minimize_reads_a_lower_ceiling_as_better():
    true = {"grpo": (0.25, 1.5, 3000.0), "low": (0.10, 1.5, 3000.0), "fast": (0.25, 1.5, 1000.0)}
    v = by_condition(
        scaling_analysis(*under(make_scaling_results(true=true, direction="minimize"), min_effect=0.05)).verdicts
    )
    assert v["low"]["ceiling_verdict"] == "better"
    assert v["fast"]["efficiency_verdict"] == "more efficient"  # a smaller midpoint, whichever way the metric goes
    rising = by_condition(
        scaling_analysis(*under(make_scaling_results(direction="minimize"), min_effect=0.05)).verdicts
    )
    assert rising["high"]["ceiling_verdict"] == "worse"
    assert rising["fast"]["efficiency_verdict"] == NO_VERDICT  # a curve moving away from the goal


def test_a_fit_that_is_not_identified_gets_no_verdict_with_its_reason():
    true = {"grpo": (0.70, 1.5, 3000.0), "late": (0.90, 1.5, 60_000.0)}
    s = scaling_analysis(*under(make_scaling_results(true=true), min_effect=0.05))
    late = by_condition(s.parameters)["late"]
    assert late["converged"] and not late["identified"] and late["reason"]
    row = by_condition(s.verdicts)["late"]
    assert row["ceiling_verdict"] == NO_VERDICT and row["efficiency_verdict"] == NO_VERDICT
    assert row["ceiling_reason"].startswith("the arm's fit is not identified")


def test_seed_curves_join_the_axis_on_trial_and_step_with_the_start_at_zero():
    results = make_scaling_results(seeds=(0, 1))
    curves = results.curves
    start = (curves["metric"] == AXIS) & (curves["step"] == 0)
    results.curves = curves.assign(value=np.where(start, 123.0, curves["value"]))  # a start logged off zero
    got = seed_curves(results, "grpo", PRIMARY, AXIS)
    assert [c.seed for c in got] == [0, 1] and got[0].trial_id == "grpo-s0"
    np.testing.assert_array_equal(got[0].compute, np.arange(11) * TOKENS_PER_STEP)
    np.testing.assert_array_equal(got[0].step, np.arange(11))
    step_axis = seed_curves(results, "grpo", PRIMARY, "step")
    np.testing.assert_array_equal(step_axis[0].compute, np.arange(11.0))
    np.testing.assert_allclose(got[0].score, step_axis[0].score)


def test_only_completed_trials_are_fitted():
    results = make_scaling_results(seeds=(0, 1, 2, 3))
    results.trials.loc[results.trials["trial_id"] == "high-s3", "status"] = "failed"
    assert [c.seed for c in seed_curves(results, "high", PRIMARY, AXIS)] == [0, 1, 2]
    s = scaling_analysis(*under(results, min_effect=0.05))
    assert by_condition(s.parameters)["high"]["seeds"] == 3
    assert by_condition(s.verdicts)["high"]["test"] == "seed jackknife, Welch"  # seeds 0-2 against 0-3


@pytest.mark.parametrize(
    ("meta", "evaluations", "runs"),
    [
        ({}, MIN_EVALUATIONS, True),  # auto: enough evaluations
        ({}, MIN_EVALUATIONS - 1, False),  # auto: too few
        ({"scaling": {"fit": "off"}}, 11, False),
        ({"scaling": {"fit": "on"}}, MIN_EVALUATIONS - 1, True),
        ({"primary_at": {"axis": "compute/flops"}}, 11, False),  # auto: the axis is not logged
    ],
)
def test_when_a_fit_runs(meta, evaluations, runs):
    s = scaling_analysis(*under(make_scaling_results(evaluations=evaluations, **meta)))
    assert (s is not None) == runs


def test_fit_on_without_the_axis_says_why_for_each_condition():
    s = scaling_analysis(*under(make_scaling_results(primary_at={"axis": "compute/flops"}, scaling={"fit": "on"})))
    assert s.notes == ["The compute axis compute/flops is not logged: nothing to fit."]
    assert set(s.parameters["reason"]) == {f"no completed trial has {PRIMARY} against compute/flops"}
    assert s.verdicts.empty and s.curves.empty


def test_settings_defaults_and_bad_values():
    assert scaling_settings(StudyMeta.from_dict({})) == ("auto", "compute/flops", 1.25)
    assert scaling_settings(
        StudyMeta.from_dict({"scaling": {"fit": "on", "efficiency_margin": 1.5}, "primary_at": {"axis": "step"}})
    ) == (
        "on",
        "step",
        1.5,
    )
    with pytest.raises(ConfigError, match="scaling.fit"):
        scaling_settings(StudyMeta.from_dict({"scaling": {"fit": "sometimes"}}))
    with pytest.raises(ConfigError, match="efficiency_margin must be a number above 1"):
        scaling_settings(StudyMeta.from_dict({"scaling": {"efficiency_margin": 0.8}}))


def test_the_drawn_curves_hold_the_band_and_the_fit():
    s = scaling_analysis(*under(make_scaling_results(), min_effect=0.05))
    g = s.curves[s.curves["condition"] == "high"]
    assert g["x"].iloc[0] == 0 and g["x"].iloc[-1] == 10 * TOKENS_PER_STEP
    assert (g["n_seeds"] == 5).all() and (g["low"] <= g["mean"]).all() and (g["mean"] <= g["high"]).all()
    assert np.abs(g["fitted"] - g["mean"]).max() < 0.02
    e = by_condition(s.extrapolation)["high"]
    assert e["c_split"] == 5 * TOKENS_PER_STEP and e["points_checked"] == 5 and math.isfinite(e["rmse"])


def test_analyze_carries_the_fit_and_a_study_without_one_gets_none():
    assert analyze(make_scaling_results(), ReadOptions(n_permutations=200)).scaling is not None
    assert analyze(make_scaling_results(evaluations=4), ReadOptions(n_permutations=200)).scaling is None


def test_per_prompt_scores_at_every_evaluation_are_resampled_too():
    results = make_scaling_results(prompts=12)
    curves = seed_curves(results, "grpo", PRIMARY, AXIS)
    tables, ids = prompt_tables(results, curves, PRIMARY)
    assert ids == [f"p{j:02d}" for j in range(12)] and [t.shape for t in tables] == [(11, 12)] * 5
    np.testing.assert_allclose(tables[0].mean(axis=1), curves[0].score)
    s = scaling_analysis(*under(results, min_effect=0.05))
    assert set(s.verdicts["test"]) == {"seed jackknife, paired + prompt jackknife"}
    v = by_condition(s.verdicts)
    assert (v["high"]["ceiling_verdict"], v["fast"]["efficiency_verdict"]) == ("better", "more efficient")


def test_an_evaluation_without_per_prompt_scores_leaves_the_prompts_out():
    results = make_scaling_results(prompts=12)
    p = results.prompts
    results.prompts = p[~((p["trial_id"] == "fast-s2") & (p["step"] == 4))]
    assert prompt_tables(results, seed_curves(results, "fast", PRIMARY, AXIS), PRIMARY) is None
    tests = by_condition(scaling_analysis(*under(results, min_effect=0.05)).verdicts)
    assert tests["fast"]["test"] == "seed jackknife, paired"  # one side without prompts: seeds only
    assert tests["high"]["test"] == "seed jackknife, paired + prompt jackknife"


def test_a_falling_curve_gets_no_efficiency_verdict():
    true = {"grpo": (0.70, 1.5, 3000.0), "falls": (0.20, 1.5, 2000.0)}
    v = by_condition(scaling_analysis(*under(make_scaling_results(true=true), min_effect=0.05)).verdicts)["falls"]
    assert v["ceiling_verdict"] == "worse"
    assert v["efficiency_verdict"] == NO_VERDICT
    assert v["efficiency_reason"].startswith("the arm's curve does not improve on its start (A 0.19")
