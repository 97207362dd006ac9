"""Build the report's tables from a ``Results`` object and ``harness.stats``.

Nothing here computes a statistic of its own: every mean, interval, p-value, effect size and
seed count comes from ``harness.stats``. This module only selects the right values out of the
results frames (completed trials, seed alignment, the pre-registered comparisons), calls stats,
and lays the answers out as pandas frames that the figure and text writers draw.

A ``Results`` object is anything with ``trials`` (one row per trial), ``curves`` (long frame of
per-step metrics) and ``meta`` (dict), as described in the study contract.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from harness import stats
from harness.errors import ConfigError, unknown_name

#: Trial-frame columns that are bookkeeping, not final metrics.
BASE_COLUMNS = ("trial_id", "arm", "seed", "status", "error", "wall_time_s", "config_hash")
#: Spec keys that name a trial rather than configure it (left out of the config-diff table).
IDENTITY_PARAMS = ("param/arm", "param/seed", "param/study", "param/cache_dir")
#: The x axis of learning curves "by tokens processed".
TOKENS_METRIC = "tokens/total"
#: Learning curves drawn besides the primary metric, when the study logged them.
DEFAULT_CURVE_METRICS = ("train/reward_mean",)
CORRECTIONS = ("holm", "bh")
MIN_SEEDS_FOR_TEST = 2
#: Robustness checks shown next to each verdict, in this order.
ROBUSTNESS_ORDER = ("mann_whitney", "yuen", "permutation", "paired_t", "sign_flip")


@dataclass
class Analysis:
    """Everything a report shows, as frames; the writers only format and draw these."""

    header: dict[str, Any]
    conditions: pd.DataFrame  # per condition: n, mean and its t CI of the primary metric
    verdicts: pd.DataFrame  # one row per pre-registered comparison
    robustness: pd.DataFrame  # one row per (comparison, check)
    noise_floor: pd.DataFrame  # per condition seed std, MDE, seeds for a 1-sd effect
    cost: pd.DataFrame  # per condition wall time, tokens, trial counts (+ an "all" row)
    failed: pd.DataFrame  # failed trials with their reasons
    pending: pd.DataFrame  # waiting / running trials
    config_diff: pd.DataFrame  # param rows x condition columns, only params that differ
    trials: pd.DataFrame  # the per-trial table (results.csv)
    curves: dict[tuple[str, str], pd.DataFrame] = field(default_factory=dict)  # (metric, x) -> band
    notes: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- small accessors


def _meta(results) -> dict[str, Any]:
    return dict(getattr(results, "meta", None) or {})


def study_name(results) -> str:
    meta = _meta(results)
    return str(meta.get("study") or meta.get("name") or meta.get("study_name") or "study")


def conditions_of(results) -> list[str]:
    """Conditions in the study's order (meta), then any others seen in the trials frame."""
    meta = _meta(results)
    names = [str(c) for c in meta.get("conditions") or []]
    if "arm" in results.trials:
        names += [str(a) for a in results.trials["arm"].dropna().unique() if str(a) not in names]
    return names


def comparisons_of(results) -> list[tuple[str, str]]:
    meta = _meta(results)
    pairs = meta.get("comparisons")
    if pairs is None:
        control = meta.get("control")
        pairs = [(c, control) for c in conditions_of(results) if c != control]
    return [(str(a), str(b)) for a, b in pairs]


def metric_names(trials: pd.DataFrame) -> list[str]:
    """Final-metric columns of a trials frame (everything that is neither bookkeeping nor param/)."""
    return [c for c in trials.columns if c not in BASE_COLUMNS and not str(c).startswith("param/")]


def check_metric(results, metric: str | None) -> str:
    """The metric to analyse (default: the primary one); unknown names raise, listing the valid."""
    primary = _meta(results).get("primary_metric")
    metric = metric or primary
    valid = metric_names(results.trials)
    if metric is None:
        raise ConfigError(f"no metric given and the study names no primary_metric; valid: {', '.join(sorted(valid))}")
    if metric not in valid and metric != primary:  # the primary metric is valid before any trial reports it
        raise unknown_name("metric", metric, valid)
    return metric


