"""Build the report's tables from a ``Results`` object and ``harness.stats``.

Nothing here computes a statistic of its own: every mean, interval, p-value, effect size and
seed count comes from ``harness.stats``. This module puts together the tables of
``comparisons`` (verdicts, robustness), ``noise`` (noise floor, noise by source),
``trial_warnings``, ``calibration``, ``sequential`` (a sequential study's looks) and its own per-condition,
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
    ArmScores,
    arm_scores,
    compare_values,
    planning_effect,
    study_pairs,
    verdict_rows,
)
from harness.decide.compute_budget import at_point, point_line, shortfall_notes
from harness.decide.frames import (
    check_condition,
    check_metric,
    comparisons_of,
    completed,
    conditions_of,
    meta_of,
    seed_values,
    study_name,
)
from harness.decide.noise import noise_floor_table, noise_split, typical_plan
from harness.decide.overoptimisation import overoptimisation_frame
from harness.decide.rules import DecisionRules, ReadOptions
from harness.decide.scaling import Scaling, scaling_analysis
from harness.decide.sequential.compute import ComputeReplay, replay_compute_looks, verdicts_under_looks
from harness.decide.sequential.replay import Replay, design_line, final_pairs, replay
from harness.decide.sequential.versions import RuleVersions, read_rules, versions_line
from harness.decide.trial_warnings import mark_no_learning_signal, warning_state
from harness.errors import unknown_name
from harness.tracking.segments import PAUSED
from harness.version import __version__

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
    wanted = [meta_of(results).primary_metric, *DEFAULT_CURVE_METRICS]
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


@dataclass(frozen=True)
class HeaderFacts:
    """What the decisions found that the header states besides the rules."""

    planning_effect: float | None = None
    noise_line: str = ""
    level: float | None = None  # the verdicts' interval level (None: 1 - alpha)
    failed_by_condition: dict[str, int] = field(default_factory=dict)
    design: str = ""  # a sequential study: its looks and where it stands
    rule: str = ""  # a sequential study: the rule its looks were read under
    tripwires: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TrialCounts:
    total: int
    completed: int
    failed: int
    pending: int  # running or waiting
    paused: int = 0  # a compute-look study's trials at a look: their arm stopped there, or their next segment to come

    @classmethod
    def of(cls, trials: pd.DataFrame) -> TrialCounts:
        status = trials["status"].value_counts() if len(trials) else pd.Series(dtype=int)
        pending = int(status.get("running", 0)) + int(status.get("waiting", 0))
        completed, failed = int(status.get("completed", 0)), int(status.get("failed", 0))
        return cls(len(trials), completed, failed, pending, int(status.get(PAUSED, 0)))

    def line(self) -> str:
        """The header's count of the trials, by state."""
        paused = f"{self.paused} paused at a compute look, " if self.paused else ""
        pending = f"{self.pending} running/waiting"
        return f"{self.completed} completed, {self.failed} failed, {pending}, {paused}{self.total} in all"


def state_lines(results, rules: DecisionRules, facts: HeaderFacts, counts: TrialCounts) -> list[str]:
    """The header's warnings, most urgent first: an A/A tripwire, trials still running or no
    results, trials of an earlier design, no min_effect, failed trials, the trials' own warnings."""
    state = list(facts.tripwires)
    if counts.pending:
        state.append(
            f"STILL RUNNING: {counts.pending} of {counts.total} trials are still running or waiting; "
            + (
                f"this report is drawn from the {counts.completed} completed trials only and will change."
                if counts.completed
                else "none has completed yet, so there is nothing to compare."
            )
        )
    elif counts.completed == 0:
        state.append(
            f"NO RESULTS: none of the {counts.total} trials completed; there is nothing to compare."
            if counts.total
            else "NO RESULTS: the study has no trials yet."
        )
    state += [
        f"{line}: the study file changed since they ran, so they are kept on disk but left out of "
        "every table and figure."
        for line in meta_of(results).earlier_design
    ]
    if rules.min_effect is None:
        effect = facts.planning_effect
        planned = f" Seeds needed are planned at one sd of trial means ({effect:.3g})." if effect else ""
        state.append(
            "NO MIN_EFFECT: the study names no smallest effect of interest, so no comparison can be "
            f"called equivalent (only better, worse or inconclusive).{planned} Set min_effect "
            "beside primary_metric in the study file, or pass --min-effect."
        )
    if counts.failed:
        state.append(_failed_line(counts.failed, facts.failed_by_condition, rules.failures))
    return state + warning_state(results)


