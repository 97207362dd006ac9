"""One condition against its control: the scores each side has (per seed, and per seed x prompt
when recorded), the pre-registered test as the data allow it, the verdict rows and the robustness
checks that add information. Every statistic comes from ``harness.stats``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from harness import stats
from harness.decide.compute_budget import at_point
from harness.decide.frames import MIN_SEEDS_FOR_TEST, comparisons_of, completed, meta_of, seed_values
from harness.decide.rules import DecisionRules
from harness.tracking.prompt_scores import (
    SAMPLE_VAR_SUFFIX,
    SAMPLES_SUFFIX,
    STRATUM_METRIC,
    STRATUM_SIZE_METRIC,
    samples_metric,
)

#: Robustness checks shown next to each verdict, in this order.
ROBUSTNESS_ORDER = ("mann_whitney", "yuen", "permutation", "paired_t", "sign_flip")
#: the verdict labels the report and the MLflow mirror single out (``harness.stats.verdict``)
UNTESTED = stats.UNTESTED
EVAL_ONLY_LABELS = stats.EVAL_ONLY_LABELS


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _n_label(n_arm: int, n_control: int, paired: bool) -> str:
    if paired or n_arm == n_control:
        return f"n={n_arm}"
    return f"n={n_arm}/{n_control}"


# ----------------------------------------------------------------------------- scores


@dataclass(frozen=True)
class SubsetDesign:
    """The eval subset a point was read on: each read prompt's stratum and every stratum's count
    of held-out prompts (``PromptScores.strata``, ``stratum_sizes``)."""

    strata: pd.Series  # prompt id -> stratum
    sizes: dict[int, int]

    @property
    def describe(self) -> str:
        return f"{len(self.strata)} of the {sum(self.sizes.values())} held-out prompts in {len(self.sizes)} strata"


@dataclass
class ArmScores:
    """One condition's scores on a metric: a value per seed and, when every trial recorded
    per-prompt scores, the ``[seed, prompt]`` table (same seeds, in order)."""

    values: pd.Series  # per seed, sorted; failed trials at the worst value under failures: worst
    failed: int  # failed trials of the condition (scored or dropped)
    table: pd.DataFrame | None = None  # seeds x prompt ids
    sample_var: float | None = None  # mean within-prompt variance of one eval sample
    samples: int = 1
    sampled: bool = False  # the scores are means of k sampled completions (k recorded), not greedy
    subset: SubsetDesign | None = None  # read on the eval subset (an intermediate evaluation), not every prompt


def worst_value(results, metric: str) -> float | None:
    """The metric's worst value (its range's bad end), or None when it has no known range."""
    meta = meta_of(results)
    bounds = meta.metric_ranges.get(metric)
    if bounds is None:
        return None
    low, high = bounds
    return low if meta.direction == "maximize" else high


def _final_prompt_rows(results, trial_ids, metric: str) -> pd.DataFrame:
    """Per-prompt rows of ``metric`` at each trial's last evaluation."""
    prompts = getattr(results, "prompts", None)
    if prompts is None or not len(prompts):
        return pd.DataFrame(columns=["trial_id", "step", "prompt_id", "metric", "value"])
    rows = prompts[prompts["trial_id"].isin(trial_ids) & (prompts["metric"] == metric)]
    last = rows.groupby("trial_id")["step"].transform("max")
    return rows[rows["step"] == last]


def _subset_design(results, trial_ids: list[str]) -> SubsetDesign | None:
    """The eval subset the trials were read on at the point, or None where it read every prompt.
    Trials that read different prompts or strata give the design of none of them (an empty one)."""
    strata = _final_prompt_rows(results, trial_ids, STRATUM_METRIC)
    if not len(strata):
        return None
    sizes_rows = _final_prompt_rows(results, trial_ids, STRATUM_SIZE_METRIC)
    labels = strata.pivot_table(index="prompt_id", columns="trial_id", values="value", aggfunc="last")
    both = strata.merge(sizes_rows, on=["trial_id", "prompt_id"], suffixes=("", "_size"))
    sizes = dict(zip(both["value"].round().astype(int), both["value_size"].round().astype(int)))
    if len(labels) >= sum(sizes.values()):
        return None
    if labels.isna().any().any() or not labels.eq(labels.iloc[:, 0], axis=0).all().all():
        return SubsetDesign(pd.Series(dtype=int), sizes)
    return SubsetDesign(labels.iloc[:, 0].round().astype(int), sizes)


