"""Build the report's tables from a ``Results`` object and ``harness.stats``.

Nothing here computes a statistic of its own: every mean, interval, p-value, effect size and
seed count comes from ``harness.stats``. This module only selects the right values out of the
results frames (completed trials, seed alignment, the pre-registered comparisons), calls stats,
and lays the answers out as pandas frames that the figure and text writers draw.

A ``Results`` object is anything with ``trials`` (one row per trial), ``curves`` (long frame of
per-step metrics), ``meta`` (dict) and optionally ``prompts`` (the long per-prompt frame), as
``harness.tracking.results.load_results`` returns them.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from harness import stats
from harness.errors import ConfigError, unknown_name
from harness.tracking.prompt_scores import SAMPLE_VAR_SUFFIX, SAMPLES_SUFFIX

#: Trial-frame columns that are bookkeeping, not final metrics.
BASE_COLUMNS = ("trial_id", "arm", "seed", "status", "error", "wall_time_s", "config_hash", "warnings")
#: Spec keys that name a trial rather than configure it (left out of the config-diff table).
IDENTITY_PARAMS = ("param/arm", "param/seed", "param/study", "param/cache_dir")
#: The x axis of learning curves "by tokens processed".
TOKENS_METRIC = "tokens/total"
#: Learning curves drawn besides the primary metric, when the study logged them.
DEFAULT_CURVE_METRICS = ("train/reward_mean", "train/kl_ref", "train/entropy", "train/clip_frac", "train/grad_norm")
CORRECTIONS = stats.CORRECTIONS
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
    noise_floor: pd.DataFrame  # per condition seed std (interval, method), seeds needed at the planning effect
    cost: pd.DataFrame  # per condition wall time, tokens, trial counts (+ an "all" row)
    failed: pd.DataFrame  # failed trials with their reasons
    pending: pd.DataFrame  # waiting / running trials
    config_diff: pd.DataFrame  # param rows x condition columns, only params that differ
    trials: pd.DataFrame  # the per-trial table (results.csv)
    curves: dict[tuple[str, str], pd.DataFrame] = field(default_factory=dict)  # (metric, x) -> band
    components: pd.DataFrame = field(default_factory=pd.DataFrame)  # variance components of the primary metric
    budget: pd.DataFrame = field(default_factory=pd.DataFrame)  # predicted SE of a difference per design option
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


# ----------------------------------------------------------------------------- scores


@dataclass
class ArmScores:
    """One condition's scores on a metric: a value per seed and, when every trial recorded
    per-prompt scores, the ``[seed, prompt]`` table (same seeds, in order)."""

    values: pd.Series  # per seed, sorted; failed trials at the worst value under failures: worst
    failed: int  # failed trials of the condition (scored or dropped)
    table: pd.DataFrame | None = None  # seeds x prompt ids
    sample_var: float | None = None  # mean within-prompt variance of one eval sample
    samples: int = 1


def worst_value(results, metric: str) -> float | None:
    """The metric's worst value (its range's bad end), or None when it has no known range."""
    meta = _meta(results)
    bounds = (meta.get("metric_ranges") or {}).get(metric)
    if bounds is None:
        return None
    low, high = bounds
    return low if meta.get("direction", "maximize") == "maximize" else high


def _final_prompt_rows(results, trial_ids, metric: str) -> pd.DataFrame:
    """Per-prompt rows of ``metric`` at each trial's last evaluation."""
    prompts = getattr(results, "prompts", None)
    if prompts is None or not len(prompts):
        return pd.DataFrame(columns=["trial_id", "step", "prompt_id", "metric", "value"])
    rows = prompts[prompts["trial_id"].isin(trial_ids) & (prompts["metric"] == metric)]
    last = rows.groupby("trial_id")["step"].transform("max")
    return rows[rows["step"] == last]