def _unit_interval(value: Any, what: str, example: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{what} must be a number between 0 and 1 (e.g. {example}), got {value!r}") from None
    if not 0.0 < number < 1.0:  # NaN fails this too
        raise ConfigError(f"{what} must be between 0 and 1, both excluded (e.g. {example}), got {value!r}")
    return number


def check_alpha(alpha: Any) -> float:
    """The significance level: a number strictly between 0 and 1 (NaN and inf are refused)."""
    return _unit_interval(alpha, "alpha", "0.05")


def check_power(power: Any) -> float:
    return _unit_interval(power, "power", "0.8")


def check_correction(correction: str) -> str:
    if correction not in CORRECTIONS:
        raise unknown_name("correction", correction, CORRECTIONS)
    return correction


def check_condition(results, name: str) -> str:
    valid = conditions_of(results)
    if name not in valid:
        raise unknown_name("arm", name, valid)
    return name


def completed(trials: pd.DataFrame) -> pd.DataFrame:
    return trials[trials["status"] == "completed"]


def seed_values(trials: pd.DataFrame, condition: str, metric: str) -> pd.Series:
    """Completed, finite values of ``metric`` for one condition, indexed by seed (sorted)."""
    rows = completed(trials)
    rows = rows[rows["arm"] == condition]
    values = pd.to_numeric(rows[metric], errors="coerce") if metric in rows else pd.Series(dtype=float)
    out = pd.Series(values.to_numpy(dtype=float), index=rows["seed"].to_numpy())
    out = out[np.isfinite(out.to_numpy())]
    return out.sort_index()


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _n_label(n_arm: int, n_control: int, paired: bool) -> str:
    if paired or n_arm == n_control:
        return f"n={n_arm}"
    return f"n={n_arm}/{n_control}"


# ----------------------------------------------------------------------------- comparisons


@dataclass
class PairResult:
    """One condition-vs-control comparison: the stats answer and how it was obtained."""

    condition: str
    control: str
    metric: str
    n_arm: int
    n_control: int
    paired: bool
    comparison: Any | None  # stats.Comparison, None when a side has < 2 seeds
    reason: str  # why the comparison is unpaired / was not tested; "" when nothing to say


def compare_values(
    results,
    condition: str,
    control: str,
    metric: str,
    *,
    alpha: float = 0.05,
    n_permutations: int = 10_000,
    seed: int = 0,
) -> PairResult:
    """Run ``stats.compare`` on one pair, paired when the design is seed-matched on both sides."""
    a = seed_values(results.trials, condition, metric)
    b = seed_values(results.trials, control, metric)
    n_a, n_b = len(a), len(b)
    if n_a < MIN_SEEDS_FOR_TEST or n_b < MIN_SEEDS_FOR_TEST:
        short = [f"{name} has {n} completed seed{'s' if n != 1 else ''}"
                 for name, n in ((condition, n_a), (control, n_b)) if n < MIN_SEEDS_FOR_TEST]
        reason = "no p-value: " + " and ".join(short) + f" (a test needs at least {MIN_SEEDS_FOR_TEST} per side)"
        return PairResult(condition, control, metric, n_a, n_b, False, None, reason)
    seed_matched = bool(_meta(results).get("seed_matched"))
    same_seeds = a.index.is_unique and b.index.is_unique and set(a.index) == set(b.index)
    paired = seed_matched and same_seeds
    if paired:
        b = b.reindex(a.index)
        reason = ""
    elif seed_matched:
        reason = "unpaired: the two sides do not have the same completed seeds"
    else:
        reason = "unpaired: the conditions are not seed-matched (meta.seed_matched is false)"
    comp = stats.compare(
        a.to_numpy(), b.to_numpy(), paired=paired, alpha=alpha, n_permutations=n_permutations, rng=_rng(seed)
    )
    return PairResult(condition, control, metric, n_a, n_b, paired, comp, reason)


#: the largest seed count the planner searches; beyond it "seeds needed" reads "> SEEDS_SEARCH_LIMIT"
SEEDS_SEARCH_LIMIT = 10_000


def _verdict_rows(pairs: list[PairResult], *, alpha, correction, direction, power) -> tuple[pd.DataFrame, pd.DataFrame]:
    tested = [p for p in pairs if p.comparison is not None]
    verdicts = stats.verdicts(
        [p.comparison for p in tested], alpha=alpha, method=correction, direction=direction, power=power,
        max_n=SEEDS_SEARCH_LIMIT,
    ) if tested else []
    by_pair = {id(p): v for p, v in zip(tested, verdicts)}
    rows, checks = [], []
    for p in pairs:
        c, v = p.comparison, by_pair.get(id(p))
        row = {
            "condition": p.condition,
            "control": p.control,
            "metric": p.metric,
            "n": p.n_arm,
            "n_control": p.n_control,
            "paired": p.paired,
            "mean": getattr(c, "mean_arm", np.nan),
            "mean_control": getattr(c, "mean_control", np.nan),
            "diff": getattr(c, "diff", np.nan),
            "ci_low": getattr(c, "ci_low", np.nan),
            "ci_high": getattr(c, "ci_high", np.nan),
            "test": getattr(c, "test", None),
            "p_value": getattr(c, "p_value", np.nan),
            "p_adjusted": getattr(v, "p_adjusted", np.nan),
            "hedges_g": getattr(c, "hedges_g", np.nan),
            "prob_improvement": getattr(c, "prob_improvement", np.nan),
            "pair_correlation": _num(getattr(c, "pair_correlation", None)),
            "verdict": v.label if v is not None else "not tested",
            "seeds_needed": getattr(v, "seeds_needed", None),
            "direction_ok": getattr(v, "direction_ok", None),
            "reason": " ".join(r for r in (p.reason and p.reason[0].upper() + p.reason[1:] + ".",
                                           getattr(v, "reason", "")) if r),
        }
        rows.append(row)
        if c is None:
            continue
        robustness = dict(getattr(c, "robustness", {}) or {})
        for name in sorted(robustness, key=lambda k: (ROBUSTNESS_ORDER.index(k) if k in ROBUSTNESS_ORDER else 99, k)):
            chk = robustness[name]
            n_label = _n_label(p.n_arm, p.n_control, p.paired)
            checks.append(
                {
                    "condition": p.condition,
                    "control": p.control,
                    "check": name,
                    "p_value": chk.p_value,
                    "min_attainable_p": chk.min_attainable_p,
                    "can_reject": bool(chk.can_reject),
                    "note": "" if chk.can_reject else f"cannot reject at {n_label}",
                }
            )
    verdict_cols = [
        "condition", "control", "metric", "n", "n_control", "paired", "mean", "mean_control", "diff",
        "ci_low", "ci_high", "test", "p_value", "p_adjusted", "hedges_g", "prob_improvement",
        "pair_correlation", "verdict", "seeds_needed", "direction_ok", "reason",
    ]
    check_cols = ["condition", "control", "check", "p_value", "min_attainable_p", "can_reject", "note"]
    return pd.DataFrame(rows, columns=verdict_cols), pd.DataFrame(checks, columns=check_cols)


def _num(x) -> float:
    return np.nan if x is None else float(x)


# ----------------------------------------------------------------------------- per-condition tables


def condition_table(results, metric: str, *, alpha: float = 0.05) -> pd.DataFrame:
    """Per condition: completed seeds, and the mean with its t-based CI.

    The interval is ``stats.curve_band`` of a one-point curve ([seeds x 1]): the same t interval
    of a mean that the learning-curve bands use. (A percentile bootstrap is too narrow at 3-5 seeds.)
    A condition with one seed gets its mean and no interval.
    """
    rows = []
    for cond in conditions_of(results):
        v = seed_values(results.trials, cond, metric)
        row = {"condition": cond, "n": len(v), "mean": np.nan, "ci_low": np.nan, "ci_high": np.nan}
        if len(v):
            mean, low, high = (float(np.asarray(a)[0]) for a in stats.curve_band(v.to_numpy()[:, None], alpha=alpha))
            row.update(mean=mean, ci_low=low, ci_high=high)
        rows.append(row)
    return pd.DataFrame(rows, columns=["condition", "n", "mean", "ci_low", "ci_high"])


def noise_floor_table(
    results, metric: str | None = None, *, alpha: float = 0.05, power: float = 0.8
) -> pd.DataFrame:
    """Per condition ``stats.noise_floor`` of ``metric`` over its completed seeds."""
    metric = check_metric(results, metric)
    cols = ["condition", "n", "mean", "std", "std_ci_low", "std_ci_high", "sem", "mde", "seeds_for_1sd", "note"]
    rows = []
    for cond in conditions_of(results):
        v = seed_values(results.trials, cond, metric)
        note = ""
        if len(v) < MIN_SEEDS_FOR_TEST:
            note = (f"{len(v)} completed seed{'s' if len(v) != 1 else ''}: "
                    f"a seed std needs at least {MIN_SEEDS_FOR_TEST}")
        if len(v) == 0:
            rows.append({"condition": cond, "n": 0, "note": note})
            continue
        nf = stats.noise_floor(v.to_numpy(), alpha=alpha, power=power)
        rows.append({"condition": cond, "n": nf.n, "mean": nf.mean, "std": nf.std, "std_ci_low": nf.std_ci_low,
                     "std_ci_high": nf.std_ci_high, "sem": nf.sem, "mde": nf.mde,
                     "seeds_for_1sd": nf.seeds_for_1sd, "note": note})
    return pd.DataFrame(rows, columns=cols)


def cost_table(trials: pd.DataFrame, conditions: list[str]) -> pd.DataFrame:
    """Per condition: trial counts by status, wall time and tokens (bookkeeping sums, not stats)."""
    cols = ["condition", "trials", "completed", "failed", "running", "waiting",
            "wall_time_s", "wall_time_s_per_completed", "tokens"]
    rows = []
    for cond in conditions + ["all"]:
        t = trials if cond == "all" else trials[trials["arm"] == cond]
        status = t["status"].value_counts()
        wall = pd.to_numeric(t.get("wall_time_s", pd.Series(dtype=float)), errors="coerce")
        done = t["status"] == "completed"
        tokens = pd.to_numeric(t[TOKENS_METRIC], errors="coerce") if TOKENS_METRIC in t else pd.Series(dtype=float)
        rows.append({
            "condition": cond,
            "trials": len(t),
            "completed": int(status.get("completed", 0)),
            "failed": int(status.get("failed", 0)),
            "running": int(status.get("running", 0)),
            "waiting": int(status.get("waiting", 0)),
            "wall_time_s": float(wall.sum(min_count=1)) if len(wall) else np.nan,
            "wall_time_s_per_completed": float(wall[done].sum(min_count=1) / done.sum()) if done.any() else np.nan,
            "tokens": float(tokens.sum(min_count=1)) if len(tokens) else np.nan,
        })
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
    primary = _meta(results).get("primary_metric")
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
        frames.append(pd.DataFrame({
            "condition": cond, "x": grid, "mean": np.asarray(mean, dtype=float),
            "low": np.asarray(low, dtype=float), "high": np.asarray(high, dtype=float),
            "n_seeds": np.isfinite(matrix).sum(axis=0),
        }))
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)


