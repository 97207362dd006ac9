"""Calibration of the forecast at the budget (harness.stats.forecast), by simulation.

An arm and a control of 3 seed-matched seeds each; a seed's curve is R(C) = R0 + (A + u - R0) /
(1 + (C_mid / C)^B) at 41 evaluations C = 0, 250, ..., 10000 (the budget) plus evaluation noise,
R0 = 0.4, B = 1.5, u the seed's shift of the ceiling (sd 0.02), noise sd 0.01 (normal, or Student
t3 scaled to that sd). All replicates are drawn at once; each is then forecast (the fits run one
by one: a fit is scipy's least squares). Every generator has a fixed seed.

A rate p over R replicates has Monte Carlo SE sqrt(p (1 - p) / R): at R = 200 and p = 0.95 that
is 0.0154, at p = 0.05 also 0.0154; the tests allow 3 of them (coverage >= 0.95 - 0.046, false
verdicts <= 0.05 + 0.046). Measured (these generators, R = 200, a forecast given in every
replicate): equal arms, normal noise, look at half the budget: coverage 0.985, false better / worse
0.015; crossing curves, t3 noise, look at a quarter: coverage 0.990, false 'worse' 0.005. The
wider figures (300 replicates, more scenarios: binary scores, per-prompt scores, curves the family
does not fit) are benchmarks/forecast_calibration.py's, in README ("Verdicts called from the fitted curve").
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.stats import saturating_curve
from harness.stats.forecast import Forecast, forecast_difference, forecast_verdict

C = np.arange(0, 41) * 250.0
BUDGET, R0, B, SEEDS, REPS, ALPHA = 10_000.0, 0.4, 1.5, 3, 200, 0.05


def draw(rng: np.random.Generator, a: float, c_mid: float, heavy: bool) -> np.ndarray:
    """[REPS, SEEDS, evaluations] curves."""

    def noise(size):
        return rng.standard_t(3, size) / math.sqrt(3) if heavy else rng.normal(size=size)

    return saturating_curve(C, R0, a + 0.02 * noise((REPS, SEEDS, 1)), B, c_mid) + 0.01 * noise((REPS, SEEDS, C.size))


def mc_tolerance(p: float, reps: int) -> float:
    return 3 * math.sqrt(p * (1 - p) / reps)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("arm", "control", "look", "heavy"),
    [
        pytest.param((0.7, 3000.0), (0.7, 3000.0), 0.5, False, id="equal-normal-half"),
        pytest.param((0.8, 4000.0), (0.7, 1500.0), 0.25, True, id="cross-t3-quarter"),
    ],
)
def test_forecast_interval_covers_and_false_verdicts_stay_within_alpha(arm, control, look, heavy):
    """Equal arms: coverage of 0 and false better / worse; crossing curves (the arm 0.073 behind
    at a quarter of the budget, 0.036 ahead at the budget): coverage and false 'worse'."""
    rng = np.random.default_rng(31 + int(heavy))
    arms, controls = draw(rng, *arm, heavy), draw(rng, *control, heavy)
    truth = float(
        saturating_curve(BUDGET, R0, arm[0], B, arm[1]) - saturating_curve(BUDGET, R0, control[0], B, control[1])
    )
    wrong = {"better", "worse"} if truth == 0 else {"worse"}
    forecasts = [
        forecast_difference(
            [C] * SEEDS, list(a), [C] * SEEDS, list(c), look=look * BUDGET, budget=BUDGET, a_bounds=(0, 1)
        )
        for a, c in zip(arms, controls)
    ]
    given = [f for f in forecasts if isinstance(f, Forecast)]
    assert len(given) >= 0.95 * REPS  # a forecast is almost always given on these curves
    covered = np.mean([lo <= truth <= hi for lo, hi in (f.interval(1 - ALPHA) for f in given)])
    false = np.mean([v.label in wrong for v in forecast_verdict(given, alpha=ALPHA, min_effect=0.02, family_size=1)])
    assert covered >= 1 - ALPHA - mc_tolerance(1 - ALPHA, len(given)), f"coverage {covered:.3f}"
    assert false <= ALPHA + mc_tolerance(ALPHA, len(given)), f"false verdicts {false:.3f}"
