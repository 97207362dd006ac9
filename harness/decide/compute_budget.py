"""Where the primary comparison reads each trial: the study's ``primary_at`` (``harness.study.sections``).

- ``final``: the trial's last evaluation (the trials frame's final values), as always;
- ``budget``: the trial's curve of the primary metric read at ``budget`` on ``axis`` (a compute
  column of every history row, ``harness.engine.compute``, or the step), by linear
  interpolation between the two evaluations that bracket it; an evaluation exactly at the
  budget is read as it is;
- ``auc``: the area under the curve from its first evaluation (the start evaluation, at 0) to
  ``budget`` by the trapezoid rule, the curve's last segment cut at the budget by the same
  interpolation, divided by the span: a mean score over the axis, in the metric's units, so
  ``min_effect`` applies to it as to a final value.

Both are read per seed (from the curves frame) and per prompt (from the per-prompt frame), so the
seed x prompt test, the noise split, the looks of a sequential study and the calibration arms read
exactly what the verdicts read. The eval-sampling variance of a prompt is read the same way
(between two evaluations it is an approximation: each evaluation's variance, weighed linearly).

A study with ``eval_subset`` scores its intermediate evaluations on a stratified subset of the
held-out prompts. A point that reads such an evaluation (at it, between it and another, or an area
over it) is read per prompt on the prompts every evaluation it reads scored (the subset), and each
trial's value there is their stratified mean (``harness.stats.eval_subset``), not the curve's: the
curve mixes the start's full set with the subset's. The comparisons add the subset's sampling
variance to every interval read there (``harness.decide.comparisons``).

Nothing is extrapolated: a trial whose last evaluation falls short of the budget on the axis has
no value there. It is left out of every comparison, whatever ``failures:`` says (it did not fail:
the budget lies past what it ran, and scoring it at the metric's worst value would count an arm
that spends less per step as a failure), and the report names it and how far it reached, as a
failed trial under ``failures: drop``. A trial that recorded no such axis is left out the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.decide.frames import meta_of
from harness.study.sections import AXIS_UNITS, PrimaryAt, amount
from harness.tracking.prompt_scores import SAMPLE_VAR_SUFFIX, SAMPLES_SUFFIX, STRATUM_METRIC, STRATUM_SIZE_METRIC
from harness.tracking.study_meta import StudyMeta


def primary_at(results) -> PrimaryAt:
    """The study's ``primary_at`` from the results meta (the final evaluation where it has none)."""
    return PrimaryAt.model_validate(meta_of(results).primary_at or {})


def reads_at_point(results, metric: str) -> PrimaryAt | None:
    """The point ``metric`` is read at, or None where it is read at the final evaluation (every
    metric but the primary one, and the primary one under ``point: final``)."""
    point = primary_at(results)
    if point.point == "final" or metric != meta_of(results).primary_metric:
        return None
    return point


def read_curve(x: np.ndarray, y: np.ndarray, point: PrimaryAt) -> np.ndarray | float | None:
    """The value of the curve ``y`` (one row per evaluation: a value, or one per prompt) over
    ``x`` (the axis at each evaluation, rising) at ``point``; None when its last evaluation falls
    short of the budget."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    budget = point.budget
    if not len(x) or x[-1] < budget or x[0] > budget:  # short of the budget, or no evaluation before it
        return None
    i = int(np.argmax(x >= budget))  # the first evaluation at or past the budget
    if x[i] == budget:
        at = y[i]
    else:
        share = (budget - x[i - 1]) / (x[i] - x[i - 1])
        at = y[i - 1] + share * (y[i] - y[i - 1])
    if point.point == "budget":
        return at
    xs = np.append(x[:i], budget)
    if xs[-1] == xs[0]:  # the first evaluation is at the budget: the mean of a point is its value
        return at
    ys = np.concatenate([y[:i], np.asarray(at)[None]])
    return np.trapezoid(ys, xs, axis=0) / (budget - xs[0])


@dataclass(frozen=True)
class Shortfall:
    """A completed trial the point cannot read: its last evaluation short of the budget."""

    trial_id: str
    condition: str
    seed: int
    reach: float | None  # the axis at its last evaluation; None: the axis was not recorded


def _axis_at(curves: pd.DataFrame, axis: str, steps: np.ndarray) -> np.ndarray | None:
    """The axis at each of a trial's evaluation ``steps`` (its curves rows), None where missing."""
    if axis == "step":
        return steps.astype(float)
    rows = curves[curves["metric"] == axis].drop_duplicates("step", keep="last").set_index("step")["value"]
    if not set(steps) <= set(rows.index):
        return None
    return pd.to_numeric(rows.loc[steps], errors="coerce").to_numpy(dtype=float)