# ----------------------------------------------------------------------------- header


def build_header(results, *, correction: str, alpha: float) -> dict[str, Any]:
    import harness

    meta = _meta(results)
    trials = results.trials
    status = trials["status"].value_counts() if len(trials) else pd.Series(dtype=int)
    n_total = len(trials)
    n_done = int(status.get("completed", 0))
    n_failed = int(status.get("failed", 0))
    n_pending = int(status.get("running", 0)) + int(status.get("waiting", 0))
    state = []
    if n_pending:
        state.append(
            f"STILL RUNNING: {n_pending} of {n_total} trials are still running or waiting; "
            + (f"this report is drawn from the {n_done} completed trials only and will change."
               if n_done else "none has completed yet, so there is nothing to compare.")
        )
    elif n_done == 0:
        state.append(f"NO RESULTS: none of the {n_total} trials completed; there is nothing to compare."
                     if n_total else "NO RESULTS: the study has no trials yet.")
    state += [
        f"{line}: the study file changed since they ran, so they are kept on disk but left out of "
        "every table and figure."
        for line in meta.get("earlier_design") or []
    ]
    if n_failed:
        state.append(
            f"{n_failed} trial{'s' if n_failed != 1 else ''} failed; "
            f"{'they are' if n_failed != 1 else 'it is'} left out of the statistics "
            "and listed with the reason under 'Failed trials'."
        )
    return {
        "study": study_name(results),
        "description": meta.get("description") or "",
        "comparisons": [f"{a} vs {b}" for a, b in comparisons_of(results)],
        "conditions": conditions_of(results),
        "primary_metric": meta.get("primary_metric"),
        "direction": meta.get("direction", "maximize"),
        "control": meta.get("control"),
        "seeds": list(meta.get("seeds") or (sorted(trials["seed"].dropna().unique().tolist()) if len(trials) else [])),
        "seed_matched": bool(meta.get("seed_matched")),
        "correction": correction,
        "alpha": alpha,
        "harness_version": meta.get("harness_version") or "unknown",
        "git_commit": meta.get("git_commit") or "unknown",
        "report_harness_version": harness.__version__,
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
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
    correction: str = "holm",
    alpha: float = 0.05,
    power: float = 0.8,
    n_permutations: int = 10_000,
    seed: int = 0,
    curve_metrics: list[str] | None = None,
) -> Analysis:
    """All of a report's tables for ``results``; statistics from ``harness.stats``."""
    check_correction(correction)
    alpha, power = check_alpha(alpha), check_power(power)
    meta = _meta(results)
    trials = results.trials.copy()
    metric = check_metric(results, None)
    direction = meta.get("direction", "maximize")
    conds = conditions_of(results)
    for cond in (c for pair in comparisons_of(results) for c in pair):
        check_condition(results, cond)

    pairs = [
        compare_values(results, a, b, metric, alpha=alpha, n_permutations=n_permutations, seed=seed)
        for a, b in comparisons_of(results)
    ]
    verdicts, robustness = _verdict_rows(pairs, alpha=alpha, correction=correction, direction=direction, power=power)

    failed = trials[trials["status"] == "failed"][["trial_id", "arm", "seed", "error"]].reset_index(drop=True)
    failed["error"] = failed["error"].fillna("(no reason recorded)")
    pending = trials[trials["status"].isin(["running", "waiting"])][["trial_id", "arm", "seed", "status"]]

    analysis = Analysis(
        header=build_header(results, correction=correction, alpha=alpha),
        conditions=condition_table(results, metric, alpha=alpha),
        verdicts=verdicts,
        robustness=robustness,
        noise_floor=noise_floor_table(results, metric, alpha=alpha, power=power),
        cost=cost_table(trials, conds),
        failed=failed,
        pending=pending.reset_index(drop=True),
        config_diff=config_diff_table(trials, conds),
        trials=trials.sort_values(["arm", "seed"], kind="stable").reset_index(drop=True),
    )
    for m in curve_metrics_of(results, curve_metrics):
        for x in ("step", "tokens"):
            band = curve_bands(results, m, x=x, alpha=alpha)
            if len(band):
                analysis.curves[(m, x)] = band
    untested = verdicts[verdicts["verdict"] == "not tested"]
    if len(untested):
        analysis.notes.append(
            f"{len(untested)} comparison(s) had too few completed seeds for a p-value and are not in the "
            f"{correction} correction family."
        )
    return analysis