def arm_scores(results, condition: str, metric: str, *, failures: str = "drop") -> ArmScores:
    trials = results.trials[results.trials["arm"] == condition]
    done = completed(trials)
    failed = trials[trials["status"] == "failed"]
    values = seed_values(results.trials, condition, metric)
    worst = worst_value(results, metric) if failures == "worst" else None
    if worst is not None and len(failed):
        values = pd.concat([values, pd.Series(worst, index=failed["seed"].to_numpy(), dtype=float)]).sort_index()
    scores = ArmScores(values=values, failed=len(failed))
    ids = dict(zip(done["trial_id"], done["seed"]))
    rows = _final_prompt_rows(results, list(ids), metric)
    wide = rows.pivot_table(index="trial_id", columns="prompt_id", values="value", aggfunc="last")
    if not len(ids) or set(wide.index) != set(ids) or wide.shape[1] < 2 or wide.isna().any().any():
        return scores
    wide.index = [ids[t] for t in wide.index]
    if worst is not None:
        for seed in failed["seed"]:
            wide.loc[seed] = worst
    wide = wide.sort_index()
    if not wide.index.equals(values.index):  # e.g. a completed trial without a finite final value
        return scores
    var_rows = _final_prompt_rows(results, list(ids), metric + SAMPLE_VAR_SUFFIX)
    k_rows = _final_prompt_rows(results, list(ids), metric + SAMPLES_SUFFIX)
    samples = int(k_rows["value"].max()) if len(k_rows) else 1
    sample_var = float(var_rows["value"].mean()) if len(var_rows) and samples > 1 else None
    return ArmScores(values=values, failed=len(failed), table=wide, sample_var=sample_var, samples=samples)


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


# ----------------------------------------------------------------------------- comparisons


@dataclass
class PairResult:
    """One condition-vs-control comparison: the difference a verdict reads, and how it was made."""

    condition: str
    control: str
    metric: str
    arm: ArmScores
    base: ArmScores
    paired: bool
    difference: stats.Difference
    comparison: Any | None  # stats.Comparison (effect sizes, robustness), None when a side has < 2 seeds
    notes: list[str] = field(default_factory=list)


def _primary_test(requested: str, arm: ArmScores, base: ArmScores, paired: bool) -> tuple[str, str]:
    """The pre-registered test as the data allow it, and a note when they did not."""
    tables = arm.table is not None and base.table is not None
    if requested == "auto":
        return ("seed_prompt" if tables else "paired_t" if paired else "welch_t"), ""
    if requested == "seed_prompt" and not tables:
        fallback = "paired_t" if paired else "welch_t"
        return fallback, f"No per-prompt scores for every trial: {fallback} over trial means instead of seed_prompt"
    if requested == "paired_t" and not paired:
        return "welch_t", "The seeds are not matched: welch_t instead of paired_t"
    return requested, ""


def _on_seeds(scores: ArmScores, seeds: pd.Index) -> ArmScores:
    table = scores.table.loc[seeds] if scores.table is not None else None
    return dataclasses.replace(scores, values=scores.values.loc[seeds], table=table)


def _untested(a: pd.Series, b: pd.Series, test: str, paired: bool, why: str) -> stats.Difference:
    diff = float(a.mean() - b.mean()) if len(a) and len(b) else float("nan")
    return stats.Difference(diff, float("nan"), float("nan"), test, len(a), len(b), paired, reason=why)


def compare_values(results, condition: str, control: str, metric: str, *, test: str = "auto",
                   failures: str = "drop", n_permutations: int = 10_000, seed: int = 0) -> PairResult:
    """The pre-registered test of one pair, paired when the design is seed-matched on both sides."""
    arm = arm_scores(results, condition, metric, failures=failures)
    base = arm_scores(results, control, metric, failures=failures)
    notes = []
    common = arm.values.index.intersection(base.values.index)
    paired = (bool(_meta(results).get("seed_matched")) and arm.values.index.is_unique
              and base.values.index.is_unique and len(common) >= MIN_SEEDS_FOR_TEST)
    if paired and len(common) < max(len(arm.values), len(base.values)):
        notes.append(f"Paired on the {len(common)} seeds both sides completed")
        arm, base = _on_seeds(arm, common), _on_seeds(base, common)
    a, b = arm.values, base.values
    chosen, note = _primary_test(test, arm, base, paired)
    notes += [note] if note else []
    for side, scores in ((condition, arm), (control, base)):
        if scores.failed:
            notes.append(f"Failed trials of {side}: {scores.failed}, "
                         + ("scored at the metric's worst value" if failures == "worst" else
                            "left out (failures: drop)"))
    if min(len(a), len(b)) < MIN_SEEDS_FOR_TEST:
        short = [f"{name} has {len(v)} seed{'s' if len(v) != 1 else ''}"
                 for name, v in ((condition, a), (control, b)) if len(v) < MIN_SEEDS_FOR_TEST]
        why = " and ".join(short) + f" (a test needs at least {MIN_SEEDS_FOR_TEST} per side)"
        return PairResult(condition, control, metric, arm, base, False, _untested(a, b, chosen, False, why), None,
                          notes)
    if chosen == "seed_prompt":
        prompts = arm.table.columns.intersection(base.table.columns)
        pooled = [v for v in (arm.sample_var, base.sample_var) if v is not None]
        difference = stats.seed_prompt_difference(
            arm.table[prompts].to_numpy(), base.table[prompts].to_numpy(), paired=paired,
            sample_var=float(np.mean(pooled)) if pooled else None, samples=min(arm.samples, base.samples))
    else:
        difference = stats.trial_means_difference(a.to_numpy(), b.to_numpy(), test=chosen)
    comparison = stats.compare(a.to_numpy(), b.to_numpy(), paired=paired, n_permutations=n_permutations,
                               rng=_rng(seed))
    return PairResult(condition, control, metric, arm, base, paired, difference, comparison, notes)


