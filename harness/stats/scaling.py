"""Saturating compute-scaling curves: fits, seed-resampled intervals, ceiling and efficiency.

The curve (ScaleRL: Khatri et al. 2025, "The Art of Scaling RL Compute") is

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)

with R0 the score at C = 0, A the asymptote (the **ceiling**), C_mid the compute at which half
of the gain A - R0 is reached and B > 0 the steepness (C_mid and B: the **efficiency**).

**R0 is fixed, not fitted.** It is measured directly: the start evaluation (C = 0), the same
warm-started model for every seed, so its mean over the seeds' C = 0 evaluations is R0. Fitting
it would spend a parameter on a value the data pin down, and a free R0 trades off against B and
C_mid at the low-compute end, which with 6-10 evaluations per curve leaves the fit poorly
conditioned (ScaleRL fixes it the same way). Points at C = 0 therefore only give R0; the fit
reads the points at C > 0.

**The fit** is ``scipy.optimize.least_squares`` (trust-region reflective, with bounds) on the
pooled points of an arm's seeds, in the parameters (A, B, log C_mid) with compute scaled by its
largest value, so every parameter is of order one: A within the metric's range when it has one,
B in ``B_BOUNDS``, C_mid from ``1/CMID_SPAN`` of the smallest observed compute to ``CMID_SPAN``
times the largest (a midpoint beyond the data is allowed, then flagged). A few starting points
are tried and the lowest cost kept. A fit that does not converge says so (``converged``, with the
optimiser's message), never raises; a converged fit is **identified** unless: A sits at a bound;
B sits at a bound; C_mid lies beyond the largest observed compute; fewer than 2 of every seed's
evaluations lie at or past C_mid (the ceiling would be extrapolated); or the Jacobian is
numerically singular (A, B and C_mid cannot be told apart, e.g. a flat curve). A quantity of a
fit that is not identified gets no verdict.

**Intervals: a seed jackknife with t_{n-1} critical values** (and, given per-prompt scores, a
grouped prompt jackknife added: see ``fit_scaling``). Each arm is fitted again without
each of its n seeds; the jackknife standard error of A (of log B, log C_mid) is
``sqrt((n-1)/n * sum_i (theta_(i) - mean)^2)`` and the interval is the full fit's estimate
+- ``t_{n-1}`` times it. We chose it over the alternatives by calibration
(tests/stats/test_scaling_calibration.py):

* a seed bootstrap has only 10 distinct resamples at 3 seeds and resamples from the few values
  seen: its exact percentile interval of A covered 0.72 at 3 seeds in the same simulation;
* per-seed fits combined with a t interval cover about as well when every seed's own curve is
  identified (0.947), but need each single curve to identify its fit: with noisier points
  (sd 0.03) all three single curves did so in 62% of simulations, the pooled fit in 97%;
* the jackknife needs fits of n - 1 seeds only, is exact for a mean (for a linear statistic its
  interval *is* the t interval of the seed means), and its variance estimate is biased upward
  for smooth non-linear statistics (Efron & Stein 1981), so it errs on the safe side where
  the fit is non-linear. Intervals of B and C_mid are taken on the log scale and
  exponentiated (both are positive and their sampling distributions skewed). Measured
  coverage of A and C_mid at 95%: 0.93-0.98 at 3, 5 and 10 seeds, normal and t3 noise.

A difference between two arms (ceiling: A_arm - A_control; efficiency: log C_mid ratio) is a
``Difference`` with the jackknife standard error: **paired** when the two arms ran the same seeds
(seed-matched designs: each seed left out of both fits; n - 1 df), otherwise the two arms'
jackknife variances added with Welch-Satterthwaite df. ``decide`` then reads verdicts from it
exactly as the study's main verdicts (Bonferroni over the arms, ``label_of``'s direction
handling).

**Extrapolation check** (``extrapolation_check``): fit on the evaluations in the first half of
the compute range, predict the second half, and compare with the seeds' mean curve there. The
error (RMSE and largest absolute error over the checked points) is set against the noise band:
the seed-level standard error of the mean curve at those points (root mean square over them).
The prediction is *within the noise* when its RMSE is at most the band's half-width,
``t_{n-1, 1 - alpha/2}`` times that standard error: a correct model predicts the mean curve to
within its own sampling noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special
from scipy import stats as sps

from ._util import JsonMixin, check_alpha
from .crossed import Difference

#: bounds on the steepness B (a fit at either end is not identified)
B_BOUNDS = (0.05, 20.0)
#: C_mid may be fitted from 1/CMID_SPAN of the smallest to CMID_SPAN times the largest compute
CMID_SPAN = 1e3
#: evaluations per seed that must lie at or past the fitted midpoint for A and C_mid to be identified
MIN_PAST_MIDPOINT = 2
#: condition number of the (scaled) Jacobian above which the covariance counts as singular
SINGULAR_CONDITION = 1e8
#: the labels of an efficiency verdict (smaller C_mid = reaches half its gain with less compute)
EFFICIENCY_LABELS = {
    "better": "more efficient",
    "worse": "less efficient",
    "equivalent": "equally efficient",
    "inconclusive": "inconclusive",
    "untested": "untested",
}


def saturating_curve(compute, r0: float, a: float, b: float, c_mid: float) -> np.ndarray:
    """R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B), with R(0) = R0 (numerically stable)."""
    c = np.asarray(compute, dtype=float)
    with np.errstate(divide="ignore"):
        z = b * (math.log(c_mid) - np.log(c))
    return r0 + (a - r0) * special.expit(-z)


@dataclass(frozen=True)
class CurveFit(JsonMixin):
    """One least-squares fit of the saturating curve.

    ``converged``: the optimiser finished (``reason`` holds its message when not);
    ``identified``: a converged fit whose A and C_mid the data determine (``reason`` says why
    not). ``n_points``: evaluations at C > 0 that were fitted; ``past_midpoint``: the fewest
    evaluations at or past C_mid that any seed has; ``c_max``: the largest observed compute.
    """

    r0: float
    a: float
    b: float
    c_mid: float
    converged: bool
    identified: bool
    reason: str
    n_points: int
    past_midpoint: int
    c_max: float
    rmse: float

    def predict(self, compute) -> np.ndarray:
        return saturating_curve(compute, self.r0, self.a, self.b, self.c_mid)


def _curves(compute, score) -> list[tuple[np.ndarray, np.ndarray]]:
    """One (compute, score) pair per seed, finite points only; a flat array is one seed."""
    if len(compute) != len(score):
        raise ValueError(f"compute and score must list the same seeds; got {len(compute)} and {len(score)}")
    if len(compute) and np.ndim(compute[0]) == 0:
        compute, score = [compute], [score]
    out = []
    for i, (c, y) in enumerate(zip(compute, score)):
        c, y = np.asarray(c, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
        if c.size != y.size:
            raise ValueError(f"seed {i}: compute has {c.size} points but score has {y.size}")
        if np.any(c[np.isfinite(c)] < 0):
            raise ValueError(f"seed {i}: compute must be >= 0")
        keep = np.isfinite(c) & np.isfinite(y)
        out.append((c[keep], y[keep]))
    return out


def _failed(reason: str, r0=math.nan, n_points=0, c_max=math.nan) -> CurveFit:
    return CurveFit(r0, math.nan, math.nan, math.nan, False, False, reason, n_points, 0, c_max, math.nan)


def fit_curve(
    compute,
    score,
    *,
    r0: float | None = None,
    a_bounds: tuple[float | None, float | None] | None = None,
    start: tuple[float, float, float] | None = None,
) -> CurveFit:
    """Fit the saturating curve to one or several seeds' points (pooled, unweighted).

    ``compute`` / ``score``: one seed's 1-D arrays, or a list of them (one per seed). ``r0``
    defaults to the mean score at C = 0; without such a point the fit is not run (reason given).
    ``a_bounds``: the metric's range (None or an unbounded side: no bound). ``start``: (A, B,
    C_mid) to start from (the jackknife starts each refit at the full fit), else a few starts.
    """
    curves = _curves(compute, score)
    c = np.concatenate([c for c, _ in curves]) if curves else np.array([])
    y = np.concatenate([y for _, y in curves]) if curves else np.array([])
    at_zero, pos = c == 0, c > 0
    if r0 is None:
        if not at_zero.any():
            return _failed("no evaluation at C = 0 (the start), so R0 is unknown")
        r0 = float(np.mean(y[at_zero]))
    x, yy = c[pos], y[pos]
    c_max = float(x.max()) if x.size else math.nan
    if np.unique(x).size < 3:
        return _failed("fewer than 3 evaluations past the start (the curve has 3 parameters)", r0, x.size, c_max)
    lo_a, hi_a = (None, None) if a_bounds is None else a_bounds
    lo_a = -np.inf if lo_a is None else float(lo_a)
    hi_a = np.inf if hi_a is None else float(hi_a)
    lx = np.log(x / c_max)
    lo_m, hi_m = float(lx.min()) - math.log(CMID_SPAN), math.log(CMID_SPAN)
    lower, upper = np.array([lo_a, B_BOUNDS[0], lo_m]), np.array([hi_a, B_BOUNDS[1], hi_m])

    def residuals(p):
        return r0 + (p[0] - r0) * special.expit(-p[1] * (p[2] - lx)) - yy

    def jacobian(p):
        d = p[2] - lx
        f = special.expit(-p[1] * d)
        slope = -(p[0] - r0) * f * (1.0 - f)
        return np.column_stack([f, slope * d, slope * p[1]])

    if start is not None:
        starts = [np.array([start[0], start[1], math.log(start[2] / c_max)])]
    else:
        order = np.argsort(x)
        tail = yy[order][-max(1, x.size // 5) :].mean()
        a0 = r0 + 1.1 * (tail - r0)
        starts = [np.array([a0, b0, m0]) for b0 in (0.7, 2.0) for m0 in (float(np.median(lx)), -0.3)]
    room = np.where(np.isfinite(upper - lower), 1e-3 * (upper - lower), 0.0)  # starts strictly inside
    best = None
    for p0 in starts:
        try:
            res = optimize.least_squares(
                residuals, np.clip(p0, lower + room, upper - room), jac=jacobian, bounds=(lower, upper), method="trf"
            )
        except (ValueError, np.linalg.LinAlgError) as err:
            return _failed(f"the fit did not converge: {err}", r0, x.size, c_max)
        if best is None or res.cost < best.cost:
            best = res
    p = best.x
    a, b, c_mid = float(p[0]), float(p[1]), float(c_max * math.exp(p[2]))
    rmse = float(np.sqrt(np.mean(best.fun**2)))
    if best.status <= 0 or not np.all(np.isfinite(p)):
        return CurveFit(
            r0, a, b, c_mid, False, False, f"the fit did not converge: {best.message}", x.size, 0, c_max, rmse
        )
    past = min(int(np.unique(cs[cs >= c_mid]).size) for cs, _ in curves if cs.size) if curves else 0
    reason = _identification(p, lower, upper, best.jac, c_mid, c_max, past)
    return CurveFit(r0, a, b, c_mid, True, not reason, reason, x.size, past, c_max, rmse)


def _identification(p, lower, upper, jac, c_mid: float, c_max: float, past: int) -> str:
    """Why a converged fit's A and C_mid are not determined by the data ("" when they are)."""
    span = np.where(np.isfinite(upper - lower), upper - lower, 1.0)
    tol = 1e-4 * span
    if abs(p[0] - lower[0]) <= tol[0] or abs(upper[0] - p[0]) <= tol[0]:
        return f"A ({p[0]:.4g}) is at the metric's bound"
    if abs(p[1] - lower[1]) <= tol[1] or abs(upper[1] - p[1]) <= tol[1]:
        return f"B ({p[1]:.4g}) is at its bound {B_BOUNDS}: the curve is a step or a straight line here"
    if c_mid > c_max:
        return (
            f"C_mid ({c_mid:.4g}) lies beyond the largest observed compute ({c_max:.4g}): the ceiling is extrapolated"
        )
    if past < MIN_PAST_MIDPOINT:
        return (
            f"only {past} evaluation(s) at or past the fitted midpoint (C_mid {c_mid:.4g}); {MIN_PAST_MIDPOINT} needed"
        )
    sv = np.linalg.svd(np.asarray(jac, dtype=float), compute_uv=False)
    if not sv.size or sv[-1] <= 0 or sv[0] / sv[-1] > SINGULAR_CONDITION:
        return "singular covariance: the data cannot tell A, B and C_mid apart (a flat or a linear curve)"
    return ""


