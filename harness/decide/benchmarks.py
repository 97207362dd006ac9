"""Several held-out benchmarks: a verdict per arm per benchmark, an overall verdict per arm, and
rliable's aggregates beside them.

The benchmarks come from ``meta.benchmarks``: name, metric and min_effect each, the
metric a full name (``eval/<name>/accuracy``) read like any other with
:func:`harness.decide.comparisons.arm_scores`, so a results object from anywhere with those metric
names (``harness decide``) is decided the same way.

* **Per benchmark**: each pre-registered comparison on each benchmark's metric, with the study's
  primary test and the benchmark's min_effect (None: the study's). The family is every testable
  (comparison, benchmark) pair, so the Bonferroni intervals, at ``1 - alpha / (arms x
  benchmarks)``, hold simultaneously over arms and benchmarks, as the primary verdicts hold over
  arms.
* **Overall**: per comparison, the mean over the benchmarks of the arm-minus-control differences,
  the benchmarks taken as fixed (:func:`harness.stats.benchmarks_difference`: each seed's scores
  averaged over benchmarks, then the paired or Welch t over seeds, plus each benchmark's arm x
  prompt term), decided against the study's min_effect. It is its own pre-registered family (one
  per comparison), at the level the primary verdicts use. With one training run on a side every
  benchmark's difference is eval-only, and so is the overall one (:func:`harness.stats.eval_only_mean`:
  the mean of the benchmarks' eval-only differences, conditional on these checkpoints).
* **Noise** per benchmark, as the primary metric's: its noise floor (each condition's sd of trial
  means, seeds to decide at the benchmarks' level and the benchmark's planning effect), its noise
  by source and what more budget buys, each a frame with a ``benchmark`` column.
* **Aggregates** (descriptive, beside the overall verdict): each condition's IQM of its
  seeds x benchmarks scores, the probability that a seed of the arm beats a seed of the control
  on a benchmark, and performance profiles, with rliable's stratified bootstrap intervals
  (:mod:`harness.stats.aggregates`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from harness import stats
from harness.decide.comparisons import (
    VERDICT_COLUMNS,
    ArmScores,
    PairResult,
    arm_scores,
    planning_effect,
    study_pairs,
    verdict_rows,
)
from harness.decide.frames import MIN_SEEDS_FOR_TEST, comparisons_of, conditions_of, meta_of
from harness.decide.noise import noise_floor_table, noise_split, typical_plan
from harness.decide.rules import DecisionRules
from harness.tracking.study_meta import BenchmarkMeta

#: the overall verdict's metric label
OVERALL_METRIC = "mean over benchmarks"
#: the overall verdict's test with one training run on a side (the mean of the eval-only differences)
EVAL_ONLY_OVERALL_TEST = stats.EVAL_ONLY_MEAN_TEST
#: fewest seeds of a condition whose bootstrap over seeds gives an interval (one seed: every
#: resample is that seed, so a zero-width "interval" that says nothing)
MIN_SEEDS_FOR_AGGREGATE_INTERVAL = 2
#: bootstrap replicates of the aggregates' intervals, and the profile's thresholds
AGGREGATE_REPS = 2000
PROFILE_POINTS = 41
AGGREGATE_COLUMNS = [
    "condition",
    "control",
    "seeds",
    "control_seeds",
    "iqm",
    "iqm_low",
    "iqm_high",
    "prob_improvement",
    "prob_improvement_low",
    "prob_improvement_high",
]
PROFILE_COLUMNS = ["condition", "tau", "fraction", "low", "high"]


@dataclass
class BenchmarkAnalysis:
    """The benchmarks' tables: ``verdicts`` (one row per benchmark x comparison: ``benchmark`` and
    the verdict columns), ``overall`` (one verdict row per comparison), ``aggregates`` (IQM and
    probability of improvement per condition, with intervals), ``profiles`` (each condition's
    performance profile), the per-benchmark ``family_size`` and ``level``, and each benchmark's
    ``noise_floor``, ``components`` and ``budget`` (the primary metric's frames with a leading
    ``benchmark`` column)."""

    benchmarks: list[BenchmarkMeta]
    verdicts: pd.DataFrame
    overall: pd.DataFrame
    aggregates: pd.DataFrame
    profiles: pd.DataFrame
    family_size: int
    level: float
    overall_level: float
    noise_floor: pd.DataFrame = field(default_factory=pd.DataFrame)
    components: pd.DataFrame = field(default_factory=pd.DataFrame)
    budget: pd.DataFrame = field(default_factory=pd.DataFrame)
    notes: list[str] = field(default_factory=list)


def benchmarks_of(results) -> list[BenchmarkMeta]:
    """The study's benchmarks (``meta.benchmarks``): name, metric and min_effect each."""
    return list(meta_of(results).benchmarks)


def _seed_matrix(scores: list[ArmScores]) -> pd.DataFrame:
    """Per seed (rows) each benchmark's value (columns), on the seeds every benchmark has."""
    return pd.concat([s.values for s in scores], axis=1, join="inner").sort_index()


