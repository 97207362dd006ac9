"""Ceilings and efficiency: each condition's saturating compute curve, and verdicts on both.

Per condition, every completed trial's evaluations of the primary metric are read against the
study's compute axis (``primary_at.axis``: a cumulative metric logged on every evaluation row,
such as ``compute/flops``, or ``step``), joined on (trial, step); the start evaluation (step 0)
is at C = 0. :func:`harness.stats.scaling.fit_scaling` fits R(C) = R0 + (A - R0) / (1 +
(C_mid / C)^B) to the seeds' points, with seed-jackknife intervals for A, B and C_mid (the
prompts resampled too when every evaluation recorded per-prompt scores; under ``eval_subset``
every evaluation is read on the subset's prompts, which every evaluation scored, so that the
prompt jackknife covers the subset's draw as a sample of prompts), and each
pre-registered comparison gets two verdicts read by :func:`harness.stats.decide`: on the
**ceiling** (A_arm - A_control against ``min_effect``, in the direction of the study) and on
**efficiency** (the C_mid ratio arm / control on the log scale against ``[1/m, m]``,
m = ``scaling.efficiency_margin``; a smaller C_mid reaches half its gain with less compute:
"more efficient"; only between curves that improve on their start). Each kind of verdict is
one family, Bonferroni over the comparisons like the main verdicts. A quantity whose fit did
not converge or is not identified gets no verdict, with the reason. The extrapolation check
(first half of the compute predicts the second) and the points the report draws (each
condition's mean curve and band on the axis, and its fitted curve) come with them.

``scaling.fit``: ``off`` never fits; ``on`` always does (a condition that cannot be fitted says
why); ``auto`` (default) fits when the axis is logged and every completed trial has at least
``MIN_EVALUATIONS`` evaluations of the primary metric.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pandas as pd

from harness import stats
from harness.decide.frames import comparisons_of, completed, conditions_of, meta_of
from harness.decide.rules import DecisionRules
from harness.errors import ConfigError, unknown_name
from harness.tracking.prompt_scores import STRATUM_METRIC
from harness.tracking.study_meta import StudyMeta

DEFAULT_AXIS = "compute/flops"
FIT_MODES = ("auto", "on", "off")
DEFAULT_EFFICIENCY_MARGIN = 1.25
#: evaluations per completed trial (the start included) from which ``fit: auto`` fits
MIN_EVALUATIONS = 6
#: points on each condition's drawn fitted curve and band
CURVE_POINTS = 60
NO_VERDICT = "no verdict"

PARAMETER_COLUMNS = [
    "condition",
    "seeds",
    "r0",
    "A",
    "A_low",
    "A_high",
    "B",
    "B_low",
    "B_high",
    "C_mid",
    "C_mid_low",
    "C_mid_high",
    "converged",
    "identified",
    "reason",
]
VERDICT_COLUMNS = [
    "condition",
    "control",
    "test",
    "ceiling_diff",
    "ceiling_low",
    "ceiling_high",
    "ceiling_level",
    "ceiling_verdict",
    "ceiling_reason",
    "efficiency_ratio",
    "efficiency_low",
    "efficiency_high",
    "efficiency_level",
    "efficiency_verdict",
    "efficiency_reason",
]
EXTRAPOLATION_COLUMNS = [
    "condition",
    "c_split",
    "points_checked",
    "rmse",
    "max_abs_error",
    "noise_se",
    "band",
    "within",
    "first_half_identified",
    "reason",
]
CURVE_COLUMNS = ["condition", "x", "mean", "low", "high", "n_seeds", "fitted"]


@dataclass
class Scaling:
    """The fitted-curve tables of a study (see the module docstring); ``level`` is the level of
    the per-condition parameter intervals, the verdicts carry their own (family) level."""

    axis: str
    metric: str
    level: float
    efficiency_margin: float
    parameters: pd.DataFrame
    verdicts: pd.DataFrame
    extrapolation: pd.DataFrame
    curves: pd.DataFrame
    notes: list[str] = field(default_factory=list)


def _setting(block, key: str, default):
    if block is None:
        return default
    value = block.get(key) if isinstance(block, dict) else getattr(block, key, None)
    return default if value is None else value


def scaling_settings(meta: StudyMeta) -> tuple[str, str, float]:
    """(fit mode, axis, efficiency margin) from the study's ``scaling`` and ``primary_at`` sections."""
    mode = str(_setting(meta.scaling, "fit", "auto"))
    if mode not in FIT_MODES:
        raise unknown_name("scaling.fit", mode, FIT_MODES)
    axis = str(_setting(meta.primary_at, "axis", DEFAULT_AXIS))
    raw = _setting(meta.scaling, "efficiency_margin", DEFAULT_EFFICIENCY_MARGIN)
    try:
        margin = float(raw)
    except (TypeError, ValueError):
        margin = math.nan
    if not (math.isfinite(margin) and margin > 1):
        raise ConfigError(f"scaling.efficiency_margin must be a number above 1 (e.g. 1.25), got {raw!r}")
    return mode, axis, margin