# ----------------------------------------------------------------------------- jackknife

#: prompts are left out in this many groups (a grouped jackknife: 10 refits whatever the prompt count)
PROMPT_GROUPS = 10


@dataclass(frozen=True)
class ScalingFit(JsonMixin):
    """One arm's fit with jackknife t intervals at ``level``.

    ``a_low``/``a_high`` etc. are NaN when no interval can be given (``interval_reason``: fewer
    than 2 seeds, or a fit without one seed or prompt group did not converge). ``df``: the
    seeds' n - 1. ``jackknife`` holds, per seed (in ``seeds`` order), (A, log B, log C_mid)
    fitted without that seed; ``prompt_jackknife`` the same per left-out prompt group when
    per-prompt scores were given (``prompts``: their ids, in order). Differences use both.
    """

    fit: CurveFit
    seeds: tuple
    level: float
    df: float
    a_low: float
    a_high: float
    b_low: float
    b_high: float
    c_mid_low: float
    c_mid_high: float
    se_a: float
    se_log_b: float
    se_log_c_mid: float
    jackknife: tuple
    prompt_jackknife: tuple = ()
    prompts: tuple = ()
    interval_reason: str = ""

    @property
    def n_seeds(self) -> int:
        return len(self.seeds)


def _jackknife_var(values) -> np.ndarray:
    """Jackknife variance of leave-one-(group-)out estimates along axis 0."""
    v = np.asarray(values, dtype=float)
    n = v.shape[0]
    return (n - 1) / n * np.sum((v - v.mean(axis=0)) ** 2, axis=0)