def arm_scores(results, condition: str, metric: str, *, failures: str = "drop") -> ArmScores:
    results = at_point(results, metric, condition)  # the study's primary_at: final, at a budget or its mean
    trials = results.trials[results.trials["arm"] == condition]
    done = completed(trials)
    failed = trials[trials["status"] == "failed"]
    values = seed_values(results.trials, condition, metric)
    worst = worst_value(results, metric) if failures == "worst" else None
    if worst is not None and len(failed):
        values = pd.concat([values, pd.Series(worst, index=failed["seed"].to_numpy(), dtype=float)]).sort_index()
    ids = dict(zip(done["trial_id"], done["seed"]))
    scores = ArmScores(values=values, failed=len(failed), subset=_subset_design(results, list(ids)))
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
    k_rows = _final_prompt_rows(results, list(ids), samples_metric(metric) + SAMPLES_SUFFIX)
    samples = int(k_rows["value"].max()) if len(k_rows) else 1
    sample_var = float(var_rows["value"].mean()) if len(var_rows) and samples > 1 else None
    sampled = bool(len(k_rows))  # pass@k / pass^k: sampled, with no per-sample variance (not separable)
    return dataclasses.replace(scores, table=wide, sample_var=sample_var, samples=samples, sampled=sampled)


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
    if tables and requested in ("auto", "seed_prompt") and stats.is_binary(arm.table, base.table):
        return stats.BINARY_TEST, ""  # 0/1 scores: the seed x prompt test that keeps its level at few flips
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


def _eval_only(arm: ArmScores, base: ArmScores, why: str) -> tuple[stats.Difference | None, str]:
    """The eval-only difference of two sides with per-prompt scores on common prompts (a side has
    one training run), or None and the reason the pair cannot be tested at all. One run per side
    with 0/1 scores is decided by the binary test (``stats.eval_only_difference``), whatever the
    study's primary test: the seed-level tests it names need seeds."""
    if not (len(arm.values) and len(base.values)):
        return None, why
    if arm.table is None or base.table is None:
        return None, f"{why}, and no per-prompt scores for every trial of both sides for an eval-only comparison"
    prompts = arm.table.columns.intersection(base.table.columns)
    if len(prompts) < 2:
        return None, f"{why}, and {len(prompts)} prompts scored by both sides (an eval-only comparison needs 2)"
    return stats.eval_only_difference(arm.table[prompts].to_numpy(), base.table[prompts].to_numpy()), ""


def with_subset_variance(arm: ArmScores, base: ArmScores, difference: stats.Difference) -> tuple[stats.Difference, str]:
    """``difference`` read at a point of the eval subset, as an estimate of the full held-out set's:
    the stratified mean of the per-prompt differences of the two sides' seed means, its standard
    error widened by the subset's sampling variance (``stats.subset_variance``, ``stats.widen``), and
    a note saying so, and the seeds-to-decide plan given the subset's variance as a term more seeds
    do not shrink; unchanged where the point read every prompt. Where the subset's variance cannot
    be estimated (a side without per-prompt scores on one common subset, or an eval-only 0/1 test,
    whose interval is not a standard error), the difference is untested, with the reason."""
    design = arm.subset or base.subset
    if design is None or not difference.testable:
        return difference, ""
    reason = ""
    if arm.table is None or base.table is None or not len(design.strata):
        reason = "a side has no per-prompt scores on one common eval subset for every trial"
    elif difference.test == stats.EVAL_ONLY_BINARY_TEST:
        reason = "an eval-only 0/1 comparison's interval cannot carry the subset's sampling variance"
    elif arm.subset is None or base.subset is None or not arm.subset.strata.equals(base.subset.strata):
        reason = "the two sides were read on different prompts or strata"
    if reason:
        why = f"read at an evaluation of the eval subset, but {reason}: read it at the final evaluation"
        return dataclasses.replace(difference, reason=why), ""
    prompts = design.strata.index
    per_prompt = arm.table[prompts].mean(axis=0) - base.table[prompts].mean(axis=0)
    added = stats.subset_variance(per_prompt.to_numpy(), design.strata.to_numpy(), design.sizes)
    se, df = stats.widen(difference.se, difference.df, added)
    note = (
        f"Read on the eval subset ({design.describe}): the stratified mean difference, its standard error "
        f"{difference.se:.3g} widened to {se:.3g} by the subset's sampling variance (Cochran 5.10)"
    )
    plan = difference.plan  # the subset's variance does not shrink with seeds: a fixed term, as the prompts' is
    if plan is not None:
        plan = dataclasses.replace(plan, prompt=plan.prompt + added.variance * plan.n_prompts)
    return dataclasses.replace(difference, diff=added.mean, se=se, df=df, plan=plan), note