def compare_pair(
    results,
    arm_a: str,
    arm_b: str,
    *,
    metric: str | None = None,
    correction: str = "holm",
    alpha: float = 0.05,
    power: float = 0.8,
    n_permutations: int = 10_000,
    seed: int = 0,
) -> dict[str, Any]:
    """``arm_a`` vs ``arm_b`` (as control) on ``metric``; the same numbers the report shows.

    A pre-registered comparison on the primary metric takes its corrected p-value and verdict
    from the full verdict table; any other pair is tested alone (no correction, and it says so).
    """
    check_correction(correction)
    alpha, power = check_alpha(alpha), check_power(power)
    check_condition(results, arm_a)
    check_condition(results, arm_b)
    metric = check_metric(results, metric)
    meta = _meta(results)
    primary = meta.get("primary_metric")
    pre_registered = (arm_a, arm_b) in comparisons_of(results) and metric == primary
    if pre_registered:
        analysis = analyze(results, correction=correction, alpha=alpha, power=power,
                           n_permutations=n_permutations, seed=seed, curve_metrics=[])
        row = analysis.verdicts[analysis.verdicts["condition"] == arm_a].iloc[0].to_dict()
        checks = analysis.robustness[analysis.robustness["condition"] == arm_a]
        family = f"{correction} over the {len(analysis.verdicts)} pre-registered comparisons"
    else:
        pair = compare_values(results, arm_a, arm_b, metric, alpha=alpha, n_permutations=n_permutations, seed=seed)
        verdicts, checks = _verdict_rows([pair], alpha=alpha, correction=correction,
                                         direction=meta.get("direction", "maximize"), power=power)
        row = verdicts.iloc[0].to_dict()
        family = "none: not a pre-registered comparison on the primary metric (tested alone)"
    row["direction"] = meta.get("direction", "maximize")
    row["correction"] = family
    row["pre_registered"] = pre_registered
    row["robustness"] = checks.drop(columns=["condition", "control"]).to_dict(orient="records")
    return row