def _prompt_term(pair: PairResult) -> float:
    """The arm x prompt part of a benchmark's difference variance: what its seed x prompt
    analysis adds over the trial means (0 for a trial-means test)."""
    d = pair.difference
    if d.test not in ("seed_prompt", stats.BINARY_TEST) or not d.testable:
        return 0.0
    return max(0.0, d.se**2 - d.se_trial_means**2)


def _overall_pair(
    condition: str,
    control: str,
    per_benchmark: list[PairResult],
    arm: list[ArmScores],
    base: list[ArmScores],
    seed_matched: bool,
) -> PairResult:
    a, c = _seed_matrix(arm), _seed_matrix(base)
    common = a.index.intersection(c.index)
    paired = seed_matched and len(common) >= MIN_SEEDS_FOR_TEST
    if paired:
        a, c = a.loc[common], c.loc[common]
    arm_mean = ArmScores(values=a.mean(axis=1), failed=max(s.failed for s in arm))
    base_mean = ArmScores(values=c.mean(axis=1), failed=max(s.failed for s in base))
    notes = []
    eval_only = [p.difference for p in per_benchmark if p.difference.test in stats.EVAL_ONLY_TESTS]
    if eval_only and len(eval_only) == len(per_benchmark):  # a side has one training run
        diff = stats.eval_only_mean(eval_only)
        notes.append(f"Mean of {len(eval_only)} eval-only benchmark differences, benchmarks fixed")
    elif min(len(a), len(c)) < MIN_SEEDS_FOR_TEST:
        why = f"needs at least {MIN_SEEDS_FOR_TEST} seeds per side with every benchmark scored"
        diff = stats.Difference(
            float(arm_mean.values.mean() - base_mean.values.mean()) if len(a) and len(c) else float("nan"),
            float("nan"),
            float("nan"),
            "benchmarks_mean",
            len(a),
            len(c),
            False,
            reason=why,
        )
    else:
        diff = stats.benchmarks_difference(
            a.to_numpy(),
            c.to_numpy(),
            paired=paired,
            prompt_terms=[_prompt_term(p) for p in per_benchmark],
            n_prompts=[max(p.difference.n_prompts, 2) for p in per_benchmark],
        )
        notes.append(f"Mean of {a.shape[1]} benchmark differences, benchmarks fixed")
    return PairResult(condition, control, OVERALL_METRIC, arm_mean, base_mean, paired, diff, None, notes)