#: the largest seed count the planner searches; beyond it "seeds needed" reads "> SEEDS_SEARCH_LIMIT"
SEEDS_SEARCH_LIMIT = 10_000


def _robustness(p: PairResult, alpha: float) -> list[dict[str, Any]]:
    """Checks that add information: none that repeats the primary test at these seeds."""
    c = p.comparison
    if c is None:
        return []
    checks = dict(c.robustness)
    primary = p.difference.test
    n_min = min(p.difference.n_arm, p.difference.n_control)
    if primary == "yuen" or int(np.floor(0.2 * n_min)) == 0:
        checks.pop("yuen", None)  # at n <= 4 a 20% trim cuts nothing: Yuen is Welch
    checks.pop(primary, None)
    if primary != "welch_t" and not p.paired:
        t = stats.welch_test(p.arm.values.to_numpy(), p.base.values.to_numpy(), alpha=alpha)
        checks["welch_t"] = stats.Check(float(t.p_value), 0.0, True, "t")
    rows = []
    for name in sorted(checks, key=lambda k: (ROBUSTNESS_ORDER.index(k) if k in ROBUSTNESS_ORDER else 99, k)):
        chk = checks[name]
        label = _n_label(p.difference.n_arm, p.difference.n_control, p.paired)
        rows.append({"condition": p.condition, "control": p.control, "check": name, "p_value": chk.p_value,
                     "min_attainable_p": chk.min_attainable_p, "can_reject": bool(chk.can_reject),
                     "note": "" if chk.can_reject else f"cannot reject at {label}"})
    return rows


VERDICT_COLUMNS = [
    "condition", "control", "metric", "n", "n_control", "failed", "failed_control", "paired", "mean",
    "mean_control", "diff", "ci_low", "ci_high", "ci_level", "test", "p_value", "p_adjusted", "hedges_g",
    "prob_improvement", "pair_correlation", "verdict", "smaller_than_min_effect", "seeds_needed_null",
    "seeds_needed_effect", "reason",
]
CHECK_COLUMNS = ["condition", "control", "check", "p_value", "min_attainable_p", "can_reject", "note"]


def _verdict_rows(pairs: list[PairResult], *, alpha, correction, direction, power, min_effect,
                  planning_effect) -> tuple[pd.DataFrame, pd.DataFrame]:
    verdicts = stats.decide([p.difference for p in pairs], alpha=alpha, direction=direction, min_effect=min_effect,
                            planning_effect=planning_effect, correction=correction, power=power,
                            max_n=SEEDS_SEARCH_LIMIT)
    rows, checks = [], []
    for p, v in zip(pairs, verdicts):
        c = p.comparison
        notes = " ".join(n + "." for n in p.notes)
        rows.append({
            "condition": p.condition, "control": p.control, "metric": p.metric,
            "n": len(p.arm.values), "n_control": len(p.base.values),
            "failed": p.arm.failed, "failed_control": p.base.failed, "paired": p.paired,
            "mean": float(p.arm.values.mean()) if len(p.arm.values) else np.nan,
            "mean_control": float(p.base.values.mean()) if len(p.base.values) else np.nan,
            "diff": v.diff, "ci_low": v.ci_low, "ci_high": v.ci_high, "ci_level": v.ci_level, "test": v.test,
            "p_value": v.p_value, "p_adjusted": v.p_adjusted,
            "hedges_g": getattr(c, "hedges_g", np.nan), "prob_improvement": getattr(c, "prob_improvement", np.nan),
            "pair_correlation": getattr(c, "pair_correlation", np.nan),
            "verdict": v.label, "smaller_than_min_effect": v.smaller_than_min_effect,
            "seeds_needed_null": v.seeds_needed_null, "seeds_needed_effect": v.seeds_needed_effect,
            "reason": " ".join(t for t in (notes, v.reason) if t),
        })
        checks += _robustness(p, alpha)
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS), pd.DataFrame(checks, columns=CHECK_COLUMNS)


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