@dataclass
class _Reading:
    values: dict[str, float]  # trial id -> its value at the point
    prompt_rows: pd.DataFrame  # the per-prompt rows at the point (one step per trial)
    shortfalls: list[Shortfall]


def _read(results, metric: str, point: PrimaryAt, trials: pd.DataFrame) -> _Reading:
    """Every completed trial of ``trials`` read at ``point``: per seed and per prompt."""
    curves = results.curves
    if curves is None or not len(curves):
        curves = pd.DataFrame(columns=["trial_id", "step", "metric", "value"])
    prompts = getattr(results, "prompts", None)
    strata = [STRATUM_METRIC, STRATUM_SIZE_METRIC] if metric.count("/") == 1 else []  # the study task's own
    names = [metric, metric + SAMPLE_VAR_SUFFIX, metric + SAMPLES_SUFFIX, *strata]
    if prompts is not None and len(prompts):
        prompts = prompts[prompts["trial_id"].isin(trials["trial_id"]) & prompts["metric"].isin(names)]
    values, rows, short = {}, [], []
    by_trial = dict(tuple(curves[curves["trial_id"].isin(trials["trial_id"])].groupby("trial_id")))
    for trial in trials.itertuples(index=False):
        mine = by_trial.get(trial.trial_id, curves.iloc[:0])
        curve = mine[mine["metric"] == metric].drop_duplicates("step", keep="last").sort_values("step")
        steps = curve["step"].to_numpy()
        axis = _axis_at(mine, point.axis, steps)
        value = None if axis is None else read_curve(axis, curve["value"].to_numpy(dtype=float), point)
        if value is None:
            reach = None if axis is None or not len(axis) else float(axis[-1])
            short.append(Shortfall(trial.trial_id, str(trial.arm), int(trial.seed), reach))
            continue
        values[trial.trial_id] = float(value)
        if prompts is None or not len(prompts):
            continue
        at_step = dict(zip(steps, axis))
        mine_prompts = prompts[prompts["trial_id"] == trial.trial_id]
        read, mine_rows = _prompts_read(mine_prompts, metric, at_step, point), []
        for name, table in mine_prompts.groupby("metric"):
            wide = table.pivot_table(index="step", columns="prompt_id", values="value", aggfunc="last")
            wide = wide.loc[[s for s in wide.index if s in at_step], [p for p in wide.columns if p in read]]
            per_prompt = read_curve(np.array([at_step[s] for s in wide.index]), wide.to_numpy(), point)
            if per_prompt is None:  # its per-prompt scores stop short of its curve: no table for it
                continue
            mine_rows.append(
                pd.DataFrame(
                    {
                        "trial_id": trial.trial_id,
                        "arm": trial.arm,
                        "seed": trial.seed,
                        "step": int(steps[-1]),
                        "prompt_id": wide.columns,
                        "metric": name,
                        "value": np.asarray(per_prompt, dtype=float),
                    }
                )
            )
        rows += mine_rows
        stratified = _stratified_value(mine_rows, metric)
        if stratified is not None:
            values[trial.trial_id] = stratified
    frame = pd.concat(rows, ignore_index=True) if rows else None
    return _Reading(values, frame, short)