class SeedCurve(NamedTuple):
    """One completed trial's evaluations of the metric: at ``step``, compute ``compute``, score ``score``."""

    seed: object
    trial_id: str
    step: np.ndarray
    compute: np.ndarray
    score: np.ndarray


def seed_curves(results, condition: str, metric: str, axis: str) -> list[SeedCurve]:
    """Each completed trial of ``condition``, in seed order: its evaluations of ``metric``
    against ``axis`` (joined on trial and step; step 0 is C = 0). A trial that never logged the
    axis is left out."""
    curves = results.curves
    done = completed(results.trials)
    done = done[done["arm"] == condition]
    seeds = dict(zip(done["trial_id"], done["seed"]))
    if curves is None or not len(curves) or not seeds:
        return []
    mine = curves[curves["trial_id"].isin(seeds)]
    scores = mine.loc[mine["metric"] == metric, ["trial_id", "step", "value"]]
    if axis == "step":
        both = scores.assign(x=scores["step"].astype(float))
    else:
        xs = mine.loc[mine["metric"] == axis, ["trial_id", "step", "value"]].rename(columns={"value": "x"})
        both = scores[scores["trial_id"].isin(set(xs["trial_id"]))].merge(xs, on=["trial_id", "step"], how="left")
        both.loc[both["step"] == 0, "x"] = 0.0  # the start evaluation, before any compute
    both = both.dropna(subset=["x", "value"]).sort_values(["trial_id", "step"])
    out = [
        SeedCurve(
            seeds[tid],
            tid,
            g["step"].to_numpy(),
            g["x"].to_numpy(dtype=float),
            g["value"].to_numpy(dtype=float),
        )
        for tid, g in both.groupby("trial_id", sort=False)
    ]
    return sorted(out, key=lambda c: (str(type(c.seed)), c.seed))


def prompt_tables(results, curves: list[SeedCurve], metric: str) -> tuple[list[np.ndarray], list] | None:
    """Each curve's [evaluations x prompts] scores of ``metric`` and the prompt ids, when every
    evaluation of every curve has a score for each of the same 2 or more prompts; else None.
    Under ``eval_subset`` (stratum rows recorded) the prompts are those every evaluation scored:
    the subset's."""
    prompts = getattr(results, "prompts", None)
    if prompts is None or not len(prompts) or not curves:
        return None
    mine = prompts["trial_id"].isin({c.trial_id for c in curves})
    rows = prompts[(prompts["metric"] == metric) & mine]
    if (prompts["metric"] == STRATUM_METRIC)[mine].any():
        scored = rows.groupby(["trial_id", "step"])["prompt_id"].agg(frozenset)
        rows = rows[rows["prompt_id"].isin(frozenset.intersection(*scored))]
    by_trial = dict(tuple(rows.groupby("trial_id", sort=False)))
    tables, ids = [], None
    for c in curves:
        if c.trial_id not in by_trial:
            return None
        wide = by_trial[c.trial_id].pivot_table(index="step", columns="prompt_id", values="value", aggfunc="last")
        wide = wide.reindex(index=c.step)
        if wide.shape[1] < 2 or wide.isna().to_numpy().any() or (ids is not None and list(wide.columns) != ids):
            return None
        ids = list(wide.columns)
        tables.append(wide.to_numpy(dtype=float))
    return tables, ids