def _aggregates(
    results, by_condition: dict[str, pd.DataFrame], direction: str, alpha: float, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """rliable's IQM (per condition), probability of improvement (each arm over its control) and
    performance profiles, each with its stratified bootstrap interval. For a metric to minimise
    the probability of improvement is P(arm below control) and profiles count scores below tau.
    ``seeds`` (``control_seeds``) is each side's seed count; where a side has fewer than
    ``MIN_SEEDS_FOR_AGGREGATE_INTERVAL`` the interval (and the profile's band) is NaN (none), not
    the zero-width one a bootstrap over one seed returns."""
    sign = 1.0 if direction == "maximize" else -1.0
    usable = {c: m for c, m in by_condition.items() if len(m)}
    rows = []
    for condition, matrix in usable.items():
        iqm = stats.stratified_interval("iqm", matrix.to_numpy(), reps=AGGREGATE_REPS, alpha=alpha, rng=seed)
        low, high = (iqm.low, iqm.high) if len(matrix) >= MIN_SEEDS_FOR_AGGREGATE_INTERVAL else (np.nan, np.nan)
        rows.append({"condition": condition, "seeds": len(matrix), "iqm": iqm.point, "iqm_low": low, "iqm_high": high})
    aggregates = pd.DataFrame(rows, columns=["condition", "seeds", "iqm", "iqm_low", "iqm_high"])
    poi = []
    for condition, control in comparisons_of(results):
        if condition in usable and control in usable:
            p = stats.stratified_interval(
                "probability_of_improvement",
                sign * usable[condition].to_numpy(),
                sign * usable[control].to_numpy(),
                reps=AGGREGATE_REPS,
                alpha=alpha,
                rng=seed,
            )
            both = min(len(usable[condition]), len(usable[control])) >= MIN_SEEDS_FOR_AGGREGATE_INTERVAL
            poi.append(
                {
                    "condition": condition,
                    "control": control,
                    "control_seeds": len(usable[control]),
                    "prob_improvement": p.point,
                    "prob_improvement_low": p.low if both else np.nan,
                    "prob_improvement_high": p.high if both else np.nan,
                }
            )
    poi_frame = pd.DataFrame(
        poi,
        columns=[
            "condition",
            "control",
            "control_seeds",
            "prob_improvement",
            "prob_improvement_low",
            "prob_improvement_high",
        ],
    )
    aggregates = aggregates.merge(poi_frame, on="condition", how="left")[AGGREGATE_COLUMNS]
    profiles = []
    if usable:
        values = np.concatenate([m.to_numpy().ravel() for m in usable.values()])
        taus = np.linspace(values.min(), values.max(), PROFILE_POINTS)
        for condition, matrix in usable.items():
            fraction, low, high = stats.stratified_bootstrap(
                "performance_profile",
                sign * matrix.to_numpy(),
                reps=AGGREGATE_REPS,
                alpha=alpha,
                rng=seed,
                taus=sign * taus,
            )
            if len(matrix) < MIN_SEEDS_FOR_AGGREGATE_INTERVAL:
                low, high = np.full_like(taus, np.nan), np.full_like(taus, np.nan)
            profiles.append(
                pd.DataFrame({"condition": condition, "tau": taus, "fraction": fraction, "low": low, "high": high})
            )
    profile_frame = pd.concat(profiles, ignore_index=True) if profiles else pd.DataFrame(columns=PROFILE_COLUMNS)
    return aggregates, profile_frame


def _benchmark_noise(
    results,
    benchmarks: list[BenchmarkMeta],
    scores: dict[str, dict[str, ArmScores]],
    pairs: dict[str, list[PairResult]],
    rules: DecisionRules,
    level: float,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Each benchmark's noise floor, noise by source and budget table, as the primary metric's are
    made, at the benchmarks' ``level`` and each benchmark's own planning effect, stacked with a
    leading ``benchmark`` column."""
    floors, components, budgets = [], [], []
    for b in benchmarks:
        margin = b.min_effect if b.min_effect is not None else rules.min_effect
        effect = planning_effect(margin, scores[b.name], rules.control)
        floor = noise_floor_table(
            results,
            b.metric,
            alpha=rules.alpha,
            power=rules.power,
            level=level,
            effect=effect,
            failures=rules.failures,
            scores=scores[b.name],
        )
        split = noise_split(
            b.metric,
            scores[b.name],
            level=level,
            effect=effect,
            margin=margin,
            power=rules.power,
            plan=typical_plan(pairs[b.name]),
        )
        floors.append(floor.assign(benchmark=b.name))
        components.append(split.components.assign(benchmark=b.name))
        budgets.append(split.budget.assign(benchmark=b.name))

    def stacked(frames: list[pd.DataFrame]) -> pd.DataFrame:
        frame = pd.concat(frames, ignore_index=True)
        return frame[["benchmark", *(c for c in frame.columns if c != "benchmark")]]

    return stacked(floors), stacked(components), stacked(budgets)


def analyze_benchmarks(results, rules: DecisionRules) -> BenchmarkAnalysis | None:
    """Every benchmark table of ``results`` (None when the study has no benchmarks), under
    ``rules`` (its ``min_effect``: the overall verdict's, and each benchmark's without its own)."""
    benchmarks = benchmarks_of(results)
    if not benchmarks:
        return None
    conds = conditions_of(results)
    scores = {b.name: {c: arm_scores(results, c, b.metric, failures=rules.failures) for c in conds} for b in benchmarks}
    pairs = {b.name: study_pairs(results, scores[b.name], replace(rules, metric=b.metric)) for b in benchmarks}
    family = sum(p.difference.testable for ps in pairs.values() for p in ps)
    frames = []
    for b in benchmarks:
        margin = b.min_effect if b.min_effect is not None else rules.min_effect
        rows, _ = verdict_rows(
            pairs[b.name],
            replace(rules, min_effect=margin),
            planning_effect=planning_effect(margin, scores[b.name], rules.control),
            family_size=family,
        )
        frames.append(rows.assign(benchmark=b.name, min_effect=margin))
    verdicts = pd.concat(frames, ignore_index=True)[["benchmark", *VERDICT_COLUMNS, "min_effect"]]

    seed_matched = meta_of(results).seed_matched
    overall_pairs = [
        _overall_pair(
            a,
            c,
            [next(p for p in pairs[b.name] if (p.condition, p.control) == (a, c)) for b in benchmarks],
            [scores[b.name][a] for b in benchmarks],
            [scores[b.name][c] for b in benchmarks],
            seed_matched,
        )
        for a, c in comparisons_of(results)
    ]
    overall_scores = {p.condition: p.arm for p in overall_pairs} | {p.control: p.base for p in overall_pairs}
    overall, _ = verdict_rows(
        overall_pairs, rules, planning_effect=planning_effect(rules.min_effect, overall_scores, rules.control)
    )
    by_condition = {c: _seed_matrix([scores[b.name][c] for b in benchmarks]) for c in conds}
    aggregates, profiles = _aggregates(results, by_condition, rules.direction, rules.alpha, rules.seed)
    overall_family = sum(p.difference.testable for p in overall_pairs)
    level = stats.interval_level(rules.alpha, family, rules.correction)
    noise_floor, components, budget = _benchmark_noise(results, benchmarks, scores, pairs, rules, level)
    notes = []
    untested = verdicts[verdicts["p_value"].isna()]
    if len(untested):
        notes.append(f"{len(untested)} benchmark comparison(s) could not be tested and are not in the family.")
    return BenchmarkAnalysis(
        benchmarks=benchmarks,
        verdicts=verdicts,
        overall=overall,
        aggregates=aggregates,
        profiles=profiles,
        family_size=family,
        level=level,
        overall_level=stats.interval_level(rules.alpha, overall_family, rules.correction),
        noise_floor=noise_floor,
        components=components,
        budget=budget,
        notes=notes,
    )