def _satterthwaite(parts: list[tuple[np.ndarray, float]]) -> np.ndarray:
    """Degrees of freedom of a sum of independent variance estimates (variance, df)."""
    total = sum(v for v, _ in parts)
    with np.errstate(invalid="ignore", divide="ignore"):
        return total**2 / sum(v**2 / df for v, df in parts)


def _prompt_groups(n_prompts: int) -> list[np.ndarray]:
    return [g for g in np.array_split(np.arange(n_prompts), min(PROMPT_GROUPS, n_prompts)) if g.size]


def fit_scaling(
    compute: Sequence,
    score: Sequence,
    *,
    seeds: Sequence | None = None,
    alpha: float = 0.05,
    a_bounds: tuple[float | None, float | None] | None = None,
    prompt_scores: Sequence | None = None,
    prompts: Sequence | None = None,
) -> ScalingFit:
    """Fit one arm's seeds (``compute[i]``, ``score[i]``: seed i's evaluations) and give A, B and
    C_mid jackknife t intervals at level 1 - ``alpha``. R0 is each fit's mean at C = 0.

    ``prompt_scores[i]``: seed i's [evaluations x prompts] scores (``score[i]`` their mean, the
    prompts in the same order for every seed, named by ``prompts``). With them the prompts are
    resampled too: a grouped jackknife over ``PROMPT_GROUPS`` groups of prompts, its variance
    added to the seeds' (so the interval covers for the sampling of prompts as well as of seeds;
    the seed x prompt term is in both, which errs on the wide side), with Satterthwaite df."""
    alpha = check_alpha(alpha)
    curves = _curves(compute, score)
    labels = tuple(range(len(curves))) if seeds is None else tuple(seeds)
    if len(labels) != len(curves):
        raise ValueError(f"seeds names {len(labels)} seeds for {len(curves)} curves")
    tables = _prompt_tables(compute, score, prompt_scores)
    prompt_ids = () if tables is None else tuple(prompts) if prompts is not None else tuple(range(tables[0].shape[1]))
    fit = fit_curve([c for c, _ in curves], [y for _, y in curves], a_bounds=a_bounds)
    n = len(curves)
    nan = math.nan

    def without_interval(reason: str) -> ScalingFit:
        return ScalingFit(fit, labels, 1 - alpha, n - 1.0, *([nan] * 9), (), (), prompt_ids, reason)

    if not fit.converged:
        return without_interval(fit.reason)
    if n < 2:
        return without_interval("one seed: no seed-to-seed interval")
    start = (fit.a, fit.b, fit.c_mid)

    def refit(points, what: str):
        f = fit_curve([c for c, _ in points], [y for _, y in points], a_bounds=a_bounds, start=start)
        return (f.a, math.log(f.b), math.log(f.c_mid)) if f.converged else f"the fit without {what} did not converge"

    jack = [refit([cy for j, cy in enumerate(curves) if j != i], f"seed {labels[i]}") for i in range(n)]
    prompt_jack = []
    if tables is not None:
        for k, group in enumerate(_prompt_groups(len(prompt_ids))):
            keep = np.setdiff1d(np.arange(len(prompt_ids)), group)
            points = [(c, t[:, keep].mean(axis=1)) for (c, _), t in zip(curves, tables)]
            prompt_jack.append(refit(points, f"prompt group {k + 1}"))
    failed = [j for j in jack + prompt_jack if isinstance(j, str)]
    if failed:
        return without_interval(failed[0])
    parts = [(_jackknife_var(jack), n - 1.0)]
    if prompt_jack:
        parts.append((_jackknife_var(prompt_jack), len(prompt_jack) - 1.0))
    var = sum(v for v, _ in parts)
    df = _satterthwaite(parts) if len(parts) > 1 else np.full(3, n - 1.0)
    se = np.sqrt(var)
    crit = sps.t.ppf(1 - alpha / 2, np.where(np.isfinite(df), df, n - 1.0))
    centre = np.array([fit.a, math.log(fit.b), math.log(fit.c_mid)])
    low, high = centre - crit * se, centre + crit * se
    return ScalingFit(
        fit,
        labels,
        1 - alpha,
        n - 1.0,
        float(low[0]),
        float(high[0]),
        float(math.exp(low[1])),
        float(math.exp(high[1])),
        float(math.exp(low[2])),
        float(math.exp(high[2])),
        float(se[0]),
        float(se[1]),
        float(se[2]),
        tuple(jack),
        tuple(prompt_jack),
        prompt_ids,
    )