NOISE_COLUMNS = ["condition", "n", "failed", "mean", "std", "std_ci_low", "std_ci_high", "std_ci_method",
                 "normality_p", "sem", "seeds_needed", "note"]


def noise_floor_table(results, metric: str | None = None, *, alpha: float = 0.05, power: float = 0.8,
                      level: float | None = None, effect: float | None = None,
                      failures: str = "drop") -> pd.DataFrame:
    """Per condition ``stats.noise_floor`` of ``metric``; ``seeds_needed`` plans two arms of this
    sd at ``effect`` with intervals at ``level`` (the verdicts' level)."""
    metric = check_metric(results, metric)
    rows = []
    for cond in conditions_of(results):
        scores = arm_scores(results, cond, metric, failures=failures)
        v = scores.values
        note = ""
        if len(v) < MIN_SEEDS_FOR_TEST:
            note = (f"{len(v)} completed seed{'s' if len(v) != 1 else ''}: "
                    f"a seed std needs at least {MIN_SEEDS_FOR_TEST}")
        if len(v) == 0:
            rows.append({"condition": cond, "n": 0, "failed": scores.failed, "note": note})
            continue
        nf = stats.noise_floor(v.to_numpy(), alpha=alpha, level=level, effect=effect, power=power)
        rows.append({"condition": cond, "n": nf.n, "failed": scores.failed, "mean": nf.mean, "std": nf.std,
                     "std_ci_low": nf.std_ci_low, "std_ci_high": nf.std_ci_high, "std_ci_method": nf.std_ci_method,
                     "normality_p": nf.normality_p, "sem": nf.sem, "seeds_needed": nf.seeds_needed, "note": note})
    return pd.DataFrame(rows, columns=NOISE_COLUMNS)


# ----------------------------------------------------------------------------- noise by source


COMPONENT_COLUMNS = ["source", "variance", "sd", "share", "note"]
BUDGET_COLUMNS = ["option", "seeds", "prompts", "samples", "se_diff"]
COMPONENT_NOTES = {
    "seed": "training seed: shrinks with more seeds per arm",
    "prompt": "shared by every arm on the same prompts: cancels in a difference",
    "arm x prompt": "does not cancel and does not shrink with seeds: shrinks with more eval prompts",
    "seed x prompt": "shrinks with seeds x prompts",
    "eval sampling": "shrinks with more eval samples per prompt",
}


@dataclass
class NoiseSplit:
    """The noise floor split by source, what more budget buys, and the one-line summary."""

    components: pd.DataFrame
    budget: pd.DataFrame
    line: str


def typical_plan(pairs: list[PairResult]) -> stats.PlanVariance | None:
    """The variance model of a typical arm-vs-control difference of the study: the median of each
    component over its seed x prompt comparisons (robust to one arm unlike the others), paired
    when they all are. None without a seed x prompt comparison."""
    plans = [p.difference.plan for p in pairs
             if p.difference.testable and p.difference.plan is not None and p.difference.test == "seed_prompt"]
    if not plans:
        return None
    median = {k: float(np.median([getattr(q, k) for q in plans])) for k in ("seed", "prompt", "residual", "sampling")}
    return stats.PlanVariance(**median, n_prompts=plans[0].n_prompts, samples=plans[0].samples,
                              paired=all(q.paired for q in plans))


