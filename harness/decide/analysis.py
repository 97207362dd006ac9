"""Build the report's tables from a ``Results`` object and ``harness.stats``.

Nothing here computes a statistic of its own: every mean, interval, p-value, effect size and
seed count comes from ``harness.stats``. This module puts together the tables of
``comparisons`` (verdicts, robustness), ``noise`` (noise floor, noise by source),
``trial_warnings``, ``calibration``, ``looks`` (sequential studies) and its own per-condition,
cost, config-diff, curve and header tables, as pandas frames that the figure and text writers of
``harness.report`` draw (``frames`` reads the results).
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from harness import stats
from harness.decide.benchmarks import BenchmarkAnalysis, analyze_benchmarks
from harness.decide.calibration import calibration_table, tripwire_state
from harness.decide.comparisons import (
    arm_scores,
    compare_values,
    planning_effect,
    study_pairs,
    verdict_rows,
)
from harness.decide.compute_budget import at_point, point_line, shortfall_notes
from harness.decide.frames import (
    check_alpha,
    check_condition,
    check_correction,
    check_metric,
    check_min_effect,
    check_power,
    comparisons_of,
    completed,
    conditions_of,
    meta_of,
    seed_values,
    study_name,
)
from harness.decide.noise import noise_floor_table, noise_split, typical_plan
from harness.decide.overoptimisation import overoptimisation_frame
from harness.decide.scaling import Scaling, scaling_analysis
from harness.decide.sequential.replay import design_line, final_pairs, replay
from harness.decide.sequential.versions import versions_line
from harness.decide.trial_warnings import mark_no_learning_signal, warning_state
from harness.errors import unknown_name

#: Spec keys that name a trial rather than configure it (left out of the config-diff table).
IDENTITY_PARAMS = ("param/arm", "param/seed", "param/study", "param/cache_dir")
#: The x axis of learning curves "by tokens processed".
TOKENS_METRIC = "tokens/total"
#: Learning curves drawn besides the primary metric, when the study logged them.
DEFAULT_CURVE_METRICS = ("train/reward_mean", "train/kl_ref", "train/entropy", "train/clip_frac", "train/grad_norm")


@dataclass
class Analysis:
    """Everything a report shows, as frames; the writers only format and draw these."""

    header: dict[str, Any]
    conditions: pd.DataFrame  # per condition: n, mean and its t CI of the primary metric
    verdicts: pd.DataFrame  # one row per pre-registered comparison
    robustness: pd.DataFrame  # one row per (comparison, check)
    noise_floor: pd.DataFrame  # per condition sd of trial means (interval, method), seeds needed at the planning effect
    cost: pd.DataFrame  # per condition wall time, tokens, trial counts (+ an "all" row)
    failed: pd.DataFrame  # failed trials with their reasons
    pending: pd.DataFrame  # waiting / running trials
    config_diff: pd.DataFrame  # param rows x condition columns, only params that differ
    trials: pd.DataFrame  # the per-trial table (results.csv)
    seed_values: dict[str, pd.Series] = field(
        default_factory=dict
    )  # per condition: the primary metric per seed, as compared
    curves: dict[tuple[str, str], pd.DataFrame] = field(default_factory=dict)  # (metric, x) -> band
    components: pd.DataFrame = field(default_factory=pd.DataFrame)  # variance components of the primary metric
    budget: pd.DataFrame = field(default_factory=pd.DataFrame)  # predicted SE of a difference per design option
    looks: pd.DataFrame = field(default_factory=pd.DataFrame)  # sequential studies: each comparison look by look
    calibration: pd.DataFrame = field(default_factory=pd.DataFrame)  # A/A and placebo comparisons, apart
    overoptimisation: pd.DataFrame = field(default_factory=pd.DataFrame)  # learned reward: proxy, gold, KL per step
    benchmarks: BenchmarkAnalysis | None = None  # held-out benchmarks: per-benchmark and overall verdicts
    scaling: Scaling | None = None  # fitted compute curves: ceilings and efficiency (None: no fit ran)
    notes: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- per-condition tables


def primary_seed_values(results, metric: str) -> dict[str, pd.Series]:
    """Per condition, each completed seed's ``metric`` as the comparisons read it: at the final
    evaluation, or at the study's pre-registered compute point (``primary_at``)."""
    return {cond: seed_values(at_point(results, metric, cond).trials, cond, metric) for cond in conditions_of(results)}