def _failed_line(n_failed: int, by_condition: dict[str, int], failures: str) -> str:
    per = ", ".join(f"{c} {n}" for c, n in by_condition.items() if n)
    return (
        f"{n_failed} trial{'s' if n_failed != 1 else ''} failed ({per}); "
        + (
            "each is scored at the metric's worst value (failures: worst)"
            if failures == "worst"
            else f"{'they are' if n_failed != 1 else 'it is'} left out of the statistics (failures: drop; "
            "this favours an arm whose bad seeds crash)"
        )
        + "; each is listed with its reason under 'Failed trials'."
    )


def build_header(results, rules: DecisionRules, facts: HeaderFacts | None = None) -> dict[str, Any]:
    """The report's header: what was compared, under which rules, and the state lines."""
    facts = facts or HeaderFacts()
    meta = meta_of(results)
    trials = results.trials
    counts = TrialCounts.of(trials)
    seeds = meta.seeds or (sorted(trials["seed"].dropna().unique().tolist()) if len(trials) else [])
    return {
        "study": study_name(results),
        "description": meta.description,
        "comparisons": [f"{a} vs {b}" for a, b in comparisons_of(results)],
        "source": meta.source,  # results judged from elsewhere: the table or logs they were read from
        "conditions": conditions_of(results),
        "primary_metric": meta.primary_metric,
        # where the primary comparison reads each trial, when not at its final evaluation
        "primary_at": point_line(results, meta.primary_metric),
        "direction": rules.direction,
        "control": meta.control,
        "seeds": list(seeds),
        "seed_matched": meta.seed_matched,
        "design": facts.design or f"fixed, {len(meta.seeds)} seeds per arm",
        "sequential": bool(facts.design) and meta.compute_looks is None,
        "compute_looks": meta.compute_looks is not None,
        "rule": facts.rule,  # a sequential study: the rule its looks were read under
        "correction": rules.correction,
        "alpha": rules.alpha,
        "ci_level": facts.level if facts.level is not None else 1 - rules.alpha,
        "min_effect": rules.min_effect,
        "planning_effect": facts.planning_effect,
        "test": rules.test,
        "failures": rules.failures,
        "noise_line": facts.noise_line,
        "metric_ranges": dict(meta.metric_ranges),
        "harness_version": meta.harness_version or "unknown",
        "git_commit": meta.git_commit or "unknown",
        "report_harness_version": __version__,
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "n_trials": counts.total,
        "n_completed": counts.completed,
        "n_failed": counts.failed,
        "n_pending": counts.pending,
        "trials_line": counts.line(),
        "complete": counts.completed == counts.total,
        "state": state_lines(results, rules, facts, counts),
    }


# ----------------------------------------------------------------------------- entry points


def decision_rules(results, options: ReadOptions | None = None, *, metric: str | None = None) -> DecisionRules:
    """The rules ``results`` are decided under (``options``: a command's; None: the defaults),
    on ``metric`` (default: the primary one), every name checked."""
    metric = check_metric(results, metric)
    for cond in (c for pair in comparisons_of(results) for c in pair):
        check_condition(results, cond)
    return DecisionRules.of(meta_of(results), options, metric=metric)