def _prompt_tables(compute, score, prompt_scores) -> list[np.ndarray] | None:
    """Each seed's [evaluations x prompts] table at the points ``_curves`` keeps, or None."""
    if prompt_scores is None:
        return None
    if np.ndim(compute[0]) == 0:
        compute, score, prompt_scores = [compute], [score], [prompt_scores]
    if len(prompt_scores) != len(compute):
        raise ValueError(f"prompt_scores must list the same seeds as compute; got {len(prompt_scores)}")
    tables = []
    for i, (c, y, t) in enumerate(zip(compute, score, prompt_scores)):
        c, y, t = np.asarray(c, dtype=float).ravel(), np.asarray(y, dtype=float).ravel(), np.asarray(t, dtype=float)
        if t.ndim != 2 or t.shape[0] != c.size:
            raise ValueError(f"seed {i}: prompt_scores must be [evaluations x prompts]; got shape {t.shape}")
        keep = np.isfinite(c) & np.isfinite(y)
        if not np.all(np.isfinite(t[keep])):
            raise ValueError(f"seed {i}: prompt_scores has missing values at an evaluation")
        tables.append(t[keep])
    if len({t.shape[1] for t in tables}) != 1 or tables[0].shape[1] < 2:
        raise ValueError("prompt_scores must hold the same 2 or more prompts for every seed")
    return tables


