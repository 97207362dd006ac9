"""Forecasts: an arm's value at the budget, and its difference from the control, predicted at a look
from the seeds' partial curves, with an interval that carries the extrapolation's error.

**The curve** is the saturating curve of ``harness.stats.scaling`` (R(C) = R0 + (A - R0) / (1 +
(C_mid / C)^B), R0 the seeds' mean at C = 0), fitted by its ``fit_curve`` to the pooled points
of a side's seeds at 0 <= C <= ``look`` (points past the look are dropped: a look sees only what
was run up to it). The forecast of a side is that fit's value at ``budget``; of a difference, the
arm's minus the control's.

**Seed jackknife** (over the fit, as ``fit_scaling`` does it; leave one seed out, refit, predict
at the budget). With theta the full-data forecast and theta_(i) the forecast without seed i of n:

* pseudo-values p_i = n theta - (n - 1) theta_(i); the jackknife variance is
  ``var_J = sum_i (p_i - mean p)^2 / (n (n - 1)) = (n - 1) / n * sum_i (theta_(i) - mean theta_(.))^2``
  (Quenouille-Tukey). The centre is the full-data forecast theta, as ``fit_scaling`` centres its
  intervals (not the pseudo-values' mean, the bias-corrected estimate);
* a difference of arms that ran the **same seeds** is **paired**: seed i is left out of both fits
  and theta_(i) is the difference of the two refits' forecasts, n - 1 df; otherwise each arm is
  jackknifed over its own seeds and the two variances add, with Welch-Satterthwaite df
  ``(v_a + v_c)^2 / (v_a^2 / (n_a - 1) + v_c^2 / (n_c - 1))``.
* given per-prompt scores (every seed's [evaluations x prompts], the score their mean), the prompts
  are jackknifed too, as ``fit_scaling`` does: ``PROMPT_GROUPS`` groups of prompts left out in turn
  (every seed's score the mean of the prompts kept), paired across the arms when both were scored
  on the same prompts; that variance is added to the seeds' (the seed x prompt term is in both,
  which errs wide) and the df are Satterthwaite's over all the parts. Without them the prompts are
  treated as fixed, as the trial-means analysis treats them.

**Out-of-sample check** (the extrapolation's error the jackknife cannot see: a curve the family
does not fit is refitted just as wrongly without any one seed). Each side is fitted again on its
points at C <= s = ``CHECK_SPLIT`` x ``look`` only; the difference (or value) that fit predicts is
compared, at the evaluations observed in (s, look] (the seeds' shared evaluations, or evenly
spaced points when the seeds' compute values differ, as ``extrapolation_check`` chooses them),
with what the seeds show there: the mean over seeds of the per-seed difference (paired), or the
difference of the arms' mean curves (unpaired), curves read by linear interpolation. With e_j the
prediction error at checked point j and se_j the standard error of the observed mean there,

    bias^2 = max(0, mean_j e_j^2 - mean_j se_j^2)

is the squared error the observed means' own sampling noise does not explain. It keeps the early
fit's own seed noise (its error is the model's and the early fit's together), so the widening errs
wide. We measured the alternative that subtracts that noise too (the early fit's jackknife variance
at the checked points): at a look before the curve's midpoint it removed nearly all the widening,
and at 5 seeds the interval covered 0.87 (one arm's value) and 0.90 (crossing curves) over 200
replicates, against 0.93 and 0.95 (100 replicates) keeping it (benchmarks/forecast_calibration.py,
25% look). The early fit extrapolated over the log-compute horizon h_check = log(x_top / s)
(x_top the last checked point); the forecast extrapolates over h = log(budget / look). The error
is taken to grow in proportion to the horizon and enters the forecast's variance as a known term:

    se^2 = var_J + (bias * h / h_check)^2,

and the interval is ``theta +- t_{df, 1 - alpha/2} * se`` with the jackknife's df (n - 1 paired,
Welch-Satterthwaite otherwise). The check widens the interval where the earlier part of the
curve was mispredicted, by the model or by the early fit's noise.

**What it cannot see**: a change of the curve's shape after the look (a decline from over-
optimisation that starts past the look, a second rise) leaves no trace in the curve up to the
look; no interval built from it covers that (measured: README, "Verdicts called from the fitted curve").
Calibration by simulation: tests/stats/test_forecast_calibration.py and
benchmarks/forecast_calibration.py (figures in README, "Verdicts called from the fitted curve").

**No forecast** (``NoForecast``, with the reason; never a number): the look at or past the budget;
a side with fewer than 2 seeds; a curve without its start evaluation (C = 0); fewer than 3
evaluations past the start up to the look, or up to the check's split; a fit (full, jackknife or
early) that does not converge; no evaluation between the split and the look.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special

from ._util import JsonMixin, check_alpha
from .crossed import Difference
from .curves import align_on_grid
from .forecast_needs import CHECK_SPLIT, MIN_EVALUATIONS
from .scaling import (
    CurveFit,
    _curves,
    _jackknife_var,
    _prompt_groups,
    _prompt_tables,
    _satterthwaite,
    _second_half_grid,
    fit_curve,
)
from .verdict import INCONCLUSIVE, Verdict, decide

#: a standard error at most this share of the scores' scale is round-off: the seeds agree exactly
NO_SPREAD = 1e-9
#: what every forecast verdict's text begins with: the call was made before the budget, from the fit
FORECAST_PREFIX = "Forecast"


@dataclass(frozen=True)
class NoForecast(JsonMixin):
    """No forecast at this look, and why (a curve too short, a fit that failed, ...)."""

    reason: str
    look: float
    budget: float


@dataclass(frozen=True)
class OutOfSample(JsonMixin):
    """The check on the earlier part of the curve: fitted at C <= ``split``, predicted at
    ``n_checked`` points in (split, look]. ``rmse``: of the prediction errors; ``noise_se``: root mean
    square standard error of the observed means there; ``bias``: sqrt(max(0, rmse^2 - noise_se^2));
    ``horizon_ratio``: log(budget / look) / log(x_top / split); ``widening``: bias *
    horizon_ratio, the extrapolation error added (in quadrature) to the jackknife standard error."""

    split: float
    n_checked: int
    rmse: float
    noise_se: float
    bias: float
    horizon_ratio: float
    widening: float


@dataclass(frozen=True)
class Forecast(JsonMixin):
    """One arm's value at ``budget`` (``n_control`` 0) or its difference from the control, forecast
    at ``look``. ``se`` is the interval's standard error: the jackknife's (``se_jackknife``: seeds,
    and prompts when per-prompt scores were given) and the out-of-sample ``check.widening`` in
    quadrature; ``df`` the jackknife's. ``jackknife``: the leave-one-seed-out forecasts (paired: of
    the difference; unpaired: the arm's, then the control's); ``prompt_jackknife``: the
    leave-one-prompt-group-out ones (empty without per-prompt scores). ``fits``: the full fits at
    the look (arm, then control)."""

    estimate: float
    se: float
    se_jackknife: float
    df: float
    look: float
    budget: float
    test: str
    n_arm: int
    n_control: int
    paired: bool
    check: OutOfSample
    jackknife: tuple
    fits: tuple[CurveFit, ...]
    prompt_jackknife: tuple = ()

    def interval(self, level: float) -> tuple[float, float]:
        """The two-sided ``level`` t interval: estimate +- t_{df, (1 + level) / 2} * se."""
        half = float(special.stdtrit(self.df, 0.5 + check_alpha(level, "level") / 2.0)) * self.se
        return self.estimate - half, self.estimate + half

    def difference(self) -> Difference:
        """The forecast difference as ``stats.decide`` reads one (its interval is ``interval``'s)."""
        if not self.n_control:
            raise ValueError("a forecast of one arm's value is not a difference: forecast arm - control")
        return Difference(self.estimate, self.se, self.df, self.test, self.n_arm, self.n_control, self.paired)


@dataclass(frozen=True, eq=False)
class _Side:
    """One arm's seeds' curves up to the look (finite points), with a sign in the forecast, and each
    seed's [evaluations x prompts] scores at those points when per-prompt scores were given."""

    curves: list[tuple[np.ndarray, np.ndarray]]
    seeds: tuple
    sign: float
    tables: list[np.ndarray] | None = None
    prompts: tuple = ()

    def reordered(self, seeds: tuple) -> _Side:
        order = [self.seeds.index(s) for s in seeds]
        tables = None if self.tables is None else [self.tables[i] for i in order]
        return _Side([self.curves[i] for i in order], seeds, self.sign, tables, self.prompts)

    def before(self, upto: float) -> _Side:
        """The side with only its points at C <= ``upto``."""
        cut = [c <= upto for c, _ in self.curves]
        curves = [(c[k], y[k]) for (c, y), k in zip(self.curves, cut)]
        tables = None if self.tables is None else [t[k] for t, k in zip(self.tables, cut)]
        return _Side(curves, self.seeds, self.sign, tables, self.prompts)


def _side(x, y, seeds, sign: float, look: float, prompt_scores=None, prompts=None) -> _Side:
    curves = _curves(x, y)
    labels = tuple(range(len(curves))) if seeds is None else tuple(seeds)
    if len(labels) != len(curves):
        raise ValueError(f"seeds names {len(labels)} seeds for {len(curves)} curves")
    if len(set(labels)) != len(labels):
        raise ValueError(f"seeds must be distinct; got {list(labels)}")
    tables = _prompt_tables(x, y, prompt_scores)
    ids = ()
    if tables is not None:  # the score the prompts are resampled around: their mean
        curves = [(c, t.mean(axis=1)) for (c, _), t in zip(curves, tables)]
        ids = tuple(prompts) if prompts is not None else tuple(range(tables[0].shape[1]))
        if len(ids) != tables[0].shape[1]:
            raise ValueError(f"prompts names {len(ids)} prompts for {tables[0].shape[1]} per-prompt scores")
    return _Side(curves, labels, sign, tables, ids).before(look)


def _fit(curves, a_bounds, start=None) -> CurveFit:
    return fit_curve([c for c, _ in curves], [y for _, y in curves], a_bounds=a_bounds, start=start)


def _start(fit: CurveFit) -> tuple[float, float, float]:
    return fit.a, fit.b, fit.c_mid


def _shortfall(side: _Side, upto: float, what: str) -> str:
    """Why ``side`` cannot be fitted on its points at C <= ``upto`` ("" when it can)."""
    if len(side.curves) < 2:
        return f"{len(side.curves)} seed(s): a forecast interval needs 2 or more"
    for (c, _), seed in zip(side.curves, side.seeds):
        if not np.any(c == 0):
            return f"seed {seed} has no evaluation at C = 0 (the start), so R0 is unknown"
    past = np.unique(np.concatenate([c[(c > 0) & (c <= upto)] for c, _ in side.curves]))
    if past.size < MIN_EVALUATIONS:
        return f"{past.size} evaluation(s) past the start up to {what} ({upto:.4g}); the fit needs {MIN_EVALUATIONS}"
    return ""


def _jackknife(sides: list[_Side], fits: list[CurveFit], at: np.ndarray, paired: bool, a_bounds):
    """Leave-one-seed-out forecasts at the points ``at`` ([leave-outs x points]: paired, seed i out of
    every side; else each side's own seeds, side after side) and the variance parts [(variance at
    each point, df)], or the reason a refit failed."""

    def without(side: _Side, fit: CurveFit, i: int) -> np.ndarray | str:
        kept = [cy for j, cy in enumerate(side.curves) if j != i]
        f = _fit(kept, a_bounds, _start(fit))
        if not f.converged:
            return f"the fit without seed {side.seeds[i]} did not converge"
        return side.sign * f.predict(at)

    blocks = (
        [[[without(side, fit, i) for side, fit in zip(sides, fits)] for i in range(len(sides[0].curves))]]
        if paired
        else [[[without(side, fit, i)] for i in range(len(side.curves))] for side, fit in zip(sides, fits)]
    )
    rows, parts = [], []
    for block in blocks:
        failed = [p for row in block for p in row if isinstance(p, str)]
        if failed:
            return failed[0]
        mine = np.array([sum(row) for row in block])
        rows.append(mine)
        parts.append((_jackknife_var(mine), len(mine) - 1.0))
    return np.concatenate(rows), parts


def _prompt_jackknife(sides: list[_Side], fits: list[CurveFit], budget: float, a_bounds):
    """Grouped leave-prompts-out forecasts at ``budget`` (``PROMPT_GROUPS`` groups, as
    ``fit_scaling``; every seed's score is the mean of the prompts kept) and their variance parts,
    paired across the sides when all were scored on the same prompts; or the reason a refit failed."""
    pairs = list(zip(sides, fits))
    same = all(side.prompts == sides[0].prompts for side in sides)
    blocks = [pairs] if same else [[pair] for pair in pairs]
    rows, parts = [], []
    for block in blocks:
        mine = []
        for k, group in enumerate(_prompt_groups(len(block[0][0].prompts))):
            total = 0.0
            for side, fit in block:
                keep = np.setdiff1d(np.arange(len(side.prompts)), group)
                points = [(c, t[:, keep].mean(axis=1)) for (c, _), t in zip(side.curves, side.tables)]
                f = _fit(points, a_bounds, _start(fit))
                if not f.converged:
                    return f"the fit without prompt group {k + 1} did not converge"
                total += side.sign * float(f.predict(budget))
            mine.append(total)
        rows += mine
        parts.append((float(_jackknife_var(mine)), len(mine) - 1.0))
    return rows, parts


def _observed(sides: list[_Side], grid: np.ndarray, paired: bool) -> tuple[np.ndarray, np.ndarray]:
    """The seeds' signed sum (value or difference) at ``grid`` and its standard error there."""
    tables = [side.sign * align_on_grid(*zip(*side.curves), grid) for side in sides]
    if paired:
        per_seed = sum(tables)
        n = per_seed.shape[0]
        return per_seed.mean(axis=0), per_seed.std(axis=0, ddof=1) / math.sqrt(n)
    mean = sum(t.mean(axis=0) for t in tables)
    var = sum(t.var(axis=0, ddof=1) / t.shape[0] for t in tables)
    return mean, np.sqrt(var)


def _check(sides: list[_Side], look: float, budget: float, paired: bool, a_bounds) -> OutOfSample | str:
    """The out-of-sample check (module docstring), or the reason it cannot be made."""
    split = CHECK_SPLIT * look
    for side in sides:
        why = _shortfall(side, split, "the check's split")
        if why:
            return f"the out-of-sample check cannot be made: {why}"
    early_sides = [side.before(split) for side in sides]
    early = [_fit(side.curves, a_bounds) for side in early_sides]
    for f in early:
        if not f.converged:
            return f"the out-of-sample check's fit (C <= {split:.4g}) failed: {f.reason}"
    grid = _second_half_grid([cy for side in sides for cy in side.curves], split)
    grid = grid[grid <= look]
    if not grid.size:
        return f"no evaluation between the check's split ({split:.4g}) and the look ({look:.4g})"
    observed, se = _observed(sides, grid, paired)
    if not (np.all(np.isfinite(observed)) and np.all(np.isfinite(se))):
        return "the seeds' curves do not all reach the checked points"
    predicted = sum(side.sign * f.predict(grid) for side, f in zip(sides, early))
    err = predicted - observed
    rmse = float(np.sqrt(np.mean(err**2)))
    noise = float(np.sqrt(np.mean(se**2)))
    bias = math.sqrt(max(0.0, rmse**2 - noise**2))
    ratio = math.log(budget / look) / math.log(float(grid.max()) / split)
    return OutOfSample(split, int(grid.size), rmse, noise, bias, ratio, bias * ratio)


def _forecast(sides: list[_Side], look: float, budget: float, paired: bool, a_bounds) -> Forecast | NoForecast:
    look, budget = float(look), float(budget)
    if not (math.isfinite(look) and look > 0 and math.isfinite(budget)):
        raise ValueError(f"look and budget must be finite with look > 0; got look {look}, budget {budget}")
    if look >= budget:
        return NoForecast("the look is at or past the budget: read the curve there, nothing to forecast", look, budget)
    for side in sides:
        why = _shortfall(side, look, "the look")
        if why:
            return NoForecast(why, look, budget)
    full = [_fit(side.curves, a_bounds) for side in sides]
    for f in full:
        if not f.converged:
            return NoForecast(f"the fit at the look failed: {f.reason}", look, budget)
    jack = _jackknife(sides, full, np.array([budget]), paired, a_bounds)
    if isinstance(jack, str):
        return NoForecast(jack, look, budget)
    check = _check(sides, look, budget, paired, a_bounds)
    if isinstance(check, str):
        return NoForecast(check, look, budget)
    rows, parts = jack
    rows, parts = rows[:, 0], [(float(v[0]), df) for v, df in parts]
    prompt_rows = ()
    if all(side.tables is not None for side in sides):
        by_prompt = _prompt_jackknife(sides, full, budget, a_bounds)
        if isinstance(by_prompt, str):
            return NoForecast(by_prompt, look, budget)
        prompt_rows, prompt_parts = by_prompt
        parts += prompt_parts
    var_j = sum(v for v, _ in parts)
    df = float(_satterthwaite(parts)) if len(parts) > 1 and var_j > 0 else parts[0][1]
    estimate = float(sum(side.sign * f.predict(budget) for side, f in zip(sides, full)))
    se = math.sqrt(var_j + check.widening**2)
    scale = max(float(np.max(np.abs(y))) for side in sides for _, y in side.curves)
    if not se > NO_SPREAD * max(scale, 1.0):  # what is left is the fits' round-off
        return NoForecast("no spread: the seeds' forecasts agree exactly and the check saw no error", look, budget)
    how = "paired" if paired else ("Welch" if len(sides) > 1 else "one arm")
    n_control = len(sides[1].curves) if len(sides) > 1 else 0
    prompts = " + prompt jackknife" if prompt_rows else ""
    test = f"forecast (seed jackknife, {how}{prompts}; out-of-sample widening)"
    return Forecast(
        estimate,
        se,
        math.sqrt(var_j),
        df,
        look,
        budget,
        test,
        len(sides[0].curves),
        n_control,
        paired,
        check,
        tuple(float(r) for r in rows),
        tuple(full),
        tuple(float(r) for r in prompt_rows),
    )


def forecast_value(
    x: Sequence,
    y: Sequence,
    *,
    look: float,
    budget: float,
    seeds: Sequence | None = None,
    a_bounds: tuple[float | None, float | None] | None = None,
    prompt_scores: Sequence | None = None,
    prompts: Sequence | None = None,
) -> Forecast | NoForecast:
    """One arm's value at ``budget`` forecast from its seeds' curves (``x[i]``, ``y[i]``: seed i's
    compute and primary metric at each evaluation; points past ``look`` are left out).
    ``a_bounds``: the metric's range (as ``fit_curve``). ``prompt_scores[i]``: seed i's [evaluations
    x prompts] scores (named by ``prompts``), as ``fit_scaling`` takes them: the prompts are then
    jackknifed too (grouped), and each evaluation's score is their mean."""
    side = _side(x, y, seeds, 1.0, look, prompt_scores, prompts)
    return _forecast([side], look, budget, False, a_bounds)


def forecast_difference(
    arm_x: Sequence,
    arm_y: Sequence,
    control_x: Sequence,
    control_y: Sequence,
    *,
    look: float,
    budget: float,
    arm_seeds: Sequence | None = None,
    control_seeds: Sequence | None = None,
    paired: bool = True,
    a_bounds: tuple[float | None, float | None] | None = None,
    arm_prompt_scores: Sequence | None = None,
    control_prompt_scores: Sequence | None = None,
    arm_prompts: Sequence | None = None,
    control_prompts: Sequence | None = None,
) -> Forecast | NoForecast:
    """(arm - control) at ``budget`` forecast from both arms' curves up to ``look``. Paired by seed
    when ``paired`` and both ran the same seeds (the control's curves are put in the arm's seed
    order); else Welch. Seeds default to 0..n-1 in the order given. Per-prompt scores (both arms
    or neither, as ``forecast_value``): the prompt jackknife pairs the arms when both name the same
    prompts in the same order, else adds the two arms' prompt variances."""
    if (arm_prompt_scores is None) != (control_prompt_scores is None):
        raise ValueError("per-prompt scores must be given for both arms or for neither")
    arm = _side(arm_x, arm_y, arm_seeds, 1.0, look, arm_prompt_scores, arm_prompts)
    control = _side(control_x, control_y, control_seeds, -1.0, look, control_prompt_scores, control_prompts)
    same = paired and set(arm.seeds) == set(control.seeds) and len(arm.seeds) >= 2
    if same:
        control = control.reordered(arm.seeds)
    return _forecast([arm, control], look, budget, same, a_bounds)


# ----------------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class ForecastVerdict(JsonMixin):
    """A verdict called at a look from a forecast. ``label``: better, worse, equivalent (the
    forecast interval decides it) or inconclusive (it does not, or there is no forecast:
    ``verdict`` None, ``reason`` says why). ``verdict`` is ``stats.decide``'s reading of the forecast
    interval (its ``ci_low``/``ci_high``/``ci_level`` are that interval). ``forecast`` is always
    True: the call was made before the budget, from the fitted curve; ``reason`` says so."""

    label: str
    look: float
    budget: float
    verdict: Verdict | None
    forecast_of: Forecast | None
    reason: str
    forecast: bool = True

    @property
    def called(self) -> bool:
        """Whether the look calls a verdict early (anything but inconclusive)."""
        return self.label != INCONCLUSIVE


def forecast_verdict(
    forecasts: Sequence[Forecast | NoForecast],
    *,
    alpha: float,
    direction: str = "maximize",
    min_effect: float | None = None,
    family_size: int | None = None,
    correction: str = "bonferroni",
) -> list[ForecastVerdict]:
    """One ``ForecastVerdict`` per forecast difference (same order), read by ``stats.decide`` from
    each forecast's interval at level 1 - ``alpha`` / m (Bonferroni; ``correction="none"``: 1 -
    ``alpha``). ``alpha`` is what the look may spend (the caller's share of the design's alpha);
    m = ``family_size``, default the number of forecasts given (the pre-registered comparisons,
    those without a forecast included)."""
    items = list(forecasts)
    for f in items:
        if not isinstance(f, (Forecast, NoForecast)):
            raise TypeError(f"forecast_verdict() takes Forecast or NoForecast objects; got {type(f).__name__}")
    testable = [f for f in items if isinstance(f, Forecast)]
    m = len(items) if family_size is None else int(family_size)
    verdicts = iter(
        decide(
            [f.difference() for f in testable],
            alpha=alpha,
            direction=direction,
            min_effect=min_effect,
            correction=correction,
            family_size=m,
        )
    )
    out = []
    for f in items:
        if isinstance(f, NoForecast):
            why = f"{FORECAST_PREFIX}: none at this look ({f.reason}); no early call."
            out.append(ForecastVerdict(INCONCLUSIVE, f.look, f.budget, None, None, why))
            continue
        v = next(verdicts)
        where = f"{FORECAST_PREFIX} at the budget ({f.budget:.4g}) from the curves up to the look ({f.look:.4g})"
        out.append(ForecastVerdict(v.label, f.look, f.budget, v, f, f"{where}: {v.reason}"))
    return out
