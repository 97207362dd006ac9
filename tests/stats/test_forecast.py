"""Forecasts at the budget (harness.stats.forecast) against hand-worked numbers.

Exact curves: seed i's curve is R(C) = R0 + (A_i - R0) / (1 + (C_mid / C)^B) without noise, the
seeds differing in their ceiling A_i only. The pooled least-squares fit of such seeds is the fit of
their mean curve, which is the curve at mean(A_i): exact, so the forecast at the budget is
R0 + (mean A - R0) g with g = 1 / (1 + (C_mid / budget)^B), and leaving seed i out gives the mean
of the others. The forecast is linear in A, so the seed jackknife's variance is g^2 times the
jackknife variance of a mean, the squared standard error of the mean: g^2 s_A^2 / n. The early
fit of the out-of-sample check is exact too: no error, no widening.

R0 0.4, B 1.5, C_mid 3000, budget 10000: g = 1 / (1 + 0.3^1.5) = 0.858872.
Arm A = (0.68, 0.70, 0.75): mean 0.71, s^2 = 0.0026 / 2 = 0.0013, s^2 / 3 = 0.000433333, se 0.020817;
forecast 0.4 + 0.31 g = 0.666250, se g * 0.020817 = 0.017879; t_{2, 0.975} = 4.302653.
Control A = (0.66, 0.70, 0.71): mean 0.69, s^2 / 3 = 0.0014 / 6 = 0.000233333.
Paired differences (0.02, 0.00, 0.04): mean 0.02, s^2 / 3 = 0.0008 / 6 = 0.000133333 -> diff
0.02 g = 0.017177, se g * 0.011547 = 0.009917, 2 df. Welch: se g * sqrt(0.000666667) = 0.022177,
df 0.000666667^2 / (0.000433333^2 / 2 + 0.000233333^2 / 2) = 3.6697.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.stats import decide, saturating_curve
from harness.stats.forecast import (
    Forecast,
    ForecastVerdict,
    NoForecast,
    forecast_difference,
    forecast_value,
    forecast_verdict,
)

C = np.arange(0, 21) * 500.0  # budget 10000, an evaluation every 500
R0, B, C_MID, BUDGET = 0.4, 1.5, 3000.0, 10_000.0
G = 1 / (1 + 0.3**1.5)
ARM_A, CONTROL_A = (0.68, 0.70, 0.75), (0.66, 0.70, 0.71)


def exact(ceilings, c=C) -> list[np.ndarray]:
    return [saturating_curve(c, R0, a, B, C_MID) for a in ceilings]


def test_hand_worked_numbers_of_a_value_forecast_on_exact_curves():
    f = forecast_value([C] * 3, exact(ARM_A), look=5000, budget=BUDGET)
    assert isinstance(f, Forecast)
    assert pytest.approx(0.858872, abs=1e-6) == G
    assert f.estimate == pytest.approx(0.4 + 0.31 * G, abs=1e-6)
    assert f.se_jackknife == pytest.approx(G * math.sqrt(0.0013 / 3), abs=1e-6)
    assert f.check.bias == 0 and f.check.widening == 0
    assert f.se == pytest.approx(f.se_jackknife)
    assert f.df == 2 and f.n_control == 0
    assert f.jackknife == pytest.approx([0.4 + (a - 0.4) * G for a in (0.725, 0.715, 0.69)], abs=1e-6)
    low, high = f.interval(0.95)
    assert high - f.estimate == pytest.approx(4.302653 * G * math.sqrt(0.0013 / 3), abs=1e-5)
    assert f.estimate - low == pytest.approx(high - f.estimate)


def test_a_paired_difference_leaves_each_seed_out_of_both_arms():
    f = forecast_difference([C] * 3, exact(ARM_A), [C] * 3, exact(CONTROL_A), look=5000, budget=BUDGET)
    assert isinstance(f, Forecast) and f.paired
    assert f.estimate == pytest.approx(0.02 * G, abs=1e-6)
    assert f.se == pytest.approx(G * math.sqrt(0.0008 / 6), abs=1e-6)
    assert f.df == 2
    assert "paired" in f.test


def test_the_control_is_put_in_the_arm_s_seed_order_before_pairing():
    shuffled = forecast_difference(
        [C] * 3,
        exact(ARM_A),
        [C] * 3,
        exact(CONTROL_A[::-1]),
        look=5000,
        budget=BUDGET,
        arm_seeds=[1, 2, 3],
        control_seeds=[3, 2, 1],
    )
    assert shuffled.se == pytest.approx(G * math.sqrt(0.0008 / 6), abs=1e-6)


def test_different_seeds_give_welch_with_satterthwaite_df():
    f = forecast_difference(
        [C] * 3, exact(ARM_A), [C] * 3, exact(CONTROL_A), look=5000, budget=BUDGET, control_seeds=[7, 8, 9]
    )
    assert isinstance(f, Forecast) and not f.paired and "Welch" in f.test
    assert f.se == pytest.approx(G * math.sqrt(0.0004333333 + 0.0002333333), abs=1e-6)
    assert f.df == pytest.approx(3.6697, abs=1e-3)
    assert len(f.jackknife) == 6


def test_points_past_the_look_are_not_read():
    """A curve that collapses after the look forecasts exactly as the same curve cut at the look."""
    collapsed = [np.where(C > 5000, 0.0, y) for y in exact(ARM_A)]
    cut = forecast_value([C] * 3, collapsed, look=5000, budget=BUDGET)
    whole = forecast_value([C] * 3, exact(ARM_A), look=5000, budget=BUDGET)
    assert cut.estimate == pytest.approx(whole.estimate, abs=1e-9)
    assert cut.se == pytest.approx(whole.se, abs=1e-9)


def test_a_curve_the_family_does_not_fit_is_widened_by_its_out_of_sample_error():
    """Exact two-phase curves (a first plateau, then a second rise around C = 4000) whose seeds
    differ by 0.005 in the first plateau: the jackknife sees only that spread and its interval
    misses the value at the budget; the check on the earlier part sees the fit miss, and the interval
    widens by that error times the horizon ratio, log(budget / look) / log(look / (look / 2)): 1 at a
    look at half the budget, 2 at a quarter. Widened, it covers the value at the budget."""
    c = np.arange(0, 41) * 250.0
    curves = [
        saturating_curve(c, R0, 0.5 + u, 1.0, 400.0) + saturating_curve(c, 0, 0.2, 3.0, 4000.0)
        for u in (0, 0.005, 0.01)
    ]
    truth = np.mean([y[-1] for y in curves])
    for look, ratio in ((5000, 1.0), (2500, 2.0)):
        f = forecast_value([c] * 3, curves, look=look, budget=BUDGET)
        assert isinstance(f, Forecast)
        assert f.check.horizon_ratio == pytest.approx(ratio)
        assert f.check.bias > 5 * f.check.noise_se
        assert f.check.bias**2 == pytest.approx(f.check.rmse**2 - f.check.noise_se**2)
        assert f.check.widening == pytest.approx(f.check.bias * ratio)
        assert f.se**2 == pytest.approx(f.se_jackknife**2 + f.check.widening**2)
        assert abs(f.estimate - truth) > 4.302653 * f.se_jackknife  # the jackknife alone misses
        low, high = f.interval(0.95)
        assert low <= truth <= high


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"look": 10_000}, "at or past the budget"),
        ({"look": 1000}, "evaluation(s) past the start up to the look"),
        ({"look": 2500}, "out-of-sample check cannot be made"),
    ],
)
def test_no_forecast_names_why(kwargs, reason):
    f = forecast_value([C] * 3, exact(ARM_A), budget=BUDGET, **kwargs)
    assert isinstance(f, NoForecast) and reason in f.reason
    assert f.budget == BUDGET


def test_no_forecast_without_two_seeds_or_without_the_start():
    one = forecast_value([C], exact(ARM_A[:1]), look=5000, budget=BUDGET)
    assert isinstance(one, NoForecast) and "2 or more" in one.reason
    late = forecast_value([C[1:]] * 3, [y[1:] for y in exact(ARM_A)], look=5000, budget=BUDGET)
    assert isinstance(late, NoForecast) and "C = 0" in late.reason


def test_no_forecast_when_the_seeds_agree_exactly():
    f = forecast_value([C] * 3, exact((0.7, 0.7, 0.7)), look=5000, budget=BUDGET)
    assert isinstance(f, NoForecast) and "no spread" in f.reason


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="look and budget"):
        forecast_value([C] * 3, exact(ARM_A), look=0, budget=BUDGET)
    with pytest.raises(ValueError, match="distinct"):
        forecast_value([C] * 3, exact(ARM_A), look=5000, budget=BUDGET, seeds=[1, 1, 2])
    value = forecast_value([C] * 3, exact(ARM_A), look=5000, budget=BUDGET)
    with pytest.raises(ValueError, match="not a difference"):
        forecast_verdict([value], alpha=0.05)
    with pytest.raises(TypeError, match="Forecast or NoForecast"):
        forecast_verdict([0.1], alpha=0.05)


def test_forecast_verdict_is_decide_s_reading_of_the_forecast_interval():
    better = forecast_difference(
        [C] * 3, exact((0.78, 0.80, 0.81)), [C] * 3, exact(CONTROL_A), look=5000, budget=BUDGET
    )
    none = forecast_value([C] * 3, exact(ARM_A), look=10_000, budget=BUDGET)
    out = forecast_verdict([better, none], alpha=0.05, min_effect=0.02)
    assert all(isinstance(v, ForecastVerdict) and v.forecast for v in out)
    called, missing = out
    reference = decide([better.difference()], alpha=0.05, min_effect=0.02, family_size=2)[0]
    assert called.verdict == reference
    assert called.label == "better" and called.called
    assert called.verdict.ci_level == pytest.approx(1 - 0.05 / 2)
    assert (called.verdict.ci_low, called.verdict.ci_high) == pytest.approx(better.interval(1 - 0.05 / 2))
    assert called.reason.startswith("Forecast at the budget")
    assert missing.label == "inconclusive" and not missing.called and missing.verdict is None
    assert missing.reason.startswith("Forecast: none at this look") and "at or past the budget" in missing.reason


def test_forecast_verdict_is_inconclusive_when_the_interval_does_not_decide():
    f = forecast_difference([C] * 3, exact(ARM_A), [C] * 3, exact(CONTROL_A), look=5000, budget=BUDGET)
    (v,) = forecast_verdict([f], alpha=0.05, min_effect=0.01)
    low, high = f.interval(0.95)
    assert low < 0 < high  # 0.017 +- 4.30 * 0.0099
    assert v.label == "inconclusive" and not v.called
    (wide,) = forecast_verdict([f], alpha=0.05, min_effect=0.1)
    assert wide.label == "equivalent"  # [-0.026, 0.060] lies inside +-0.1


W = np.array([-0.02, 0.0, 0.01, 0.03])  # each prompt's shift of the ceiling: mean 0.005, s^2 0.0013 / 3


def tables(ceilings) -> list[np.ndarray]:
    """Each seed's exact [evaluations x prompts] scores: the curve at A_i + w_p."""
    return [saturating_curve(C[:, None], R0, a + W[None, :], B, C_MID) for a in ceilings]


