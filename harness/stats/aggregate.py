"""Aggregates across tasks with stratified-bootstrap intervals (Agarwal et al. 2021, rliable).

Score matrices are ``[runs x tasks]``; a 1-D array is one task. The stratified bootstrap
resamples runs with replacement *within each task*, independently across tasks, which is the
right resampling unit when the seeds of different tasks are different runs.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from ._util import check_alpha, resolve_rng
from .bootstrap import Interval

_CHUNK = 2_000_000  # elements per vectorised bootstrap block


def _matrix(scores, name: str) -> np.ndarray:
    m = np.asarray(scores, dtype=float)
    if m.ndim == 1:
        m = m[:, None]
    if m.ndim != 2:
        raise ValueError(f"{name} must be [runs x tasks]; got shape {np.shape(scores)}")
    if m.shape[0] < 1 or m.shape[1] < 1:
        raise ValueError(f"{name} is empty; got shape {m.shape}")
    if not np.all(np.isfinite(m)):
        raise ValueError(f"{name} contains NaN/inf; drop or fill failed runs explicitly")
    return m


def iqm(scores) -> float:
    """Interquartile mean over all values: ``scipy.stats.trim_mean(scores, 0.25, axis=None)``
    (cuts int(0.25 n) values at each end, as rliable does)."""
    x = np.asarray(scores, dtype=float).ravel()
    if x.size == 0:
        raise ValueError("iqm of an empty array")
    return float(stats.trim_mean(x, 0.25, axis=None))


def _stratified(m: np.ndarray, n_boot: int, gen: np.random.Generator):
    """Yield blocks of stratified bootstrap replicates, shape (b, runs, tasks)."""
    runs, tasks = m.shape
    cols = np.arange(tasks)
    per = max(1, _CHUNK // (runs * tasks))
    for start in range(0, n_boot, per):
        b = min(per, n_boot - start)
        yield m[gen.integers(0, runs, size=(b, runs, tasks)), cols]


def _check_boot(n_boot) -> int:
    n_boot = int(n_boot)
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1; got {n_boot}")
    return n_boot


def aggregate_across_tasks(scores, *, alpha: float = 0.05, n_boot: int = 2000,
                           rng: np.random.Generator | int | None = None) -> dict[str, Interval]:
    """IQM and mean over a [runs x tasks] score matrix with stratified percentile-bootstrap
    intervals: ``{"iqm": Interval, "mean": Interval}``. rng None -> seeded with 0."""
    alpha = check_alpha(alpha)
    m = _matrix(scores, "scores")
    gen = resolve_rng(rng)
    n_boot = _check_boot(n_boot)
    iqms, means = [], []
    for block in _stratified(m, n_boot, gen):
        flat = block.reshape(block.shape[0], -1)
        iqms.append(stats.trim_mean(flat, 0.25, axis=1))
        means.append(flat.mean(axis=1))
    q = [alpha / 2, 1 - alpha / 2]
    out = {}
    for name, point, boots in (("iqm", iqm(m), iqms), ("mean", float(m.mean()), means)):
        lo, hi = np.quantile(np.concatenate(boots), q)
        out[name] = Interval(point, float(lo), float(hi))
    return out


def _poi(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(X > Y) + 0.5 P(X == Y) per task, averaged over tasks; x (..., nx, T), y (..., ny, T)."""
    xe = x[..., :, None, :]
    ye = y[..., None, :, :]
    s = (xe > ye).mean(axis=(-3, -2)) + 0.5 * (xe == ye).mean(axis=(-3, -2))
    return s.mean(axis=-1)


def probability_of_improvement(x, y, *, alpha: float = 0.05, n_boot: int = 2000,
                               rng: np.random.Generator | int | None = None) -> Interval:
    """rliable's probability of improvement of algorithm X over Y: for each task the probability
    that a random run of X scores higher than a random run of Y (ties count half), averaged over
    tasks; stratified percentile-bootstrap interval (runs of X and of Y resampled within each task).
    ``x`` is [runs_x x tasks], ``y`` is [runs_y x tasks]; run counts may differ, tasks may not."""
    alpha = check_alpha(alpha)
    mx, my = _matrix(x, "x"), _matrix(y, "y")
    if mx.shape[1] != my.shape[1]:
        raise ValueError(f"x and y must cover the same tasks; got {mx.shape[1]} and {my.shape[1]} columns")
    gen = resolve_rng(rng)
    n_boot = _check_boot(n_boot)
    nx, ny, tasks = mx.shape[0], my.shape[0], mx.shape[1]
    cols = np.arange(tasks)
    per = max(1, _CHUNK // (nx * ny * tasks))
    boots = []
    for start in range(0, n_boot, per):
        b = min(per, n_boot - start)
        xb = mx[gen.integers(0, nx, size=(b, nx, tasks)), cols]
        yb = my[gen.integers(0, ny, size=(b, ny, tasks)), cols]
        boots.append(_poi(xb, yb))
    lo, hi = np.quantile(np.concatenate(boots), [alpha / 2, 1 - alpha / 2])
    return Interval(float(_poi(mx, my)), float(lo), float(hi))