def condition_table(results, metric: str, *, alpha: float = 0.05) -> pd.DataFrame:
    """Per condition: completed seeds, and the mean with its t-based CI.

    The interval is ``stats.curve_band`` of a one-point curve ([seeds x 1]): the same t interval
    of a mean that the learning-curve bands use. (A percentile bootstrap is too narrow at 3-5 seeds.)
    A condition with one seed gets its mean and no interval.
    """
    rows = []
    for cond, v in primary_seed_values(results, metric).items():
        row = {"condition": cond, "n": len(v), "mean": np.nan, "ci_low": np.nan, "ci_high": np.nan}
        if len(v):
            mean, low, high = (float(np.asarray(a)[0]) for a in stats.curve_band(v.to_numpy()[:, None], alpha=alpha))
            row.update(mean=mean, ci_low=low, ci_high=high)
        rows.append(row)
    return pd.DataFrame(rows, columns=["condition", "n", "mean", "ci_low", "ci_high"])


def cost_table(trials: pd.DataFrame, conditions: list[str]) -> pd.DataFrame:
    """Per condition: trial counts by status, wall time and tokens (bookkeeping sums, not stats)."""
    cols = [
        "condition",
        "trials",
        "completed",
        "failed",
        "running",
        "waiting",
        "wall_time_s",
        "wall_time_s_per_completed",
        "tokens",
    ]
    rows = []
    for cond in conditions + ["all"]:
        t = trials if cond == "all" else trials[trials["arm"] == cond]
        status = t["status"].value_counts()
        wall = pd.to_numeric(t.get("wall_time_s", pd.Series(dtype=float)), errors="coerce")
        done = t["status"] == "completed"
        tokens = pd.to_numeric(t[TOKENS_METRIC], errors="coerce") if TOKENS_METRIC in t else pd.Series(dtype=float)
        rows.append(
            {
                "condition": cond,
                "trials": len(t),
                "completed": int(status.get("completed", 0)),
                "failed": int(status.get("failed", 0)),
                "running": int(status.get("running", 0)),
                "waiting": int(status.get("waiting", 0)),
                "wall_time_s": float(wall.sum(min_count=1)) if len(wall) else np.nan,
                "wall_time_s_per_completed": float(wall[done].sum(min_count=1) / done.sum()) if done.any() else np.nan,
                "tokens": float(tokens.sum(min_count=1)) if len(tokens) else np.nan,
            }
        )
    return pd.DataFrame(rows, columns=cols)


def config_diff_table(trials: pd.DataFrame, conditions: list[str]) -> pd.DataFrame:
    """``param/`` columns whose values differ across conditions: one row per param, one column per condition."""
    params = [c for c in trials.columns if str(c).startswith("param/") and c not in IDENTITY_PARAMS]
    if params:  # a trial known only from the queue may have no spec: it says nothing about the config
        trials = trials[trials[params].notna().any(axis=1)]
    rows = []
    for p in params:
        per_cond = {}
        for cond in conditions:
            vals = trials.loc[trials["arm"] == cond, p]
            uniq = sorted({_fmt_param(v) for v in vals}, key=str)
            per_cond[cond] = " | ".join(uniq) if uniq else ""
        present = [v for v in per_cond.values() if v != ""]
        if len(set(present)) > 1:
            rows.append({"param": p.removeprefix("param/"), **per_cond})
    return pd.DataFrame(rows, columns=["param", *conditions])


def _fmt_param(v) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "None"
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return repr(v)
    return str(v)


# ----------------------------------------------------------------------------- curves


def curve_metrics_of(results, requested: list[str] | tuple[str, ...] | None = None) -> list[str]:
    curves = results.curves
    logged = set(curves["metric"].unique()) if curves is not None and len(curves) else set()
    if requested:
        missing = [m for m in requested if m not in logged]
        if missing:
            raise unknown_name("curve metric", missing[0], logged)
        return list(requested)
    primary = meta_of(results).get("primary_metric")
    wanted = [primary, *DEFAULT_CURVE_METRICS]
    return [m for i, m in enumerate(wanted) if m in logged and m not in wanted[:i]]


