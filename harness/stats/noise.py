"""The seed noise floor: how much one configuration's score wobbles from seed to seed.

The interval of the seed sd is Bonett's (2006) kurtosis-adjusted interval for a variance, which
does not assume normal scores: the chi-square interval does, and on real RL returns (heavy
tails) it covers the true sd far less often than it claims, and less the more seeds are run.
Bonett's interval needs at least 5 values (its kurtosis estimate trims the sample); below that
the chi-square interval is given and ``std_ci_method`` says it assumes normal scores.
``normality_p`` (Shapiro-Wilk, 3 or more values) is the diagnostic beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ._util import JsonMixin, as_sample, check_alpha
from .crossed import PlanVariance
from .planning import seeds_to_decide

BONETT = "bonett"
CHI_SQUARE = "chi-square (assumes normal scores)"
BONETT_MIN_N = 5


@dataclass(frozen=True)
class NoiseFloor(JsonMixin):
    """Seed-to-seed spread of one configuration.

    ``std`` is the sample sd (ddof=1) with its (1 - alpha) interval by ``std_ci_method``;
    ``sem = std / sqrt(n)``. ``seeds_needed``: seeds per arm for a comparison of two arms with
    this sd to be decided (interval at ``level``, as the verdicts use) with ``power`` at a true
    difference of ``effect``; None without an effect or beyond the search limit.
    """

    n: int
    mean: float
    std: float
    std_ci_low: float
    std_ci_high: float
    std_ci_method: str
    normality_p: float
    sem: float
    level: float = math.nan
    effect: float = math.nan
    seeds_needed: int | None = None


def chi_square_std_interval(std, n: int, *, alpha: float = 0.05):
    """Chi-square (1 - alpha) CI of a normal sd from the sample sd (ddof=1) of n values:
    sqrt((n-1) s^2 / chi2.ppf(1-alpha/2, n-1)) to sqrt((n-1) s^2 / chi2.ppf(alpha/2, n-1)).
    ``std`` may be an array (vectorised); NaN for n < 2."""
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


def bonett_std_interval(values, *, alpha: float = 0.05):
    """Bonett's (2006) (1 - alpha) CI of the sd along the last axis (n >= 5), vectorised:
    exp(ln(c s^2) +- z se) with c = n / (n - z), se = c sqrt((kurt - (n-3)/n) / (n-1)) and the
    kurtosis estimated about a mean trimmed by 1 / (2 sqrt(n - 4)) (as DescTools' VarCI)."""
    alpha = check_alpha(alpha)
    x = np.sort(np.asarray(values, dtype=float), axis=-1)
    n = x.shape[-1]
    if n < BONETT_MIN_N:
        raise ValueError(f"Bonett's interval needs at least {BONETT_MIN_N} values; got {n}")
    z = float(stats.norm.ppf(1 - alpha / 2))
    c = n / (n - z)
    g = int(math.floor(n / (2.0 * math.sqrt(n - 4))))
    trimmed = x[..., g : n - g].mean(axis=-1, keepdims=True)
    centred = x - x.mean(axis=-1, keepdims=True)
    ss = (centred**2).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        kurt = n * ((x - trimmed) ** 4).sum(axis=-1) / ss**2
        se = c * np.sqrt(np.maximum(kurt - (n - 3) / n, 0.0) / (n - 1))
        log_v = np.log(c * ss / (n - 1))
    lo, hi = np.exp(0.5 * (log_v - z * se)), np.exp(0.5 * (log_v + z * se))
    if np.ndim(lo) == 0:
        return float(lo), float(hi)
    return lo, hi


def noise_floor(
    values, *, alpha: float = 0.05, level: float | None = None, effect: float | None = None, power: float = 0.8
) -> NoiseFloor:
    """Noise floor of one arm from its per-seed scores (at least one finite value; NaN refused).

    ``level`` is the two-sided level of the verdicts' intervals (default 1 - alpha)."""
    alpha = check_alpha(alpha)
    level = 1.0 - alpha if level is None else float(level)
    x = as_sample(values, "values")
    n = int(x.size)
    sd = float(x.std(ddof=1)) if n > 1 else math.nan
    if n >= BONETT_MIN_N and sd > 0:
        (lo, hi), method = bonett_std_interval(x, alpha=alpha), BONETT
    else:
        (lo, hi), method = chi_square_std_interval(sd, n, alpha=alpha), CHI_SQUARE
    normality = float(stats.shapiro(x).pvalue) if n >= 3 and sd > 0 else math.nan
    need = None
    if effect is not None and n > 1 and sd > 0:
        plan = PlanVariance(
            seed=2 * sd**2, prompt=0.0, residual=0.0, sampling=0.0, n_prompts=1, samples=1, paired=False
        )
        need = seeds_to_decide(float(effect), plan, level=level, power=power)
    return NoiseFloor(
        n=n,
        mean=float(x.mean()),
        std=sd,
        std_ci_low=lo,
        std_ci_high=hi,
        std_ci_method=method,
        normality_p=normality,
        sem=sd / math.sqrt(n) if n > 1 else math.nan,
        level=level,
        effect=math.nan if effect is None else float(effect),
        seeds_needed=need,
    )
