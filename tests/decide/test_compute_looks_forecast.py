"""Compute looks with forecasts on: at the look before the budget every arm the stop rule lets go
on is forecast at the budget from its seeds' curves, and its comparison is called (the arm
stopped) only where the forecast interval decides it; the look's alpha is split evenly between
the stop rule and the forecast. Checked against ``forecast_look`` called by hand at the same
look, alpha and family, and against the same study read with forecasts off."""

from __future__ import annotations

import pandas as pd
import pytest
from scaling_fakes import AXIS, make_scaling_results

from harness.decide.forecast import forecast_look
from harness.decide.rules import DecisionRules, ReadOptions
from harness.decide.sequential.compute import CALLED, NOT_CALLED, replay_compute_looks, verdicts_under_looks
from harness.stats.compute_looks import look_alphas
from harness.tracking.study_meta import StudyMeta

LOOK, BUDGET = 8000.0, 10_000.0


def study(*, forecast: bool, true: dict | None = None):
    looks = {
        "at": [0.8, 1.0],
        "spending": "pocock",
        "catch_up": 0.02,
        "against": "control",
        "axis": AXIS,
        "budget": BUDGET,
        "point": "budget",
        "forecast": forecast,
    }
    primary_at = {"point": "budget", "axis": AXIS, "budget": BUDGET}
    return make_scaling_results(true=true, compute_looks=looks, primary_at=primary_at, min_effect=0.02)


def rules_of(results) -> DecisionRules:
    return DecisionRules.of(StudyMeta.from_dict(results.meta), ReadOptions(alpha=0.05))


def test_the_higher_ceiling_is_called_better_by_its_forecast_at_the_look():
    results = study(forecast=True)
    rules = rules_of(results)
    rep = replay_compute_looks(results, rules)
    alpha_1 = look_alphas([0.8, 1.0], 0.05, "pocock")[0]
    by_hand = forecast_look(
        results,
        rules,
        look=LOOK,
        budget=BUDGET,
        alpha=alpha_1 / 2,
        pairs=[("high", "grpo"), ("fast", "grpo")],
        axis=AXIS,
        family_size=2,
    )
    table = rep.table
    forecasts = table[table["decision"].isin([CALLED, NOT_CALLED])].set_index("condition")
    for call in by_hand:
        row = forecasts.loc[call.arm]
        assert row["diff"] == pytest.approx(call.forecast.estimate)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(
            (call.verdict.verdict.ci_low, call.verdict.verdict.ci_high)
        )
        assert row["ci_level"] == pytest.approx(1 - alpha_1 / 2 / 2)  # half the look's share, over 2 comparisons
        assert row["verdict"] == call.verdict.label and row["look"] == 1
    assert by_hand[0].verdict.label == "better"  # the ceiling 0.15 higher: decided at 80% of the budget
    high = rep.stops["high"]
    assert (high.look, high.point, high.forecast) == (1, LOOK, True)
    assert high.reason.startswith("called better at 80% of the budget: Forecast at the budget")
    assert rep.verdicts["high"] == "better"
    # the stop rule's own rows at the look spend the other half
    rule_rows = table[(table["look"] == 1) & table["decision"].isin(["stop", "go on"])]
    assert list(rule_rows["ci_level"]) == pytest.approx([1 - alpha_1 / 2 / 2] * 2)
    # high trained to the look on each of its 5 seeds: 8000 of 10000 tokens each
    assert (rep.compute["high"].spent, rep.compute["high"].full) == (5 * LOOK, 5 * BUDGET)
    assert "stopped: high at look 1 (forecast: better)" in rep.line() and "forecasts on" in rep.line()
    verdicts = verdicts_under_looks(pd.DataFrame({"condition": ["high", "fast"], "verdict": "?", "reason": ""}), rep)
    row = verdicts.set_index("condition").loc["high"]
    assert row["verdict"] == "better" and "Forecast at the budget" in row["reason"]
    assert row["ci_level"] == pytest.approx(1 - alpha_1 / 4)


def test_with_forecasts_off_no_arm_is_called_and_the_stop_rule_spends_the_whole_share():
    results = study(forecast=False)
    rep = replay_compute_looks(results, rules_of(results))
    alpha_1 = look_alphas([0.8, 1.0], 0.05, "pocock")[0]
    assert not rep.table["decision"].isin([CALLED, NOT_CALLED]).any()
    assert list(rep.table.loc[rep.table["look"] == 1, "ci_level"]) == pytest.approx([1 - alpha_1 / 2] * 2)
    assert rep.stops["high"].look is None and rep.verdicts["high"] == "better"  # read at the budget
    assert rep.saving == 0.0 and "forecast" not in rep.line()


def test_equal_arms_are_called_equivalent_within_min_effect_never_better_or_worse():
    equal = {"grpo": (0.70, 1.5, 3000.0), "same": (0.70, 1.5, 3000.0)}
    results = study(forecast=True, true=equal)
    rep = replay_compute_looks(results, rules_of(results))
    alpha_1 = look_alphas([0.8, 1.0], 0.05, "pocock")[0]
    (row,) = rep.table[rep.table["decision"].isin([CALLED, NOT_CALLED])].itertuples()
    # the forecast interval at half the look's share (one comparison) lies inside +-min_effect (0.02)
    assert (row.verdict, row.decision) == ("equivalent", CALLED)
    assert -0.02 < row.ci_low < row.ci_high < 0.02 and row.ci_level == pytest.approx(1 - alpha_1 / 2)
    assert rep.stops["same"].forecast and rep.verdicts == {"same": "equivalent"}