def compare_values(
    results,
    condition: str,
    control: str,
    metric: str,
    *,
    test: str = "auto",
    failures: str = "drop",
    n_permutations: int = 10_000,
    seed: int = 0,
) -> PairResult:
    """The pre-registered test of one pair, paired when the design is seed-matched on both sides."""
    return compare_scores(
        arm_scores(results, condition, metric, failures=failures),
        arm_scores(results, control, metric, failures=failures),
        condition,
        control,
        metric,
        seed_matched=meta_of(results).seed_matched,
        test=test,
        failures=failures,
        n_permutations=n_permutations,
        seed=seed,
    )


def study_pairs(results, scores: dict[str, ArmScores], rules: DecisionRules) -> list[PairResult]:
    """Every pre-registered comparison of ``results`` on the rules' metric, from each condition's
    scores already read, under the study's seed matching and the rules' test, failure policy and
    permutation draws."""
    matched = meta_of(results).seed_matched
    return [compare_under(rules, scores[a], scores[b], a, b, seed_matched=matched) for a, b in comparisons_of(results)]


def compare_under(
    rules: DecisionRules,
    arm: ArmScores,
    base: ArmScores,
    condition: str,
    control: str,
    *,
    seed_matched: bool,
    robustness: bool = True,
) -> PairResult:
    """``compare_scores`` on the rules' metric with the rules' test, failure policy and
    permutation draws: the one way a pre-registered comparison reads its settings."""
    return compare_scores(
        arm,
        base,
        condition,
        control,
        rules.metric,
        seed_matched=seed_matched,
        test=rules.test,
        failures=rules.failures,
        n_permutations=rules.n_permutations,
        seed=rules.seed,
        robustness=robustness,
    )


def compare_scores(
    arm: ArmScores,
    base: ArmScores,
    condition: str,
    control: str,
    metric: str,
    *,
    seed_matched: bool,
    test: str = "auto",
    failures: str = "drop",
    n_permutations: int = 10_000,
    seed: int = 0,
    robustness: bool = True,
) -> PairResult:
    """``compare_values`` on scores already read (a report reads each condition's once).
    ``robustness=False`` leaves out the robustness checks (a sequential replay needs only the
    difference at each look)."""
    notes = []
    common = arm.values.index.intersection(base.values.index)
    paired = (
        seed_matched
        and arm.values.index.is_unique
        and base.values.index.is_unique
        and len(common) >= MIN_SEEDS_FOR_TEST
    )
    if paired and len(common) < max(len(arm.values), len(base.values)):
        notes.append(f"Paired on the {len(common)} seeds both sides completed")
        arm, base = _on_seeds(arm, common), _on_seeds(base, common)
    a, b = arm.values, base.values
    chosen, note = _primary_test(test, arm, base, paired)
    notes += [note] if note else []
    for side, scores in ((condition, arm), (control, base)):
        if scores.failed:
            notes.append(
                f"Failed trials of {side}: {scores.failed}, "
                + ("scored at the metric's worst value" if failures == "worst" else "left out (failures: drop)")
            )
    if min(len(a), len(b)) < MIN_SEEDS_FOR_TEST:
        short = [
            f"{name} has {len(v)} seed{'s' if len(v) != 1 else ''}"
            for name, v in ((condition, a), (control, b))
            if len(v) < MIN_SEEDS_FOR_TEST
        ]
        why = " and ".join(short) + f" (a seed-level test needs at least {MIN_SEEDS_FOR_TEST} per side)"
        difference, why_not = _eval_only(arm, base, why)
        if difference is None:
            return PairResult(
                condition, control, metric, arm, base, False, _untested(a, b, chosen, False, why_not), None, notes
            )
        method = " (0/1 scores: McNemar's exact test and Newcombe's interval)" if difference.binary else ""
        notes.append(f"{why}: eval-only comparison on the {difference.n_prompts} prompts both sides scored{method}")
        difference, subset_note = with_subset_variance(arm, base, difference)
        notes += [subset_note] if subset_note else []
        return PairResult(condition, control, metric, arm, base, False, difference, None, notes)
    if chosen in ("seed_prompt", stats.BINARY_TEST):
        prompts = arm.table.columns.intersection(base.table.columns)
        pooled = [v for v in (arm.sample_var, base.sample_var) if v is not None]
        difference = stats.seed_prompt_difference(
            arm.table[prompts].to_numpy(),
            base.table[prompts].to_numpy(),
            paired=paired,
            sample_var=float(np.mean(pooled)) if pooled else None,
            samples=min(arm.samples, base.samples),
            binary=chosen == stats.BINARY_TEST,
        )
    else:
        difference = stats.trial_means_difference(a.to_numpy(), b.to_numpy(), test=chosen)
    difference, subset_note = with_subset_variance(arm, base, difference)
    notes += [subset_note] if subset_note else []
    comparison = (
        stats.compare(a.to_numpy(), b.to_numpy(), paired=paired, n_permutations=n_permutations, rng=_rng(seed))
        if robustness
        else None
    )
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
        rows.append(
            {
                "condition": p.condition,
                "control": p.control,
                "check": name,
                "p_value": chk.p_value,
                "min_attainable_p": chk.min_attainable_p,
                "can_reject": bool(chk.can_reject),
                "note": "" if chk.can_reject else f"cannot reject at {label}",
            }
        )
    return rows