# ----------------------------------------------------------------------------- differences

#: the quantities a difference can be taken of: index into a jackknife row, and the point estimate
_QUANTITIES = {"ceiling": (0, lambda f: f.a), "efficiency": (2, lambda f: math.log(f.c_mid))}


def scaling_difference(arm: ScalingFit, control: ScalingFit, quantity: str, *, paired: bool = True) -> Difference:
    """``ceiling``: A_arm - A_control; ``efficiency``: log(C_mid_arm / C_mid_control); with the
    jackknife standard error. Seeds: paired when both arms ran the same seeds and ``paired``
    (each seed left out of both fits), else the two arms' variances added (Welch). Prompts (when
    both were given per-prompt scores): paired on the prompt groups when both arms were scored
    on the same prompts, else added. Satterthwaite df. Not testable (``reason``) when either
    fit is not identified or has no interval."""
    if quantity not in _QUANTITIES:
        raise ValueError(f"unknown quantity {quantity!r}; valid: {', '.join(_QUANTITIES)}")
    index, point = _QUANTITIES[quantity]
    same_seeds = paired and arm.seeds == control.seeds and arm.n_seeds >= 2
    with_prompts = bool(arm.prompt_jackknife) and bool(control.prompt_jackknife)
    test = "seed jackknife, " + ("paired" if same_seeds else "Welch") + (" + prompt jackknife" if with_prompts else "")
    n_a, n_c = arm.n_seeds, control.n_seeds

    def untestable(reason: str) -> Difference:
        diff = point(arm.fit) - point(control.fit) if arm.fit.converged and control.fit.converged else math.nan
        return Difference(diff, math.nan, math.nan, test, n_a, n_c, same_seeds, reason=reason)

    for side, f in (("arm", arm), ("control", control)):
        if not f.fit.identified:
            return untestable(f"the {side}'s fit is not identified: {f.fit.reason}")
        if f.interval_reason:
            return untestable(f"the {side}'s fit has no interval: {f.interval_reason}")

    def column(rows) -> np.ndarray:
        return np.array([r[index] for r in rows])

    if same_seeds:
        parts = [(_jackknife_var(column(arm.jackknife) - column(control.jackknife)), n_a - 1.0)]
    else:
        parts = [
            (_jackknife_var(column(arm.jackknife)), n_a - 1.0),
            (_jackknife_var(column(control.jackknife)), n_c - 1.0),
        ]
    if with_prompts and arm.prompts == control.prompts:
        d = column(arm.prompt_jackknife) - column(control.prompt_jackknife)
        parts.append((_jackknife_var(d), len(d) - 1.0))
    elif with_prompts:
        parts += [(_jackknife_var(column(f.prompt_jackknife)), len(f.prompt_jackknife) - 1.0) for f in (arm, control)]
    var = float(sum(v for v, _ in parts))
    df = float(_satterthwaite(parts)) if var > 0 else math.nan
    return Difference(point(arm.fit) - point(control.fit), math.sqrt(var), df, test, n_a, n_c, same_seeds)


