"""Prospective planning: how many seeds per arm until a comparison is decided.

A comparison is *decided* when its multiplicity-adjusted interval excludes 0 (better / worse) or
lies inside +-margin (equivalent); see ``verdict``. For a true difference ``delta`` and a budget
(n seeds per arm, P prompts, k eval samples) the estimate is normal with the variance that
``PlanVariance`` predicts, and the estimated variance is that variance times a scaled chi-square
with the estimator's Satterthwaite df. The probability of deciding integrates the normal
probability of the undecided region over that chi-square law (a midpoint rule on its quantiles,
as ``power.power_two_sample`` does). It is computed from measured variance components at a
chosen effect, never from the observed difference (post-hoc power only restates the p-value).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from .crossed import PlanVariance
from .power import smallest_n

_K = 200
_U = (np.arange(_K) + 0.5) / _K
#: seeds per arm treated as "as many as you like" when asking whether seeds alone can decide
_UNLIMITED = 1_000_000


def _chi2_over_df(df: float) -> np.ndarray:
    """Quantiles of chi2(df) / df at the quadrature points (df may be fractional)."""
    return 2.0 * special.gammaincinv(df / 2.0, _U) / df


def decision_probability(
    delta: float,
    plan: PlanVariance,
    n: int,
    *,
    level: float,
    margin: float | None = None,
    prompts: int | None = None,
    samples: int | None = None,
) -> float:
    """P(the two-sided ``level`` interval excludes 0, or lies inside +-margin) at n seeds per arm."""
    v = float(plan.variance(n, prompts, samples))
    if not v > 0:
        return 1.0
    df = float(plan.df(n, prompts, samples))
    if not math.isfinite(df) or df <= 0:
        return 0.0
    sd = math.sqrt(v)
    crit = float(special.stdtrit(df, 0.5 + level / 2.0))
    half = crit * sd * np.sqrt(_chi2_over_df(df))  # interval half-widths over the chi-square law

    def mass(lo, hi):
        return special.ndtr((hi - delta) / sd) - special.ndtr((lo - delta) / sd)

    undecided = mass(-half, half)
    if margin is not None:
        inner = np.clip(np.minimum(margin - half, half), 0.0, None)  # |est| < margin - half: equivalent
        undecided = undecided - mass(-inner, inner)
    return float(1.0 - np.mean(undecided))


def seeds_to_decide(
    delta: float,
    plan: PlanVariance,
    *,
    level: float,
    power: float = 0.8,
    margin: float | None = None,
    max_n: int = 10_000,
) -> int | None:
    """Smallest seeds per arm (>= 2) at which the comparison is decided with ``power``; None when
    ``max_n`` seeds are not enough (``seeds_can_decide`` tells whether any number would be)."""

    def prob(n: int) -> float:
        return decision_probability(delta, plan, n, level=level, margin=margin)

    target = abs(delta) if delta else (margin or 0.0)
    z = float(special.ndtri(0.5 + level / 2.0) + special.ndtri(power))
    room = (target / z) ** 2 - plan.prompt / plan.n_prompts if target > 0 else -1.0
    per_seed = plan.seed + (plan.residual + plan.sampling) / plan.n_prompts
    guess = per_seed / room if room > 0 else math.inf
    n = smallest_n(prob, power, max_n, guess)
    return n if n <= max_n else None


def seeds_can_decide(
    delta: float, plan: PlanVariance, *, level: float, power: float = 0.8, margin: float | None = None
) -> bool:
    """Whether any number of seeds reaches ``power``: the arm x prompt term does not shrink with
    seeds, so past some point only more eval prompts help."""
    return decision_probability(delta, plan, _UNLIMITED, level=level, margin=margin) >= power