def _evaluations_ok(results, metric: str) -> bool:
    """Every completed trial has at least MIN_EVALUATIONS finite evaluations of ``metric``."""
    done = completed(results.trials)
    curves = results.curves
    if not len(done) or curves is None or not len(curves):
        return False
    rows = curves[(curves["metric"] == metric) & curves["trial_id"].isin(done["trial_id"])]
    counts = rows.dropna(subset=["value"]).groupby("trial_id")["step"].nunique()
    return bool(counts.reindex(done["trial_id"], fill_value=0).ge(MIN_EVALUATIONS).all())


def _axis_logged(results, axis: str) -> bool:
    curves = results.curves
    return axis == "step" or (curves is not None and len(curves) and axis in set(curves["metric"].unique()))


def _band(curves, fit: stats.CurveFit | None, condition: str, alpha: float) -> pd.DataFrame:
    top = max(float(c.compute.max()) for c in curves)
    grid = np.linspace(0.0, top, CURVE_POINTS)
    matrix = np.asarray(stats.align_on_grid([c.compute for c in curves], [c.score for c in curves], grid), dtype=float)
    mean, low, high = stats.curve_band(matrix, alpha=alpha)
    fitted = fit.predict(grid) if fit is not None and fit.converged else np.full(grid.size, np.nan)
    return pd.DataFrame(
        {
            "condition": condition,
            "x": grid,
            "mean": mean,
            "low": low,
            "high": high,
            "n_seeds": np.isfinite(matrix).sum(axis=0),
            "fitted": fitted,
        }
    )


def _parameter_row(condition: str, fit: stats.ScalingFit | None, reason: str = "") -> dict:
    row = dict.fromkeys(PARAMETER_COLUMNS, math.nan) | {"condition": condition, "converged": False}
    row["identified"], row["seeds"] = False, 0
    if fit is None:
        return row | {"reason": reason}
    f = fit.fit
    row.update(
        seeds=fit.n_seeds,
        r0=f.r0,
        A=f.a,
        A_low=fit.a_low,
        A_high=fit.a_high,
        B=f.b,
        B_low=fit.b_low,
        B_high=fit.b_high,
        C_mid=f.c_mid,
        C_mid_low=fit.c_mid_low,
        C_mid_high=fit.c_mid_high,
        converged=f.converged,
        identified=f.identified,
        reason="; ".join(r for r in (f.reason, fit.interval_reason if f.reason != fit.interval_reason else "") if r),
    )
    return row


def _difference(arm, control, quantity: str, *, direction: str, paired: bool) -> stats.Difference:
    """``stats.scaling_difference``; an efficiency one only between curves that improve on their
    start in the study's direction (the midpoint of a falling curve measures no efficiency)."""
    d = stats.scaling_difference(arm, control, quantity, paired=paired)
    if quantity != "efficiency" or d.reason:
        return d
    for side, f in (("arm", arm), ("control", control)):
        gain = f.fit.a - f.fit.r0
        if not (gain > 0 if direction == "maximize" else gain < 0):
            why = f"the {side}'s curve does not improve on its start (A {f.fit.a:.4g}, R0 {f.fit.r0:.4g})"
            return dataclasses.replace(d, reason=why)
    return d