VERDICT_COLUMNS = [
    "condition",
    "control",
    "metric",
    "n",
    "n_control",
    "failed",
    "failed_control",
    "paired",
    "mean",
    "mean_control",
    "diff",
    "ci_low",
    "ci_high",
    "ci_level",
    "test",
    "p_value",
    "p_adjusted",
    "hedges_g",
    "prob_improvement",
    "pair_correlation",
    "verdict",
    "smaller_than_min_effect",
    "seeds_needed_null",
    "seeds_needed_effect",
    "reason",
]
CHECK_COLUMNS = ["condition", "control", "check", "p_value", "min_attainable_p", "can_reject", "note"]


def verdict_rows(
    pairs: list[PairResult],
    rules: DecisionRules,
    *,
    planning_effect: float | None,
    looks: list[stats.Look] | None = None,
    family_size: int | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One verdict row per pair (and its robustness rows), under ``rules``' alpha, correction,
    direction, power and min_effect; ``looks``: each pair's sequential look."""
    alpha = rules.alpha
    verdicts = stats.decide(
        [p.difference for p in pairs],
        alpha=alpha,
        direction=rules.direction,
        min_effect=rules.min_effect,
        planning_effect=planning_effect,
        correction=rules.correction,
        power=rules.power,
        max_n=SEEDS_SEARCH_LIMIT,
        looks=looks,
        family_size=family_size,
    )
    rows, checks = [], []
    for p, v in zip(pairs, verdicts):
        c = p.comparison
        notes = " ".join(n + "." for n in p.notes)
        rows.append(
            {
                "condition": p.condition,
                "control": p.control,
                "metric": p.metric,
                "n": len(p.arm.values),
                "n_control": len(p.base.values),
                "failed": p.arm.failed,
                "failed_control": p.base.failed,
                "paired": p.paired,
                "mean": float(p.arm.values.mean()) if len(p.arm.values) else np.nan,
                "mean_control": float(p.base.values.mean()) if len(p.base.values) else np.nan,
                "diff": v.diff,
                "ci_low": v.ci_low,
                "ci_high": v.ci_high,
                "ci_level": v.ci_level,
                "test": v.test,
                "p_value": v.p_value,
                "p_adjusted": v.p_adjusted,
                "hedges_g": getattr(c, "hedges_g", np.nan),
                "prob_improvement": getattr(c, "prob_improvement", np.nan),
                "pair_correlation": getattr(c, "pair_correlation", np.nan),
                "verdict": v.label,
                "smaller_than_min_effect": v.smaller_than_min_effect,
                "seeds_needed_null": v.seeds_needed_null,
                "seeds_needed_effect": v.seeds_needed_effect,
                "reason": " ".join(t for t in (notes, v.reason) if t),
            }
        )
        checks += _robustness(p, alpha)
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS), pd.DataFrame(checks, columns=CHECK_COLUMNS)


def planning_effect(margin: float | None, scores: dict[str, ArmScores], control: str | None) -> float | None:
    """min_effect, or one sd of the control's trial means (pooled over conditions when it has < 2 seeds)."""
    if margin is not None:
        return margin
    ctrl = scores.get(control)
    if ctrl is not None and len(ctrl.values) >= MIN_SEEDS_FOR_TEST and ctrl.values.std(ddof=1) > 0:
        return float(ctrl.values.std(ddof=1))
    sds = [float(s.values.std(ddof=1)) for s in scores.values() if len(s.values) >= MIN_SEEDS_FOR_TEST]
    pooled = float(np.sqrt(np.mean(np.square(sds)))) if sds else 0.0
    return pooled if pooled > 0 else None