def noise_split(metric: str, scores: dict[str, ArmScores], *, level: float, effect: float | None,
                margin: float | None, power: float, plan: stats.PlanVariance | None = None) -> NoiseSplit:
    """Variance components over every condition's ``[seed, prompt]`` table (on their common
    prompts), the predicted SE of a difference at more budget, and the report's one-liner.
    ``plan`` is the difference to predict (default: two unpaired arms with these components)."""
    tables = {c: s.table for c, s in scores.items() if s.table is not None and len(s.table) >= MIN_SEEDS_FOR_TEST}
    prompts = [set(t.columns) for t in tables.values()]
    common = sorted(set.intersection(*prompts)) if prompts else []
    empty = NoiseSplit(pd.DataFrame(columns=COMPONENT_COLUMNS), pd.DataFrame(columns=BUDGET_COLUMNS), "")
    trial_sds = [float(s.values.std(ddof=1)) for s in scores.values() if len(s.values) >= MIN_SEEDS_FOR_TEST]
    if len(common) < 2:
        if not trial_sds:
            return empty
        sd = float(np.sqrt(np.mean(np.square(trial_sds))))
        empty.line = (f"Noise floor of {metric}: seed sd {sd:.3g} over trial means (no per-prompt scores "
                      "recorded, so it cannot be split by source).")
        return empty
    sample_vars = [s.sample_var for s in scores.values() if s.sample_var is not None]
    samples = min(s.samples for c, s in scores.items() if c in tables)
    comps = stats.variance_components({c: t[common].to_numpy() for c, t in tables.items()},
                                      sample_var=float(np.mean(sample_vars)) if sample_vars else None,
                                      samples=samples)
    by_source = comps.by_source()
    total = sum(by_source.values())
    components = pd.DataFrame([
        {"source": k, "variance": v, "sd": float(np.sqrt(v)), "share": v / total if total > 0 else np.nan,
         "note": COMPONENT_NOTES[k]} for k, v in by_source.items()], columns=COMPONENT_COLUMNS)
    plan = plan or comps.as_plan(paired=False)
    n = max(MIN_SEEDS_FOR_TEST, int(round(comps.seeds)))
    P, k = comps.n_prompts, comps.samples
    options = [("as run", n, P, k), ("+1 seed per arm", n + 1, P, k), ("2x eval prompts", n, 2 * P, k)]
    if k > 1 or comps.eval_sampling > 0:
        options.append(("2x eval samples", n, P, 2 * k))
    budget = pd.DataFrame([{"option": o, "seeds": s, "prompts": p, "samples": q,
                            "se_diff": float(np.sqrt(plan.variance(s, p, q)))} for o, s, p, q in options],
                          columns=BUDGET_COLUMNS)
    line = (f"Noise floor of {metric}: seed sd {np.sqrt(comps.seed):.3g}, prompt sd "
            f"{np.sqrt((comps.prompt + comps.arm_x_prompt) / P):.3g} of an arm's mean at {P} prompts "
            f"(arm x prompt {np.sqrt(comps.arm_x_prompt / P):.3g} of it does not cancel between arms).")
    if effect:
        needs = []
        for prompts_n in (P, 4 * P):
            scaled = dataclasses.replace(plan, n_prompts=prompts_n)
            need = stats.seeds_to_decide(effect, scaled, level=level, power=power, margin=margin,
                                         max_n=SEEDS_SEARCH_LIMIT)
            needs.append(f"{need} seeds per arm at {prompts_n} prompts" if need else
                         f"more than {SEEDS_SEARCH_LIMIT} seeds per arm at {prompts_n} prompts")
        line += f" A {effect:.3g} difference is decided with {power:.0%} probability with {needs[0]}, or {needs[1]}."
    return NoiseSplit(components, budget, line)


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


# ----------------------------------------------------------------------------- trial warnings

#: the warning code of a trial that had nothing to learn from (harness.engine.spec.NO_LEARNING_SIGNAL;
#: the report does not import the engine)
NO_SIGNAL = "no_learning_signal"


def _warned(results) -> tuple[dict[str, dict[str, list[tuple[int, str]]]], dict[str, int]]:
    """``code -> condition -> [(seed, detail)]`` over completed trials' warnings (the trials
    frame's newline-joined ``warnings`` column), and each condition's completed-trial count."""
    done = completed(results.trials)
    by_code: dict[str, dict[str, list[tuple[int, str]]]] = {}
    for cond, seed, text in zip(done["arm"], done["seed"], done.get("warnings", pd.Series("", index=done.index))):
        for line in text.splitlines() if isinstance(text, str) else []:
            code, _, detail = line.partition(": ")
            by_code.setdefault(code, {}).setdefault(str(cond), []).append((int(seed), detail))
    return by_code, done["arm"].astype(str).value_counts().to_dict()