# ----------------------------------------------------------------------------- extrapolation


@dataclass(frozen=True)
class Extrapolation(JsonMixin):
    """Fit on the first half of the compute range, predicted over the second.

    ``c_split``: half the largest observed compute; ``fit``: the first half's fit;
    ``n_checked``: second-half points compared; ``rmse`` / ``max_abs_error``: the prediction
    against the seeds' mean curve there; ``noise_se``: the seed-level standard error of that mean
    (root mean square over the points); ``band``: ``t_{n-1}`` times it; ``within``: rmse <= band
    (None when it cannot be said, ``reason``).
    """

    c_split: float
    fit: CurveFit
    n_checked: int
    rmse: float
    max_abs_error: float
    noise_se: float
    band: float
    within: bool | None
    reason: str = ""


def _second_half_grid(curves, c_split: float) -> np.ndarray:
    """The points to check: the seeds' shared evaluations past ``c_split`` when every seed has the
    same compute values, else evenly spaced points up to the smallest seed's largest compute."""
    first = curves[0][0]
    if all(c.shape == first.shape and np.allclose(c, first) for c, _ in curves):
        return np.unique(first[first > c_split])
    top = min(float(c.max()) for c, _ in curves)
    k = int(np.median([np.sum(c > c_split) for c, _ in curves]))
    return np.linspace(c_split, top, k + 1)[1:] if top > c_split and k else np.array([])


def extrapolation_check(
    compute: Sequence,
    score: Sequence,
    *,
    alpha: float = 0.05,
    a_bounds: tuple[float | None, float | None] | None = None,
) -> Extrapolation:
    """Fit the evaluations at C <= half the largest compute (R0 from C = 0), predict the rest."""
    alpha = check_alpha(alpha)
    curves = [(c, y) for c, y in _curves(compute, score) if c.size]
    nan = math.nan
    if not curves:
        return Extrapolation(nan, _failed("no evaluations"), 0, nan, nan, nan, nan, None, "no evaluations")
    c_split = max(float(c.max()) for c, _ in curves) / 2
    early = [(c[c <= c_split], y[c <= c_split]) for c, y in curves]
    fit = fit_curve([c for c, _ in early], [y for _, y in early], a_bounds=a_bounds)
    grid = _second_half_grid(curves, c_split)
    if not fit.converged:
        return Extrapolation(c_split, fit, 0, nan, nan, nan, nan, None, f"the first half's {fit.reason}")
    if len(curves) < 2 or not grid.size:
        why = "one seed: no noise band" if len(curves) < 2 else "no evaluations in the second half"
        return Extrapolation(c_split, fit, 0, nan, nan, nan, nan, None, why)
    matrix = np.array([np.interp(grid, *_sorted(c, y), left=nan, right=nan) for c, y in curves])
    n = np.isfinite(matrix).sum(axis=0)
    ok = n >= 2
    matrix, grid, n = matrix[:, ok], grid[ok], n[ok]
    mean = np.nanmean(matrix, axis=0)
    se = np.nanstd(matrix, axis=0, ddof=1) / np.sqrt(n)
    err = fit.predict(grid) - mean
    rmse = float(np.sqrt(np.mean(err**2)))
    noise = float(np.sqrt(np.mean(se**2)))
    band = float(sps.t.ppf(1 - alpha / 2, len(curves) - 1)) * noise
    return Extrapolation(c_split, fit, int(grid.size), rmse, float(np.max(np.abs(err))), noise, band, rmse <= band)


def _sorted(c: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(c, kind="stable")
    return c[order], y[order]