@dataclass(frozen=True)
class Decided:
    """The pre-registered comparisons, decided: each pair as read, the verdict tables, and for a
    sequential study its replay (None for a fixed design)."""

    pairs: list
    verdicts: pd.DataFrame
    robustness: pd.DataFrame
    planning_effect: float | None
    level: float
    replay: Replay | None
    compute: ComputeReplay | None = None  # a compute-look study's looks
    compute_rules: RuleVersions | None = None  # the rule a compute-look study's looks are read under

    @property
    def rule(self) -> str:
        """The header's line on the rule the looks are read under ("" for a fixed design)."""
        rules = self.replay.rules if self.replay is not None else self.compute_rules
        return versions_line(rules) if rules is not None else ""

    @property
    def design(self) -> str:
        """The header's line on the looks: a sequential or compute-look study's ("" for a fixed design)."""
        if self.replay is not None:
            return design_line(self.replay)
        return self.compute.line() if self.compute is not None else ""

    @property
    def looks(self) -> pd.DataFrame:
        """Each comparison at every look it was read at (empty for a fixed design)."""
        if self.replay is not None:
            return self.replay.table
        return self.compute.table if self.compute is not None else pd.DataFrame()


def decide_comparisons(results, scores: dict[str, ArmScores], rules: DecisionRules) -> Decided:
    """Every pre-registered comparison on the study's metric: at once (a fixed design), or look
    by look, each on the seeds of the look that decided it (a sequential study)."""
    pairs = study_pairs(results, scores, rules)
    effect = planning_effect(rules.min_effect, scores, rules.control)
    level = stats.interval_level(rules.alpha, sum(p.difference.testable for p in pairs), rules.correction)
    rep, looks = None, None
    if meta_of(results).sequential:
        rep = replay(results, scores, rules)
        pairs, looks = final_pairs(rep, results, scores, rules)
    verdicts, robustness = verdict_rows(
        pairs,
        rules,
        planning_effect=effect,
        looks=looks,
        family_size=len(pairs) if looks is not None else None,
    )
    compute, compute_rules = None, None
    if meta_of(results).compute_looks:
        compute_rules = read_rules(results, rules)  # options or a study file that change the rule are refused
        compute = replay_compute_looks(results, rules)
        verdicts = verdicts_under_looks(verdicts, compute)
    return Decided(
        pairs, mark_no_learning_signal(verdicts, results), robustness, effect, level, rep, compute, compute_rules
    )