def warning_state(results) -> list[str]:
    """The header's line per warning code: how many completed trials of each condition carry it,
    and one trial's text."""
    by_code, totals = _warned(results)
    lines = []
    for code, per in sorted(by_code.items()):
        counts = ", ".join(f"{cond} {len(hits)} of {totals[cond]}" for cond, hits in per.items())
        cond, hits = next(iter(per.items()))
        seed, detail = min(hits)
        lines.append(f"WARNING {code} in completed trials ({counts}); {cond} seed {seed}: {detail}")
    return lines


def mark_no_learning_signal(verdicts: pd.DataFrame, results) -> pd.DataFrame:
    """Comparisons with a side whose completed trials all have no learning signal: no seeds-needed
    figure (more seeds would not decide them), and the reason says so first."""
    by_code, totals = _warned(results)
    silent = {cond for cond, hits in by_code.get(NO_SIGNAL, {}).items() if len(hits) == totals[cond]}
    out = verdicts.copy()
    hit = [[c for c in pair if c in silent] for pair in zip(out["condition"], out["control"])]
    if not any(hit):
        return out
    seeds = ["seeds_needed_null", "seeds_needed_effect"]
    out[seeds] = out[seeds].astype(object)
    for i, sides in zip(out.index, hit):
        if sides:
            out.loc[i, seeds] = None
            out.at[i, "reason"] = (f"No learning signal in {' and '.join(sides)} (each of its completed trials warns "
                                   f"{NO_SIGNAL}): more seeds will not decide this; fix the set-up first. "
                                   f"{out.at[i, 'reason']}").strip()
    return out


# ----------------------------------------------------------------------------- header


def build_header(results, *, correction: str, alpha: float, min_effect: float | None = None,
                 planning_effect: float | None = None, noise_line: str = "", level: float | None = None,
                 failed_by_condition: dict[str, int] | None = None) -> dict[str, Any]:
    import harness

    meta = _meta(results)
    trials = results.trials
    status = trials["status"].value_counts() if len(trials) else pd.Series(dtype=int)
    n_total = len(trials)
    n_done = int(status.get("completed", 0))
    n_failed = int(status.get("failed", 0))
    n_pending = int(status.get("running", 0)) + int(status.get("waiting", 0))
    failures = meta.get("failures") or "drop"
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
    if min_effect is None:
        planned = f" Seeds needed are planned at one seed sd ({planning_effect:.3g})." if planning_effect else ""
        state.append("NO MIN_EFFECT: the study names no smallest effect of interest, so no comparison can be "
                     f"called equivalent (only better, worse or inconclusive).{planned} Set min_effect "
                     "beside primary_metric in the study file, or pass --min-effect.")
    if n_failed:
        per = ", ".join(f"{c} {n}" for c, n in (failed_by_condition or {}).items() if n)
        state.append(
            f"{n_failed} trial{'s' if n_failed != 1 else ''} failed ({per}); "
            + ("each is scored at the metric's worst value (failures: worst)" if failures == "worst" else
               f"{'they are' if n_failed != 1 else 'it is'} left out of the statistics (failures: drop; "
               "this favours an arm whose bad seeds crash)")
            + "; each is listed with its reason under 'Failed trials'."
        )
    state += warning_state(results)
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
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "n_trials": n_total,
        "n_completed": n_done,
        "n_failed": n_failed,
        "n_pending": n_pending,
        "complete": n_done == n_total,
        "state": state,
    }


# ----------------------------------------------------------------------------- entry points


def check_min_effect(value: Any) -> float | None:
    """A smallest effect of interest from the CLI or the study: None, or a finite number > 0."""
    if value is None:
        return None
    try:
        return stats.check_margin(value)
    except (TypeError, ValueError):
        raise ConfigError(f"min_effect must be a finite number > 0 in the metric's units (e.g. 0.02), "
                          f"got {value!r}") from None