def curve_bands(results, metric: str, *, x: str = "step", alpha: float = 0.05, n_points: int = 50) -> pd.DataFrame:
    """Mean and CI band of ``metric`` per condition over completed seeds (``stats.curve_band``).

    ``x="step"`` uses the logged steps; ``x="tokens"`` puts each seed on ``tokens/total`` and
    aligns the seeds on a common grid with ``stats.align_on_grid`` before taking the band.
    """
    cols = ["condition", "x", "mean", "low", "high", "n_seeds"]
    curves = results.curves
    if curves is None or not len(curves):
        return pd.DataFrame(columns=cols)
    done_ids = set(completed(results.trials)["trial_id"])
    curves = curves[curves["trial_id"].isin(done_ids) & curves["metric"].isin([metric, TOKENS_METRIC])]
    by_cond = dict(tuple(curves.groupby("arm", sort=False)))
    frames = []
    for cond in conditions_of(results):
        c = by_cond.get(cond)
        ys = c[c["metric"] == metric] if c is not None else None
        if ys is None or ys.empty:
            continue
        if x == "step":
            wide = ys.pivot_table(index="trial_id", columns="step", values="value", aggfunc="last").sort_index(axis=1)
            grid = wide.columns.to_numpy(dtype=float)
            matrix = wide.to_numpy(dtype=float)
        elif x == "tokens":
            tok = c[c["metric"] == TOKENS_METRIC][["trial_id", "step", "value"]].rename(columns={"value": "x"})
            both = ys.merge(tok, on=["trial_id", "step"]).dropna(subset=["x", "value"]).sort_values(["trial_id", "x"])
            if both.empty:
                continue
            per_trial = [g for _, g in both.groupby("trial_id")]
            lo = min(float(g["x"].min()) for g in per_trial)
            hi = max(float(g["x"].max()) for g in per_trial)
            grid = np.linspace(lo, hi, n_points) if hi > lo else np.array([lo])
            matrix = stats.align_on_grid(
                [g["x"].to_numpy(dtype=float) for g in per_trial],
                [g["value"].to_numpy(dtype=float) for g in per_trial],
                grid,
            )
            matrix = np.asarray(matrix, dtype=float)
        else:
            raise ValueError(f"x must be 'step' or 'tokens', not {x!r}")
        mean, low, high = stats.curve_band(matrix, alpha=alpha)
        frames.append(
            pd.DataFrame(
                {
                    "condition": cond,
                    "x": grid,
                    "mean": np.asarray(mean, dtype=float),
                    "low": np.asarray(low, dtype=float),
                    "high": np.asarray(high, dtype=float),
                    "n_seeds": np.isfinite(matrix).sum(axis=0),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)


# ----------------------------------------------------------------------------- header


def build_header(
    results,
    *,
    correction: str,
    alpha: float,
    min_effect: float | None = None,
    planning_effect: float | None = None,
    noise_line: str = "",
    level: float | None = None,
    failed_by_condition: dict[str, int] | None = None,
    design: str = "",
    rule: str = "",
    tripwires: list[str] | None = None,
) -> dict[str, Any]:
    import harness

    meta = meta_of(results)
    trials = results.trials
    status = trials["status"].value_counts() if len(trials) else pd.Series(dtype=int)
    n_total = len(trials)
    n_done = int(status.get("completed", 0))
    n_failed = int(status.get("failed", 0))
    n_pending = int(status.get("running", 0)) + int(status.get("waiting", 0))
    failures = meta.get("failures") or "drop"
    state = list(tripwires or [])
    if n_pending:
        state.append(
            f"STILL RUNNING: {n_pending} of {n_total} trials are still running or waiting; "
            + (
                f"this report is drawn from the {n_done} completed trials only and will change."
                if n_done
                else "none has completed yet, so there is nothing to compare."
            )
        )
    elif n_done == 0:
        state.append(
            f"NO RESULTS: none of the {n_total} trials completed; there is nothing to compare."
            if n_total
            else "NO RESULTS: the study has no trials yet."
        )
    state += [
        f"{line}: the study file changed since they ran, so they are kept on disk but left out of "
        "every table and figure."
        for line in meta.get("earlier_design") or []
    ]
    if min_effect is None:
        planned = (
            f" Seeds needed are planned at one sd of trial means ({planning_effect:.3g})." if planning_effect else ""
        )
        state.append(
            "NO MIN_EFFECT: the study names no smallest effect of interest, so no comparison can be "
            f"called equivalent (only better, worse or inconclusive).{planned} Set min_effect "
            "beside primary_metric in the study file, or pass --min-effect."
        )
    if n_failed:
        per = ", ".join(f"{c} {n}" for c, n in (failed_by_condition or {}).items() if n)
        state.append(
            f"{n_failed} trial{'s' if n_failed != 1 else ''} failed ({per}); "
            + (
                "each is scored at the metric's worst value (failures: worst)"
                if failures == "worst"
                else f"{'they are' if n_failed != 1 else 'it is'} left out of the statistics (failures: drop; "
                "this favours an arm whose bad seeds crash)"
            )
            + "; each is listed with its reason under 'Failed trials'."
        )
    state += warning_state(results)
    return {
        "study": study_name(results),
        "description": meta.get("description") or "",
        "comparisons": [f"{a} vs {b}" for a, b in comparisons_of(results)],
        "conditions": conditions_of(results),
        "primary_metric": meta.get("primary_metric"),
        # where the primary comparison reads each trial, when not at its final evaluation
        "primary_at": point_line(results, meta.get("primary_metric")),
        "direction": meta.get("direction", "maximize"),
        "control": meta.get("control"),
        "seeds": list(meta.get("seeds") or (sorted(trials["seed"].dropna().unique().tolist()) if len(trials) else [])),
        "seed_matched": bool(meta.get("seed_matched")),
        "design": design or f"fixed, {len(meta.get('seeds') or [])} seeds per arm",
        "sequential": bool(design),
        "rule": rule,  # a sequential study: the rule its looks were read under
        "correction": correction,
        "alpha": alpha,
        "ci_level": level if level is not None else 1 - alpha,
        "min_effect": min_effect,
        "planning_effect": planning_effect,
        "test": meta.get("test") or "auto",
        "failures": failures,
        "noise_line": noise_line,
        "metric_ranges": dict(meta.get("metric_ranges") or {}),
        "harness_version": meta.get("harness_version") or "unknown",
        "git_commit": meta.get("git_commit") or "unknown",
        "report_harness_version": harness.__version__,
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "n_trials": n_total,
        "n_completed": n_done,
        "n_failed": n_failed,
        "n_pending": n_pending,
        "complete": n_done == n_total,
        "state": state,
    }


# ----------------------------------------------------------------------------- entry points


def analyze(
    results,
    *,
    correction: str = "bonferroni",
    alpha: float = 0.05,
    power: float = 0.8,
    min_effect: float | None = None,
    n_permutations: int = 10_000,
    seed: int = 0,
    curve_metrics: list[str] | None = None,
) -> Analysis:
    """All of a report's tables for ``results``; statistics from ``harness.stats``.

    ``min_effect`` overrides the study's pre-registered one (None: the study's)."""
    check_correction(correction)
    alpha, power = check_alpha(alpha), check_power(power)
    meta = meta_of(results)
    trials = results.trials.copy()
    metric = check_metric(results, None)
    direction = meta.get("direction", "maximize")
    margin = check_min_effect(min_effect if min_effect is not None else meta.get("min_effect"))
    failures = meta.get("failures") or "drop"
    conds = conditions_of(results)
    for cond in (c for pair in comparisons_of(results) for c in pair):
        check_condition(results, cond)

    scores = {c: arm_scores(results, c, metric, failures=failures) for c in conds}
    pairs = study_pairs(results, metric, scores, n_permutations=n_permutations, seed=seed)
    effect = planning_effect(margin, scores, meta.get("control"))
    family = sum(p.difference.testable for p in pairs)
    level = stats.interval_level(alpha, family, correction)
    rep, looks = None, None
    if meta.get("sequential"):
        rep = replay(
            results,
            scores,
            metric=metric,
            alpha=alpha,
            correction=correction,
            direction=direction,
            min_effect=margin,
            failures=failures,
            test=meta.get("test") or "auto",
        )
        pairs, looks = final_pairs(
            rep,
            results,
            scores,
            metric=metric,
            failures=failures,
            test=meta.get("test") or "auto",
            n_permutations=n_permutations,
            seed=seed,
        )
    verdicts, robustness = verdict_rows(
        pairs,
        alpha=alpha,
        correction=correction,
        direction=direction,
        power=power,
        min_effect=margin,
        planning_effect=effect,
        looks=looks,
        family_size=len(pairs) if looks is not None else None,
    )
    verdicts = mark_no_learning_signal(verdicts, results)
    calibration = calibration_table(
        results,
        scores,
        metric=metric,
        alpha=alpha,
        correction=correction,
        direction=direction,
        min_effect=margin,
        failures=failures,
        test=meta.get("test") or "auto",
        n_permutations=n_permutations,
        seed=seed,
    )
    split = noise_split(
        metric, scores, level=level, effect=effect, margin=margin, power=power, plan=typical_plan(pairs)
    )

    failed = trials[trials["status"] == "failed"][["trial_id", "arm", "seed", "error"]].reset_index(drop=True)
    failed["error"] = failed["error"].fillna("(no reason recorded)")
    pending = trials[trials["status"].isin(["running", "waiting"])][["trial_id", "arm", "seed", "status"]]

    analysis = Analysis(
        header=build_header(
            results,
            correction=correction,
            alpha=alpha,
            min_effect=margin,
            planning_effect=effect,
            noise_line=split.line,
            level=level,
            failed_by_condition={c: s.failed for c, s in scores.items()},
            design=design_line(rep) if rep is not None else "",
            rule=versions_line(rep.rules) if rep is not None else "",
            tripwires=tripwire_state(calibration),
        ),
        conditions=condition_table(results, metric, alpha=alpha),
        seed_values=primary_seed_values(results, metric),
        verdicts=verdicts,
        robustness=robustness,
        noise_floor=noise_floor_table(
            results, metric, alpha=alpha, power=power, level=level, effect=effect, failures=failures, scores=scores
        ),
        cost=cost_table(trials, conds),
        failed=failed,
        pending=pending.reset_index(drop=True),
        config_diff=config_diff_table(trials, conds),
        trials=trials.sort_values(["arm", "seed"], kind="stable").reset_index(drop=True),
        components=split.components,
        budget=split.budget,
        looks=rep.table if rep is not None else pd.DataFrame(),
        calibration=calibration,
        overoptimisation=overoptimisation_frame(results),
        benchmarks=analyze_benchmarks(
            results,
            alpha=alpha,
            correction=correction,
            power=power,
            min_effect=margin,
            n_permutations=n_permutations,
            seed=seed,
        ),
        scaling=scaling_analysis(results, alpha=alpha, correction=correction, min_effect=margin),
    )
    for m in curve_metrics_of(results, curve_metrics):
        for x in ("step", "tokens"):
            band = curve_bands(results, m, x=x, alpha=alpha)
            if len(band):
                analysis.curves[(m, x)] = band
    analysis.notes += shortfall_notes(results, metric)
    untested = verdicts[verdicts["p_value"].isna()]
    if len(untested):
        analysis.notes.append(
            f"{len(untested)} comparison(s) could not be tested and are not in the {correction} family."
        )
    return analysis


def compare_pair(
    results,
    arm_a: str,
    arm_b: str,
    *,
    metric: str | None = None,
    correction: str = "bonferroni",
    alpha: float = 0.05,
    power: float = 0.8,
    min_effect: float | None = None,
    n_permutations: int = 10_000,
    seed: int = 0,
) -> dict[str, Any]:
    """``arm_a`` vs ``arm_b`` (as control) on ``metric``; the same numbers the report shows.

    A pre-registered comparison on the primary metric takes its verdict from the full verdict
    table (its interval at the family's level); any other pair is tested alone (a family of one,
    and it says so).
    """
    check_correction(correction)
    alpha, power = check_alpha(alpha), check_power(power)
    check_condition(results, arm_a)
    check_condition(results, arm_b)
    metric = check_metric(results, metric)
    meta = meta_of(results)
    margin = check_min_effect(min_effect if min_effect is not None else meta.get("min_effect"))
    primary = meta.get("primary_metric")
    pre_registered = (arm_a, arm_b) in comparisons_of(results) and metric == primary
    if pre_registered:
        analysis = analyze(
            results,
            correction=correction,
            alpha=alpha,
            power=power,
            min_effect=margin,
            n_permutations=n_permutations,
            seed=seed,
            curve_metrics=[],
        )
        v = analysis.verdicts
        row = v[(v["condition"] == arm_a) & (v["control"] == arm_b)].iloc[0].to_dict()
        r = analysis.robustness
        checks = r[(r["condition"] == arm_a) & (r["control"] == arm_b)]
        family = f"{correction} over the {len(v)} pre-registered comparisons"
    else:
        failures = meta.get("failures") or "drop"
        pair = compare_values(
            results,
            arm_a,
            arm_b,
            metric,
            test=meta.get("test") or "auto",
            failures=failures,
            n_permutations=n_permutations,
            seed=seed,
        )
        effect = planning_effect(margin, {arm_a: pair.arm, arm_b: pair.base}, arm_b)
        verdicts, checks = verdict_rows(
            [pair],
            alpha=alpha,
            correction=correction,
            direction=meta.get("direction", "maximize"),
            power=power,
            min_effect=margin,
            planning_effect=effect,
        )
        row = mark_no_learning_signal(verdicts, results).iloc[0].to_dict()
        family = "none: not a pre-registered comparison on the primary metric (tested alone)"
    row["direction"] = meta.get("direction", "maximize")
    row["correction"] = family
    row["min_effect"] = margin
    row["pre_registered"] = pre_registered
    row["robustness"] = checks.drop(columns=["condition", "control"]).to_dict(orient="records")
    return row
