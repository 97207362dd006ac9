"""Forecast verdicts at a compute look read from a results frame (harness.decide.forecast).

The frame is ``scaling_fakes``: 3 arms x 5 seed-matched seeds, 11 evaluations at 0, 1000, ...,
10000 generated tokens; ``high`` has a ceiling 0.15 above the control's, ``fast`` the control's
ceiling reached with a third of the compute. At a look at 8000 tokens (the check fits up to 4000)
the forecasts at the budget of 10000 are compared with ``stats.forecast`` on the same numbers read
from the frame by hand.
"""

from __future__ import annotations

import numpy as np
import pytest
from scaling_fakes import AXIS, PRIMARY, make_scaling_results

from harness.decide.forecast import forecast_comparison, forecast_look
from harness.decide.rules import DecisionRules
from harness.stats.forecast import Forecast, NoForecast, forecast_difference
from harness.tracking.study_meta import StudyMeta

LOOK, BUDGET = 8000.0, 10_000.0


def by_hand(results, arm: str) -> tuple[list, list]:
    rows = results.curves[(results.curves["arm"] == arm) & (results.curves["metric"] == PRIMARY)]
    table = rows.pivot(index="seed", columns="step", values="value").sort_index()
    return [np.arange(11) * 1000.0] * len(table), list(table.to_numpy())


def rules_of(results) -> DecisionRules:
    return DecisionRules.of(StudyMeta.from_dict(results.meta))


def test_the_frame_s_curves_forecast_as_the_arrays_read_by_hand():
    results = make_scaling_results()
    f = forecast_comparison(results, "high", "grpo", look=LOOK, budget=BUDGET, metric=PRIMARY, axis=AXIS)
    reference = forecast_difference(
        *by_hand(results, "high"), *by_hand(results, "grpo"), look=LOOK, budget=BUDGET, a_bounds=(0, 1)
    )
    assert isinstance(f, Forecast) and f.paired
    assert f.estimate == pytest.approx(reference.estimate, abs=1e-12)
    assert f.se == pytest.approx(reference.se, abs=1e-12)


def test_a_look_calls_the_higher_ceiling_better_as_a_forecast():
    results = make_scaling_results()
    out = forecast_look(results, rules_of(results), look=LOOK, budget=BUDGET, alpha=0.025)
    assert [(r.arm, r.reference) for r in out] == [("high", "grpo"), ("fast", "grpo")]
    high = out[0]
    assert high.verdict.label == "better" and high.verdict.forecast
    assert high.verdict.reason.startswith("Forecast at the budget")
    assert high.verdict.verdict.ci_level == pytest.approx(1 - 0.025 / 2)  # the look's alpha over 2 comparisons
    assert high.forecast.estimate == pytest.approx(0.15 * (1 / (1 + 0.3**1.5)), abs=0.03)


def test_points_past_the_look_and_unfinished_trials_are_not_read():
    results = make_scaling_results()
    before = forecast_comparison(results, "high", "grpo", look=LOOK, budget=BUDGET, metric=PRIMARY, axis=AXIS)
    late = (results.curves["metric"] == PRIMARY) & (results.curves["step"] > 8)
    results.curves.loc[late, "value"] = 0.0
    after = forecast_comparison(results, "high", "grpo", look=LOOK, budget=BUDGET, metric=PRIMARY, axis=AXIS)
    assert after.estimate == before.estimate and after.se == before.se
    results.trials.loc[results.trials["arm"] == "grpo", "status"] = "running"
    none = forecast_comparison(results, "high", "grpo", look=LOOK, budget=BUDGET, metric=PRIMARY, axis=AXIS)
    assert isinstance(none, NoForecast) and "grpo has no completed trial" in none.reason
    (verdict,) = [
        r.verdict
        for r in forecast_look(
            results, rules_of(results), look=LOOK, budget=BUDGET, alpha=0.05, pairs=[("high", "grpo")]
        )
    ]
    assert verdict.label == "inconclusive" and verdict.reason.startswith("Forecast: none")


def test_too_early_a_look_gives_no_forecast():
    results = make_scaling_results()
    f = forecast_comparison(results, "high", "grpo", look=4000.0, budget=BUDGET, metric=PRIMARY, axis=AXIS)
    assert isinstance(f, NoForecast) and "check's split" in f.reason


def test_per_prompt_scores_in_the_frame_are_jackknifed_too():
    results = make_scaling_results(prompts=12)
    f = forecast_comparison(results, "high", "grpo", look=LOOK, budget=BUDGET, metric=PRIMARY, axis=AXIS)

    def prompt_tables_by_hand(arm):
        rows = results.prompts[results.prompts["arm"] == arm]
        return [g.pivot(index="step", columns="prompt_id", values="value").to_numpy() for _, g in rows.groupby("seed")]

    arm, control = prompt_tables_by_hand("high"), prompt_tables_by_hand("grpo")
    reference = forecast_difference(
        [np.arange(11) * 1000.0] * 5,
        [t.mean(axis=1) for t in arm],
        [np.arange(11) * 1000.0] * 5,
        [t.mean(axis=1) for t in control],
        look=LOOK,
        budget=BUDGET,
        a_bounds=(0, 1),
        arm_prompt_scores=arm,
        control_prompt_scores=control,
    )
    assert isinstance(f, Forecast) and "prompt jackknife" in f.test and len(f.prompt_jackknife) == 10
    assert f.estimate == pytest.approx(reference.estimate, abs=1e-12)
    assert f.se == pytest.approx(reference.se, abs=1e-12)


def test_a_study_read_at_the_area_under_the_curve_gets_no_forecast():
    results = make_scaling_results(primary_at={"point": "auc", "axis": AXIS, "budget": BUDGET})
    out = forecast_look(results, rules_of(results), look=LOOK, budget=BUDGET, alpha=0.05)
    assert [r.verdict.label for r in out] == ["inconclusive", "inconclusive"]
    assert all(isinstance(r.forecast, NoForecast) and "area under the curve" in r.forecast.reason for r in out)