def _planning_effect(margin: float | None, scores: dict[str, ArmScores], control: str | None) -> float | None:
    """min_effect, or one seed sd of the control (pooled over conditions when it has < 2 seeds)."""
    if margin is not None:
        return margin
    ctrl = scores.get(control)
    if ctrl is not None and len(ctrl.values) >= MIN_SEEDS_FOR_TEST and ctrl.values.std(ddof=1) > 0:
        return float(ctrl.values.std(ddof=1))
    sds = [float(s.values.std(ddof=1)) for s in scores.values() if len(s.values) >= MIN_SEEDS_FOR_TEST]
    pooled = float(np.sqrt(np.mean(np.square(sds)))) if sds else 0.0
    return pooled if pooled > 0 else None


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
    meta = _meta(results)
    trials = results.trials.copy()
    metric = check_metric(results, None)
    direction = meta.get("direction", "maximize")
    margin = check_min_effect(min_effect if min_effect is not None else meta.get("min_effect"))
    failures = meta.get("failures") or "drop"
    conds = conditions_of(results)
    for cond in (c for pair in comparisons_of(results) for c in pair):
        check_condition(results, cond)

    pairs = [
        compare_values(results, a, b, metric, test=meta.get("test") or "auto", failures=failures,
                       n_permutations=n_permutations, seed=seed)
        for a, b in comparisons_of(results)
    ]
    scores = {c: arm_scores(results, c, metric, failures=failures) for c in conds}
    effect = _planning_effect(margin, scores, meta.get("control"))
    family = sum(p.difference.testable for p in pairs)
    level = stats.interval_level(alpha, family, correction)
    verdicts, robustness = _verdict_rows(pairs, alpha=alpha, correction=correction, direction=direction,
                                         power=power, min_effect=margin, planning_effect=effect)
    verdicts = mark_no_learning_signal(verdicts, results)
    split = noise_split(metric, scores, level=level, effect=effect, margin=margin, power=power,
                        plan=typical_plan(pairs))

    failed = trials[trials["status"] == "failed"][["trial_id", "arm", "seed", "error"]].reset_index(drop=True)
    failed["error"] = failed["error"].fillna("(no reason recorded)")
    pending = trials[trials["status"].isin(["running", "waiting"])][["trial_id", "arm", "seed", "status"]]

    analysis = Analysis(
        header=build_header(results, correction=correction, alpha=alpha, min_effect=margin, planning_effect=effect,
                            noise_line=split.line, level=level,
                            failed_by_condition={c: s.failed for c, s in scores.items()}),
        conditions=condition_table(results, metric, alpha=alpha),
        verdicts=verdicts,
        robustness=robustness,
        noise_floor=noise_floor_table(results, metric, alpha=alpha, power=power, level=level, effect=effect,
                                      failures=failures),
        cost=cost_table(trials, conds),
        failed=failed,
        pending=pending.reset_index(drop=True),
        config_diff=config_diff_table(trials, conds),
        trials=trials.sort_values(["arm", "seed"], kind="stable").reset_index(drop=True),
        components=split.components,
        budget=split.budget,
    )
    for m in curve_metrics_of(results, curve_metrics):
        for x in ("step", "tokens"):
            band = curve_bands(results, m, x=x, alpha=alpha)
            if len(band):
                analysis.curves[(m, x)] = band
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
    meta = _meta(results)
    margin = check_min_effect(min_effect if min_effect is not None else meta.get("min_effect"))
    primary = meta.get("primary_metric")
    pre_registered = (arm_a, arm_b) in comparisons_of(results) and metric == primary
    if pre_registered:
        analysis = analyze(results, correction=correction, alpha=alpha, power=power, min_effect=margin,
                           n_permutations=n_permutations, seed=seed, curve_metrics=[])
        v = analysis.verdicts
        row = v[(v["condition"] == arm_a) & (v["control"] == arm_b)].iloc[0].to_dict()
        r = analysis.robustness
        checks = r[(r["condition"] == arm_a) & (r["control"] == arm_b)]
        family = f"{correction} over the {len(v)} pre-registered comparisons"
    else:
        failures = meta.get("failures") or "drop"
        pair = compare_values(results, arm_a, arm_b, metric, test=meta.get("test") or "auto", failures=failures,
                              n_permutations=n_permutations, seed=seed)
        effect = _planning_effect(margin, {arm_a: pair.arm, arm_b: pair.base}, arm_b)
        verdicts, checks = _verdict_rows([pair], alpha=alpha, correction=correction,
                                         direction=meta.get("direction", "maximize"), power=power,
                                         min_effect=margin, planning_effect=effect)
        row = mark_no_learning_signal(verdicts, results).iloc[0].to_dict()
        family = "none: not a pre-registered comparison on the primary metric (tested alone)"
    row["direction"] = meta.get("direction", "maximize")
    row["correction"] = family
    row["min_effect"] = margin
    row["pre_registered"] = pre_registered
    row["robustness"] = checks.drop(columns=["condition", "control"]).to_dict(orient="records")
    return row