def trial_lists(trials: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The failed trials with their reasons, and the trials still running or waiting."""
    failed = trials[trials["status"] == "failed"][["trial_id", "arm", "seed", "error"]].reset_index(drop=True)
    failed["error"] = failed["error"].fillna("(no reason recorded)")
    pending = trials[trials["status"].isin(["running", "waiting"])][["trial_id", "arm", "seed", "status"]]
    return failed, pending.reset_index(drop=True)


def all_curves(results, requested: list[str] | None, alpha: float) -> dict[tuple[str, str], pd.DataFrame]:
    """The learning-curve bands of each curve metric, by step and by tokens (those with data)."""
    out = {}
    for m in curve_metrics_of(results, requested):
        for x in ("step", "tokens"):
            band = curve_bands(results, m, x=x, alpha=alpha)
            if len(band):
                out[(m, x)] = band
    return out


def analyze(results, options: ReadOptions | None = None, *, curve_metrics: list[str] | None = None) -> Analysis:
    """All of a report's tables for ``results``, read under ``options`` (a command's: alpha,
    correction, power, a ``min_effect`` overriding the study's, the permutation tests' draws and
    seed; None: the defaults); statistics from ``harness.stats``."""
    rules = decision_rules(results, options)
    trials = results.trials.copy()
    conds = conditions_of(results)
    scores = {c: arm_scores(results, c, rules.metric, failures=rules.failures) for c in conds}
    decided = decide_comparisons(results, scores, rules)
    calibration = calibration_table(results, scores, rules)
    split = noise_split(
        rules.metric,
        scores,
        level=decided.level,
        effect=decided.planning_effect,
        margin=rules.min_effect,
        power=rules.power,
        plan=typical_plan(decided.pairs),
    )
    facts = HeaderFacts(
        planning_effect=decided.planning_effect,
        noise_line=split.line,
        level=decided.level,
        failed_by_condition={c: s.failed for c, s in scores.items()},
        design=decided.design,
        rule=decided.rule,
        tripwires=tripwire_state(calibration),
    )
    failed, pending = trial_lists(trials)
    analysis = Analysis(
        header=build_header(results, rules, facts),
        conditions=condition_table(results, rules.metric, alpha=rules.alpha),
        seed_values=primary_seed_values(results, rules.metric),
        verdicts=decided.verdicts,
        robustness=decided.robustness,
        noise_floor=noise_floor_table(
            results,
            rules.metric,
            alpha=rules.alpha,
            power=rules.power,
            level=decided.level,
            effect=decided.planning_effect,
            failures=rules.failures,
            scores=scores,
        ),
        cost=cost_table(trials, conds),
        failed=failed,
        pending=pending,
        config_diff=config_diff_table(trials, conds),
        trials=trials.sort_values(["arm", "seed"], kind="stable").reset_index(drop=True),
        components=split.components,
        budget=split.budget,
        looks=decided.looks,
        calibration=calibration,
        overoptimisation=overoptimisation_frame(results),
        benchmarks=analyze_benchmarks(results, rules),
        scaling=scaling_analysis(results, rules),
        curves=all_curves(results, curve_metrics, rules.alpha),
    )
    analysis.notes += meta_of(results).input_notes + shortfall_notes(results, rules.metric)
    untested = decided.verdicts[decided.verdicts["p_value"].isna()]
    if len(untested):
        analysis.notes.append(
            f"{len(untested)} comparison(s) could not be tested and are not in the {rules.correction} family."
        )
    return analysis


def compare_pair(
    results, arm_a: str, arm_b: str, *, metric: str | None = None, options: ReadOptions | None = None
) -> dict[str, Any]:
    """``arm_a`` vs ``arm_b`` (as control) on ``metric``; the same numbers the report shows.

    A pre-registered comparison on the primary metric takes its verdict from the full verdict
    table (its interval at the family's level); any other pair is tested alone (a family of one,
    and it says so).
    """
    options = options or ReadOptions()
    check_condition(results, arm_a)
    check_condition(results, arm_b)
    rules = DecisionRules.of(meta_of(results), options, metric=check_metric(results, metric))
    pre_registered = (arm_a, arm_b) in comparisons_of(results) and rules.metric == meta_of(results).primary_metric
    if pre_registered:
        analysis = analyze(results, options, curve_metrics=[])
        v = analysis.verdicts
        row = v[(v["condition"] == arm_a) & (v["control"] == arm_b)].iloc[0].to_dict()
        r = analysis.robustness
        checks = r[(r["condition"] == arm_a) & (r["control"] == arm_b)]
        family = f"{rules.correction} over the {len(v)} pre-registered comparisons"
    else:
        pair = compare_values(
            results,
            arm_a,
            arm_b,
            rules.metric,
            test=rules.test,
            failures=rules.failures,
            n_permutations=rules.n_permutations,
            seed=rules.seed,
        )
        effect = planning_effect(rules.min_effect, {arm_a: pair.arm, arm_b: pair.base}, arm_b)
        verdicts, checks = verdict_rows([pair], rules, planning_effect=effect)
        row = mark_no_learning_signal(verdicts, results).iloc[0].to_dict()
        family = "none: not a pre-registered comparison on the primary metric (tested alone)"
    row["direction"] = rules.direction
    row["correction"] = family
    row["min_effect"] = rules.min_effect
    row["pre_registered"] = pre_registered
    row["robustness"] = checks.drop(columns=["condition", "control"]).to_dict(orient="records")
    return row
