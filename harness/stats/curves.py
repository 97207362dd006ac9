"""Learning curves across seeds: per-point t bands and alignment on a common x grid."""

from __future__ import annotations

import numpy as np
from scipy import stats

from ._util import check_alpha


def curve_band(values, *, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and t-based (1 - alpha) CI of the mean at each point of a [seeds x points] array.

    NaN-safe: a seed missing a point (NaN) is left out of that point only. A point with one seed
    has its mean but a NaN band; a point with no seed is NaN throughout.
    """
    alpha = check_alpha(alpha)
    v = np.asarray(values, dtype=float)
    if v.ndim == 1:
        v = v[None, :]
    if v.ndim != 2:
        raise ValueError(f"values must be [seeds x points]; got shape {np.shape(values)}")
    ok = np.isfinite(v)
    n = ok.sum(axis=0)
    filled = np.where(ok, v, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, filled.sum(axis=0) / np.maximum(n, 1), np.nan)
        ss = np.where(ok, (v - mean) ** 2, 0.0).sum(axis=0)
        sd = np.sqrt(ss / np.maximum(n - 1, 1))
        crit = stats.t.ppf(1 - alpha / 2, np.maximum(n - 1, 1))
        half = np.where(n > 1, crit * sd / np.sqrt(np.maximum(n, 1)), np.nan)
    return mean, mean - half, mean + half


def align_on_grid(xs, ys, grid) -> np.ndarray:
    """Interpolate each run's curve (xs[i], ys[i]) linearly onto ``grid`` -> [seeds x len(grid)].

    Points outside a run's observed x range are NaN (no extrapolation), so runs of different
    lengths compare on, e.g., tokens processed. Each run is sorted by x; pairs with a NaN are dropped.
    """
    if len(xs) != len(ys):
        raise ValueError(f"xs and ys must list the same runs; got {len(xs)} and {len(ys)}")
    g = np.asarray(grid, dtype=float).ravel()
    out = np.full((len(xs), g.size), np.nan)
    for i, (x, y) in enumerate(zip(xs, ys)):
        x = np.asarray(x, dtype=float).ravel()
        y = np.asarray(y, dtype=float).ravel()
        if x.size != y.size:
            raise ValueError(f"run {i}: x has {x.size} points but y has {y.size}")
        keep = np.isfinite(x) & np.isfinite(y)
        x, y = x[keep], y[keep]
        if x.size == 0:
            continue
        order = np.argsort(x, kind="stable")
        out[i] = np.interp(g, x[order], y[order], left=np.nan, right=np.nan)
    return out
