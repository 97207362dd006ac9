"""The seed noise floor: how much one configuration's final score wobbles from seed to seed."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ._util import JsonMixin, as_sample, check_alpha
from .power import minimal_detectable_effect, seeds_needed


@dataclass(frozen=True)
class NoiseFloor(JsonMixin):
    """Seed-to-seed spread of one configuration.

    ``std`` is the sample sd (ddof=1) with its chi-square (1 - alpha) CI; ``sem = std / sqrt(n)``;
    ``mde`` is the smallest true difference between two arms of ``n`` seeds each (both with this
    sd) that a two-sided Welch test at ``alpha`` detects with ``power``; ``seeds_for_1sd`` is the
    seeds per arm needed to detect a difference of one seed sd (scale-free: 17 at 5% / 80%).
    With a single seed, std, its CI, sem and mde are NaN / inf (to_dict gives None).
    """

    n: int
    mean: float
    std: float
    std_ci_low: float
    std_ci_high: float
    sem: float
    mde: float
    seeds_for_1sd: int
    alpha: float = 0.05
    power: float = 0.8


def std_interval(std, n: int, *, alpha: float = 0.05):
    """Chi-square (1 - alpha) CI of a normal sd from the sample sd (ddof=1) of n values:
    sqrt((n-1) s^2 / chi2.ppf(1-alpha/2, n-1)) to sqrt((n-1) s^2 / chi2.ppf(alpha/2, n-1)).

    ``std`` may be an array (vectorised); NaN for n < 2.
    """
    alpha = check_alpha(alpha)
    s = np.asarray(std, dtype=float)
    if n < 2:
        lo = hi = np.full(s.shape, np.nan)
    else:
        k = n - 1
        lo = np.sqrt(k * s**2 / stats.chi2.ppf(1 - alpha / 2, k))
        hi = np.sqrt(k * s**2 / stats.chi2.ppf(alpha / 2, k))
    if s.ndim == 0:
        return float(lo), float(hi)
    return lo, hi


def noise_floor(values, *, alpha: float = 0.05, power: float = 0.8) -> NoiseFloor:
    """Noise floor of one arm from its per-seed scores (at least one finite value; NaN refused)."""
    alpha = check_alpha(alpha)
    x = as_sample(values, "values")
    n = int(x.size)
    sd = float(x.std(ddof=1)) if n > 1 else math.nan
    lo, hi = std_interval(sd, n, alpha=alpha)
    return NoiseFloor(
        n=n, mean=float(x.mean()), std=sd, std_ci_low=lo, std_ci_high=hi,
        sem=sd / math.sqrt(n) if n > 1 else math.nan,
        mde=minimal_detectable_effect(n, sd, alpha=alpha, power=power) if n > 1 else math.inf,
        seeds_for_1sd=seeds_needed(1.0, 1.0, alpha=alpha, power=power),
        alpha=alpha, power=float(power),
    )
