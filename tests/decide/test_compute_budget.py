"""The primary comparison read at a compute budget or as the mean of the curve up to one, on
hand-made frames whose values are worked out by hand."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from harness.decide.analysis import condition_table, primary_seed_values
from harness.decide.comparisons import arm_scores, compare_values
from harness.decide.compute_budget import at_point, point_line, read_curve, shortfall_notes
from harness.study.sections import PrimaryAt

METRIC = "eval/accuracy"
FLOPS = "compute/flops"


@dataclass
class Results:
    trials: pd.DataFrame
    curves: pd.DataFrame
    meta: dict
    prompts: pd.DataFrame | None = None


#: trial -> (flops at each evaluation, per-prompt scores at each evaluation (prompts p0, p1))
CURVES = {
    ("ctl", 0): ([0, 100, 200], [[0.0, 0.4], [0.4, 0.4], [0.8, 0.8]]),
    ("ctl", 1): ([0, 120, 240], [[0.2, 0.2], [0.6, 0.2], [0.6, 1.0]]),
    ("ctl", 2): ([0, 90, 180], [[0.2, 0.6], [0.4, 0.6], [1.0, 0.6]]),
    ("arm", 0): ([0, 50, 160], [[0.0, 0.4], [0.8, 0.4], [0.8, 1.0]]),  # short of a budget of 170
    ("arm", 1): ([0, 100, 300], [[0.2, 0.2], [0.6, 0.8], [1.0, 0.8]]),
    ("arm", 2): ([0, 150, 200], [[0.2, 0.6], [0.8, 0.6], [0.8, 1.0]]),
}


def make_results(point: dict | None, *, status: dict | None = None, drop_axis: tuple | None = None) -> Results:
    trials, curves, prompts = [], [], []
    for (arm, seed), (flops, scores) in CURVES.items():
        trial_id = f"{arm}-s{seed}"
        state = (status or {}).get((arm, seed), "completed")
        final = float(np.mean(scores[-1])) if state == "completed" else np.nan
        trials.append({"trial_id": trial_id, "arm": arm, "seed": seed, "status": state, METRIC: final})
        for k, (x, per_prompt) in enumerate(zip(flops, scores)):
            step = 2 * k
            curves.append((trial_id, arm, seed, step, METRIC, float(np.mean(per_prompt))))
            if drop_axis != (arm, seed):
                curves.append((trial_id, arm, seed, step, FLOPS, float(x)))
            for p, value in enumerate(per_prompt):
                prompts.append((trial_id, arm, seed, step, f"p{p}", METRIC, value))
    meta = {
        "primary_metric": METRIC,
        "direction": "maximize",
        "control": "ctl",
        "conditions": ["ctl", "arm"],
        "comparisons": [("arm", "ctl")],
        "seed_matched": True,
        "metric_ranges": {METRIC: (0.0, 1.0)},
        "primary_at": point or {"point": "final", "axis": FLOPS, "budget": None},
    }
    return Results(
        pd.DataFrame(trials),
        pd.DataFrame(curves, columns=["trial_id", "arm", "seed", "step", "metric", "value"]),
        meta,
        pd.DataFrame(prompts, columns=["trial_id", "arm", "seed", "step", "prompt_id", "metric", "value"]),
    )


def at(point: str, budget: float) -> PrimaryAt:
    return PrimaryAt(point=point, axis=FLOPS, budget=budget)


def test_a_curve_is_read_between_the_evaluations_that_bracket_the_budget():
    x, y = [0, 100, 200], [0.2, 0.4, 0.8]
    assert read_curve(x, y, at("budget", 150)) == pytest.approx(0.6)  # halfway from 0.4 to 0.8
    assert read_curve(x, y, at("budget", 100)) == pytest.approx(0.4)  # an evaluation at the budget
    assert read_curve(x, y, at("budget", 200)) == pytest.approx(0.8)
    assert read_curve(x, y, at("budget", 200.5)) is None  # never extrapolated
    # per prompt: each column alike
    both = read_curve(x, np.array([[0.0, 1.0], [0.5, 1.0], [1.0, 0.0]]), at("budget", 125))
    assert both == pytest.approx([0.625, 0.75])


def test_the_area_under_the_curve_is_the_trapezoid_rule_cut_at_the_budget_over_the_budget():
    x, y = [0, 100, 200], [0.2, 0.4, 0.8]
    # [0, 100]: (0.2 + 0.4) / 2 * 100 = 30; [100, 150]: (0.4 + 0.6) / 2 * 50 = 25; / 150
    assert read_curve(x, y, at("auc", 150)) == pytest.approx(55 / 150)
    # [0, 100]: 30; [100, 200]: 60; / 200
    assert read_curve(x, y, at("auc", 200)) == pytest.approx(90 / 200)
    assert read_curve(x, y, at("auc", 50)) == pytest.approx((0.2 + 0.3) / 2)  # within the first segment
    assert read_curve(x, y, at("auc", 201)) is None
    constant = read_curve(x, [0.7, 0.7, 0.7], at("auc", 170))
    assert constant == pytest.approx(0.7)  # a flat curve's mean is its value, in the metric's units


def test_at_the_final_evaluation_nothing_changes():
    results = make_results(None)
    assert at_point(results, METRIC) is results
    assert point_line(results, METRIC) == "" and shortfall_notes(results, METRIC) == []
    budget = make_results({"point": "budget", "axis": FLOPS, "budget": 150})
    assert at_point(budget, "eval/mean_reward") is budget  # only the primary metric is read at the point


def test_each_seed_and_each_prompt_are_read_at_the_budget_and_a_short_trial_is_left_out():
    results = make_results({"point": "budget", "axis": FLOPS, "budget": 170})
    ctl = arm_scores(results, "ctl", METRIC)
    # ctl s0: 100..200 at 170: p0 0.4 + 0.7 * 0.4 = 0.68, p1 0.4 + 0.7 * 0.4 = 0.68
    # ctl s1: 120..240 at 170: share 50/120; p0 0.6, p1 0.2 + 0.8 * 50/120
    # ctl s2: 90..180 at 170: share 80/90; p0 0.4 + 0.6 * 80/90, p1 0.6
    expected = pd.DataFrame(
        {"p0": [0.68, 0.6, 0.4 + 0.6 * 80 / 90], "p1": [0.68, 0.2 + 0.8 * 50 / 120, 0.6]}, index=[0, 1, 2]
    )
    assert ctl.table.to_numpy() == pytest.approx(expected.to_numpy())
    assert ctl.values.to_numpy() == pytest.approx(expected.mean(axis=1).to_numpy())
    arm = arm_scores(results, "arm", METRIC)
    assert list(arm.values.index) == [1, 2] and list(arm.table.index) == [1, 2]  # seed 0 reached 160 < 170
    assert arm.failed == 0
    # arm s2: 150..200 at 170: share 0.4; p0 0.8, p1 0.6 + 0.4 * 0.4
    assert arm.table.loc[2].to_numpy() == pytest.approx([0.8, 0.76])
    [note] = shortfall_notes(results, METRIC)
    assert "1 completed trial(s) cannot be read at the primary comparison's budget of 170 FLOPs" in note
    assert "arm-s0 (arm, seed 0: reached 160)" in note and "never extrapolated" in note
    pair = compare_values(results, "arm", "ctl", METRIC)
    assert pair.paired and pair.difference.n_arm == 2  # paired on the seeds both sides have at the budget
    assert pair.difference.test == "seed_prompt"  # the seed x prompt test reads the table at the budget
    # arm s1 (100..300 at 170: share 0.35) and s2 against ctl s1 and s2
    arm_means = [(0.6 + 0.35 * 0.4 + 0.8) / 2, (0.8 + 0.76) / 2]
    assert pair.difference.diff == pytest.approx(np.mean(arm_means) - expected.loc[[1, 2]].to_numpy().mean())
    conditions = condition_table(results, METRIC).set_index("condition")
    assert conditions.loc["ctl", "mean"] == pytest.approx(expected.to_numpy().mean())
    assert conditions.loc["arm", "n"] == 2
    # the per-seed figure draws the values the verdict read, not the final evaluation's
    drawn = primary_seed_values(results, METRIC)
    assert drawn["ctl"].to_numpy() == pytest.approx(expected.mean(axis=1).to_numpy())
    assert drawn["arm"].to_numpy() == pytest.approx(arm.values.to_numpy())


def test_a_short_trial_is_left_out_under_failures_worst_too_and_a_failed_one_still_scores_worst():
    results = make_results({"point": "budget", "axis": FLOPS, "budget": 170}, status={("arm", 1): "failed"})
    arm = arm_scores(results, "arm", METRIC, failures="worst")
    assert arm.values.to_dict() == {1: 0.0, 2: pytest.approx(0.78)}  # seed 0 short, seed 1 failed: worst


def test_the_mean_over_the_curve_is_read_per_prompt_and_per_seed_alike():
    results = make_results({"point": "auc", "axis": FLOPS, "budget": 160})
    ctl = arm_scores(results, "ctl", METRIC)
    # ctl s0, p0: [0,100] (0 + 0.4)/2*100 = 20; [100,160] 0.4..0.64: (0.4 + 0.64)/2*60 = 31.2; / 160
    assert ctl.table.loc[0, "p0"] == pytest.approx(51.2 / 160)
    # ctl s0, p1: flat at 0.4 to 100, then 0.4..0.64 to 160: 40 + 31.2
    assert ctl.table.loc[0, "p1"] == pytest.approx(71.2 / 160)
    assert ctl.values.to_numpy() == pytest.approx(ctl.table.mean(axis=1).to_numpy())
    arm = arm_scores(results, "arm", METRIC)
    assert list(arm.values.index) == [0, 1, 2]  # arm s0 reaches 160 exactly: it is read


def test_a_trial_without_the_axis_is_left_out_and_named():
    results = make_results({"point": "budget", "axis": FLOPS, "budget": 100}, drop_axis=("ctl", 1))
    assert list(arm_scores(results, "ctl", METRIC).values.index) == [0, 2]
    assert "ctl-s1 (ctl, seed 1: no compute/flops recorded)" in shortfall_notes(results, METRIC)[0]


def test_the_step_axis_needs_no_compute_columns():
    results = make_results({"point": "budget", "axis": "step", "budget": 3})
    ctl = arm_scores(results, "ctl", METRIC)
    # steps 0, 2, 4: step 3 is halfway between the 2nd and 3rd evaluations
    assert ctl.table.loc[0].to_numpy() == pytest.approx([0.6, 0.6])
    assert point_line(results, METRIC) == "eval/accuracy at 3 steps (interpolated between evaluations)"


def test_without_curves_every_completed_trial_is_named_and_none_is_read():
    results = make_results({"point": "budget", "axis": FLOPS, "budget": 100})
    results.curves = None
    assert len(arm_scores(results, "ctl", METRIC).values) == 0
    assert "6 completed trial(s) cannot be read" in shortfall_notes(results, METRIC)[0]