def _prompts_read(prompts: pd.DataFrame, metric: str, at_step: dict, point: PrimaryAt) -> set[str]:
    """The prompts a trial's point reads ``metric`` on: those every evaluation it reads scored (all
    of them, unless an evaluation of the eval subset is among those: then the subset's). The point
    reads the evaluation at the budget, or the two that bracket it; an area, every one up to it."""
    scored = prompts[prompts["metric"] == metric].groupby("step")["prompt_id"].agg(set)
    steps = sorted(s for s in scored.index if s in at_step)
    x = np.array([at_step[s] for s in steps], dtype=float)
    if not len(x) or x[-1] < point.budget:
        return set()
    i = int(np.argmax(x >= point.budget))
    first = 0 if point.point == "auc" else i if x[i] == point.budget else max(i - 1, 0)
    return set.intersection(*(scored[s] for s in steps[first : i + 1]))


def _stratified_value(rows: list[pd.DataFrame], metric: str) -> float | None:
    """A trial's value at a point read on the eval subset, from its per-prompt ``rows`` there: the
    stratified mean of its prompts' values (Cochran's eq. 5.1, as ``harness.stats.eval_subset``);
    None at a point read on every prompt."""
    if not rows:
        return None
    wide = pd.concat(rows).pivot_table(index="prompt_id", columns="metric", values="value", aggfunc="last")
    if not {metric, STRATUM_METRIC, STRATUM_SIZE_METRIC} <= set(wide.columns):
        return None
    strata = wide[STRATUM_METRIC].round().astype(int)
    sizes = wide[STRATUM_SIZE_METRIC].groupby(strata).first().astype(int)
    if len(wide) >= sizes.sum():
        return None
    return float((wide[metric].groupby(strata).mean() * sizes).sum() / sizes.sum())


@dataclass
class AtPoint:
    """A ``Results`` view whose primary metric is read at the study's point: the trials frame
    with each completed trial's value there (the trials it cannot read left out), and the
    per-prompt rows there. Curves and meta are the study's own."""

    trials: pd.DataFrame
    curves: pd.DataFrame | None
    meta: StudyMeta
    prompts: pd.DataFrame | None
    shortfalls: list[Shortfall]


def at_point(results, metric: str, condition: str | None = None):
    """``results`` as the comparisons read ``metric`` (of ``condition`` alone when given): the
    results themselves at the final evaluation, else an ``AtPoint`` view."""
    point = reads_at_point(results, metric)
    if point is None:
        return results
    trials = results.trials if condition is None else results.trials[results.trials["arm"] == condition]
    done = trials[trials["status"] == "completed"]
    reading = _read(results, metric, point, done)
    missing = {s.trial_id for s in reading.shortfalls}
    trials = trials[~trials["trial_id"].isin(missing)].copy()
    read = trials["trial_id"].isin(list(reading.values))
    if read.any():  # (an empty selection cannot take the mapped values' dtype)
        trials.loc[read, metric] = trials.loc[read, "trial_id"].map(reading.values).astype(float)
    return AtPoint(trials, results.curves, meta_of(results), reading.prompt_rows, reading.shortfalls)


def shortfall_notes(results, metric: str) -> list[str]:
    """One line naming the completed trials the point cannot read and how far each reached."""
    point = reads_at_point(results, metric)
    if point is None:
        return []
    short = at_point(results, metric).shortfalls
    if not short:
        return []
    units = AXIS_UNITS[point.axis]
    reached = [
        f"{s.trial_id} ({s.condition}, seed {s.seed}: "
        + (f"no {point.axis} recorded" if s.reach is None else f"reached {amount(s.reach)}")
        + ")"
        for s in short
    ]
    return [
        f"{len(short)} completed trial(s) cannot be read at the primary comparison's budget of "
        f"{amount(point.budget)} {units} (their evaluations end before it) and are left out of it, "
        f"never extrapolated: {', '.join(reached)}"
    ]


def point_line(results, metric: str) -> str:
    """Where the primary comparison reads ``metric``, for the report's header ("" at the final
    evaluation, as every report said nothing of it before)."""
    point = reads_at_point(results, metric)
    return "" if point is None else point.describe(metric)