def test_per_prompt_scores_add_a_grouped_prompt_jackknife():
    """4 prompts, so 4 groups of one: leaving prompt p out moves the forecast by g times the shift
    of the mean of W, whose jackknife variance is s_W^2 / 4 = 0.000108333; the seeds' part is
    g^2 0.0013 / 3 as without prompts. Satterthwaite df from (variance, df) = (seeds, 2), (prompts, 3)."""
    t = tables(ARM_A)
    f = forecast_value([C] * 3, [x.mean(axis=1) for x in t], look=5000, budget=BUDGET, prompt_scores=t)
    seeds, prompts = 0.0013 / 3, 0.0013 / 3 / 4
    assert isinstance(f, Forecast) and "prompt jackknife" in f.test
    assert f.estimate == pytest.approx(0.4 + 0.315 * G, abs=1e-6)
    assert f.se_jackknife == pytest.approx(G * math.sqrt(seeds + prompts), abs=1e-6)
    assert f.df == pytest.approx((seeds + prompts) ** 2 / (seeds**2 / 2 + prompts**2 / 3), rel=1e-4)
    assert len(f.prompt_jackknife) == 4


def test_the_prompt_jackknife_pairs_arms_scored_on_the_same_prompts():
    """The prompts' shifts are the same in both arms: on the same prompts they cancel in the
    difference (no prompt variance); named as different prompts, the two arms' prompt variances add."""
    arm, control = tables(ARM_A), tables(CONTROL_A)
    kwargs = {"look": 5000, "budget": BUDGET, "arm_prompt_scores": arm, "control_prompt_scores": control}
    means = ([x.mean(axis=1) for x in arm], [x.mean(axis=1) for x in control])
    same = forecast_difference([C] * 3, means[0], [C] * 3, means[1], **kwargs)
    other = forecast_difference([C] * 3, means[0], [C] * 3, means[1], control_prompts=list("abcd"), **kwargs)
    assert same.se_jackknife == pytest.approx(G * math.sqrt(0.0008 / 6), abs=1e-6)
    assert other.se_jackknife == pytest.approx(G * math.sqrt(0.0008 / 6 + 2 * 0.0013 / 12), abs=1e-6)
    with pytest.raises(ValueError, match="both arms or for neither"):
        forecast_difference([C] * 3, means[0], [C] * 3, means[1], look=5000, budget=BUDGET, arm_prompt_scores=arm)
