"""Forecast verdicts at a compute look: each pre-registered comparison's (arm - reference) at the
budget forecast from the seeds' curves up to the look (``harness.stats.forecast``), and called early
only when the forecast interval decides it.

The curves are read as the fitted-curve analysis reads them (``harness.decide.scaling.seed_curves``:
every completed trial's evaluations of the metric against the compute axis, the start evaluation at
0); the forecast pairs by seed when the study is seed-matched and both sides ran the same seeds, and
fits within the metric's range; when every evaluation of both arms recorded per-prompt scores
(``scaling.prompt_tables``), the prompts are jackknifed too. Only completed trials are read (a
replay of a finished study cuts each curve at the look). The caller (the compute-look replay, the
runner) passes the alpha the look may spend and the family the look's verdicts are adjusted over;
every verdict says it is a forecast.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.decide.frames import comparisons_of, meta_of
from harness.decide.rules import DecisionRules
from harness.decide.scaling import DEFAULT_AXIS, prompt_tables, seed_curves
from harness.stats.forecast import Forecast, ForecastVerdict, NoForecast, forecast_difference, forecast_verdict


@dataclass(frozen=True)
class LookForecast:
    """One comparison at one look: the forecast of (arm - reference) at the budget and its verdict."""

    arm: str
    reference: str
    forecast: Forecast | NoForecast
    verdict: ForecastVerdict


def forecast_comparison(results, arm: str, reference: str, *, look: float, budget: float, metric: str, axis: str):
    """(``arm`` - ``reference``) of ``metric`` at ``budget`` on ``axis``, forecast from the curves up to
    ``look``: a ``Forecast``, or a ``NoForecast`` with the reason (a side without curves among them)."""
    meta = meta_of(results)
    sides = [seed_curves(results, name, metric, axis) for name in (arm, reference)]
    for name, curves in zip((arm, reference), sides):
        if not curves:
            return NoForecast(f"{name} has no completed trial with {metric} against {axis}", float(look), float(budget))
    (mine, theirs), bounds = sides, meta.metric_ranges.get(metric)
    tables = [prompt_tables(results, curves, metric) for curves in sides]
    if any(t is None for t in tables):  # the prompts are resampled only when both arms have every table
        tables = [(None, None), (None, None)]
    return forecast_difference(
        [c.compute for c in mine],
        [c.score for c in mine],
        [c.compute for c in theirs],
        [c.score for c in theirs],
        look=look,
        budget=budget,
        arm_seeds=[c.seed for c in mine],
        control_seeds=[c.seed for c in theirs],
        paired=bool(meta.seed_matched),
        a_bounds=tuple(sorted(bounds)) if bounds is not None else None,  # ranges are (worst, best)
        arm_prompt_scores=tables[0][0],
        control_prompt_scores=tables[1][0],
        arm_prompts=tables[0][1],
        control_prompts=tables[1][1],
    )


def forecast_look(
    results,
    rules: DecisionRules,
    *,
    look: float,
    budget: float,
    alpha: float,
    pairs: Sequence[tuple[str, str]] | None = None,
    axis: str | None = None,
    family_size: int | None = None,
) -> list[LookForecast]:
    """Each of ``pairs`` ((arm, reference); default: the study's comparisons) forecast at ``look``
    (an absolute point on ``axis``, default the study's ``primary_at.axis``) to ``budget``, and read
    at level 1 - ``alpha`` / m (``rules.correction``; m = ``family_size``, default the number of
    pairs) with ``rules``' direction and min_effect. A study read at the area under the curve
    (``primary_at.point: auc``) gets no forecast: what it predicts is the value at the budget."""
    pairs = comparisons_of(results) if pairs is None else [(str(a), str(b)) for a, b in pairs]
    primary_at = meta_of(results).primary_at or {}
    axis = axis or primary_at.get("axis") or DEFAULT_AXIS
    if primary_at.get("point") == "auc":  # the verdicts read a mean over the axis, not the value at the budget
        why = "the study reads the area under the curve up to the budget; the forecast predicts the value at it"
        forecasts = [NoForecast(why, float(look), float(budget)) for _ in pairs]
    else:
        forecasts = [
            forecast_comparison(results, a, b, look=look, budget=budget, metric=rules.metric, axis=axis)
            for a, b in pairs
        ]
    verdicts = forecast_verdict(
        forecasts,
        alpha=alpha,
        direction=rules.direction,
        min_effect=rules.min_effect,
        family_size=len(pairs) if family_size is None else family_size,
        correction=rules.correction,
    )
    return [LookForecast(a, b, f, v) for (a, b), f, v in zip(pairs, forecasts, verdicts)]
