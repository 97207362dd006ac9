"""Percentile bootstrap intervals, for reporting only (verdicts never rest on them).

At 3-5 seeds a percentile bootstrap CI is far too narrow: it resamples from the few values seen,
so it cannot know how far the next seed could land. tests/stats/test_calibration.py shows a
"bootstrap CI of the difference excludes 0" rule fires in well over 5% of A/A comparisons at 3
seeds per arm.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ._util import JsonMixin, as_sample, check_alpha, resolve_rng


@dataclass(frozen=True)
class Interval(JsonMixin):
    """A point estimate with a (1 - alpha) interval: ``Interval(point, low, high)``."""

    point: float
    low: float
    high: float


def _apply(statistic: Callable, samples: np.ndarray) -> np.ndarray:
    """statistic over the last axis of a (n_boot, n) array; uses ``axis=-1`` when supported."""
    try:
        out = np.asarray(statistic(samples, axis=-1), dtype=float)
        if out.shape == samples.shape[:-1]:
            return out
    except TypeError:
        pass
    return np.array([float(statistic(row)) for row in samples])


def bootstrap_ci(
    values,
    statistic: Callable = np.mean,
    *,
    alpha: float = 0.05,
    n_boot: int = 2000,
    rng: np.random.Generator | int | None = None,
) -> Interval:
    """Percentile bootstrap interval of ``statistic(values)``. rng None -> seeded with 0."""
    alpha = check_alpha(alpha)
    x = as_sample(values, "values")
    gen = resolve_rng(rng)
    n_boot = int(n_boot)
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1; got {n_boot}")
    boots = _apply(statistic, x[gen.integers(0, x.size, size=(n_boot, x.size))])
    lo, hi = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
    return Interval(float(statistic(x)), float(lo), float(hi))


def bootstrap_diff_ci(
    arm, control, *, alpha: float = 0.05, n_boot: int = 2000, rng: np.random.Generator | int | None = None
) -> Interval:
    """Percentile bootstrap interval of mean(arm) - mean(control), resampling each arm on its own.

    For reporting only; its coverage at small n is poor (see module docstring)."""
    alpha = check_alpha(alpha)
    a, b = as_sample(arm, "arm"), as_sample(control, "control")
    gen = resolve_rng(rng)
    n_boot = int(n_boot)
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1; got {n_boot}")
    da = a[gen.integers(0, a.size, size=(n_boot, a.size))].mean(axis=1)
    db = b[gen.integers(0, b.size, size=(n_boot, b.size))].mean(axis=1)
    lo, hi = np.quantile(da - db, [alpha / 2, 1 - alpha / 2])
    return Interval(float(a.mean() - b.mean()), float(lo), float(hi))