def _verdicts(pairs, fits, *, alpha, correction, direction, min_effect, margin, paired) -> pd.DataFrame:
    usable = [(a, b) for a, b in pairs if a in fits and b in fits]
    if not usable:
        return pd.DataFrame(columns=VERDICT_COLUMNS)
    families = {}
    for quantity, kwargs in (
        ("ceiling", {"direction": direction, "min_effect": min_effect}),
        ("efficiency", {"direction": "minimize", "min_effect": math.log(margin)}),
    ):
        diffs = [_difference(fits[a], fits[b], quantity, direction=direction, paired=paired) for a, b in usable]
        families[quantity] = (diffs, stats.decide(diffs, alpha=alpha, correction=correction, **kwargs))
    rows = []
    for i, (a, b) in enumerate(usable):
        row = {"condition": a, "control": b}
        for quantity, (diffs, verdicts) in families.items():
            d, v = diffs[i], verdicts[i]
            lo, hi, point = v.ci_low, v.ci_high, d.diff
            if quantity == "efficiency":
                lo, hi, point = math.exp(lo), math.exp(hi), math.exp(point) if math.isfinite(point) else math.nan
            label = v.label if quantity == "ceiling" else stats.EFFICIENCY_LABELS[v.label]
            key = "ceiling_diff" if quantity == "ceiling" else "efficiency_ratio"
            row.update(
                {
                    key: point,
                    f"{quantity}_low": lo,
                    f"{quantity}_high": hi,
                    f"{quantity}_level": v.ci_level,
                    f"{quantity}_verdict": label if d.testable else NO_VERDICT,
                    f"{quantity}_reason": "" if d.testable else d.reason,
                }
            )
            row["test"] = d.test
        rows.append(row)
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS)


def scaling_analysis(results, rules: DecisionRules) -> Scaling | None:
    """The fitted-curve tables of ``results`` under ``rules``' alpha, correction, direction and
    min_effect, or None when no fit runs (``scaling.fit: off``, or ``auto`` without the axis or
    without enough evaluations)."""
    meta = meta_of(results)
    mode, axis, margin = scaling_settings(meta)
    metric, alpha = meta.primary_metric, rules.alpha
    if mode == "off" or metric is None:
        return None
    if mode == "auto" and not (_axis_logged(results, axis) and _evaluations_ok(results, metric)):
        return None
    bounds = meta.metric_ranges.get(metric)
    a_bounds = tuple(bounds) if bounds is not None else None
    params, extrap, bands, fits = [], [], [], {}
    notes = [] if _axis_logged(results, axis) else [f"The compute axis {axis} is not logged: nothing to fit."]
    for cond in conditions_of(results):
        curves = seed_curves(results, cond, metric, axis)
        if not curves:
            params.append(_parameter_row(cond, None, f"no completed trial has {metric} against {axis}"))
            continue
        compute, score = [c.compute for c in curves], [c.score for c in curves]
        per_prompt = prompt_tables(results, curves, metric)
        tables, prompt_ids = per_prompt if per_prompt is not None else (None, None)
        if tables is not None:  # the score the prompts are resampled around: their mean
            score = [t.mean(axis=1) for t in tables]
        fit = stats.fit_scaling(
            compute,
            score,
            seeds=[c.seed for c in curves],
            alpha=alpha,
            a_bounds=a_bounds,
            prompt_scores=tables,
            prompts=prompt_ids,
        )
        fits[cond] = fit
        params.append(_parameter_row(cond, fit))
        check = stats.extrapolation_check(compute, score, alpha=alpha, a_bounds=a_bounds)
        extrap.append(
            {
                "condition": cond,
                "c_split": check.c_split,
                "points_checked": check.n_checked,
                "rmse": check.rmse,
                "max_abs_error": check.max_abs_error,
                "noise_se": check.noise_se,
                "band": check.band,
                "within": check.within,
                "first_half_identified": check.fit.identified,
                "reason": check.reason or check.fit.reason,
            }
        )
        bands.append(_band(curves, fit.fit, cond, alpha))
    verdicts = _verdicts(
        comparisons_of(results),
        fits,
        alpha=alpha,
        correction=rules.correction,
        direction=rules.direction,
        min_effect=rules.min_effect,
        margin=margin,
        paired=meta.seed_matched,
    )
    return Scaling(
        axis=axis,
        metric=metric,
        level=1 - alpha,
        efficiency_margin=margin,
        parameters=pd.DataFrame(params, columns=PARAMETER_COLUMNS),
        verdicts=verdicts,
        extrapolation=pd.DataFrame(extrap, columns=EXTRAPOLATION_COLUMNS),
        curves=pd.concat(bands, ignore_index=True)[CURVE_COLUMNS] if bands else pd.DataFrame(columns=CURVE_COLUMNS),
        notes=notes,
    )
