"""The noise floor of each condition, and the noise split by source with what more budget buys.

Two seed spreads, named apart wherever they are shown: the **sd of trial means** (how much one
condition's trial results scatter across seeds, the noise-floor table; it carries the eval
prompts' sampling noise as well as the training seed's) and the **training-seed sd
(component)** (the training seed's own variance component, by method of moments on the seed x
prompt tables, the noise-by-source table and the header line). The first is expected to be the
larger.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness import stats
from harness.decide.comparisons import (
    SEEDS_SEARCH_LIMIT,
    ArmScores,
    PairResult,
    arm_scores,
)
from harness.decide.frames import MIN_SEEDS_FOR_TEST, check_metric, conditions_of

NOISE_COLUMNS = [
    "condition",
    "n",
    "failed",
    "mean",
    "std",
    "std_ci_low",
    "std_ci_high",
    "std_ci_method",
    "normality_p",
    "sem",
    "seeds_needed",
    "note",
]


def noise_floor_table(
    results,
    metric: str | None = None,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    level: float | None = None,
    effect: float | None = None,
    failures: str = "drop",
    scores: dict[str, ArmScores] | None = None,
) -> pd.DataFrame:
    """Per condition ``stats.noise_floor`` of ``metric`` (``std``: the sd of trial means);
    ``seeds_needed`` plans two arms of this sd at ``effect`` with intervals at ``level`` (the
    verdicts' level). ``scores``: each condition's scores on ``metric`` when the caller has read them already."""
    metric = check_metric(results, metric)
    rows = []
    for cond in conditions_of(results):
        scores_of = scores[cond] if scores is not None else arm_scores(results, cond, metric, failures=failures)
        v = scores_of.values
        note = ""
        if len(v) < MIN_SEEDS_FOR_TEST:
            note = (
                f"{len(v)} completed seed{'s' if len(v) != 1 else ''}: "
                f"an sd of trial means needs at least {MIN_SEEDS_FOR_TEST}"
            )
        if len(v) == 0:
            rows.append({"condition": cond, "n": 0, "failed": scores_of.failed, "note": note})
            continue
        nf = stats.noise_floor(v.to_numpy(), alpha=alpha, level=level, effect=effect, power=power)
        rows.append(
            {
                "condition": cond,
                "n": nf.n,
                "failed": scores_of.failed,
                "mean": nf.mean,
                "std": nf.std,
                "std_ci_low": nf.std_ci_low,
                "std_ci_high": nf.std_ci_high,
                "std_ci_method": nf.std_ci_method,
                "normality_p": nf.normality_p,
                "sem": nf.sem,
                "seeds_needed": nf.seeds_needed,
                "note": note,
            }
        )
    return pd.DataFrame(rows, columns=NOISE_COLUMNS)


COMPONENT_COLUMNS = ["source", "variance", "sd", "share", "note"]
BUDGET_COLUMNS = ["option", "seeds", "prompts", "samples", "se_diff"]
COMPONENT_NOTES = {
    "seed": "run-to-run spread (training seed): shrinks with more seeds per arm",
    "prompt": "prompt-to-prompt spread (some prompts are harder): shared by every arm on the same prompts, "
    "cancels in a difference",
    "arm x prompt": "does not cancel and does not shrink with seeds: shrinks with more eval prompts",
    "seed x prompt": "shrinks with seeds x prompts",
    "eval sampling": "sample-to-sample spread within a prompt (what verl's std@k measures), divided by the k "
    "samples averaged: shrinks with more eval samples per prompt",
    stats.COMBINED: "one sampled completion per prompt cannot tell the two apart: more eval samples shrink at "
    "most all of it, more seeds x prompts all of it",
}
ONE_RUN_NOTES = {
    "seed": "unknown: one training run per arm (a second seed per arm would measure it)",
    "prompt": COMPONENT_NOTES["prompt"],
    "arm x prompt": "does not cancel; with one run per arm it holds the seed x prompt part too",
    "eval sampling": COMPONENT_NOTES["eval sampling"],
}


@dataclass
class NoiseSplit:
    """The noise floor split by source, what more budget buys, and the one-line summary."""

    components: pd.DataFrame
    budget: pd.DataFrame
    line: str


def components_frame(parts: dict[str, float], total: float, notes: dict[str, str]) -> pd.DataFrame:
    """The noise-by-source table: each source's variance, sd and share of ``total``, with its note."""
    rows = [
        {
            "source": k,
            "variance": v,
            "sd": float(np.sqrt(v)),
            "share": v / total if total > 0 else np.nan,
            "note": notes[k],
        }
        for k, v in parts.items()
    ]
    return pd.DataFrame(rows, columns=COMPONENT_COLUMNS)


def typical_plan(pairs: list[PairResult]) -> stats.PlanVariance | None:
    """The variance model of a typical arm-vs-control difference of the study: the median of each
    component over its seed x prompt comparisons (robust to one arm unlike the others), paired
    when they all are. None without a seed x prompt comparison."""
    plans = [
        p.difference.plan
        for p in pairs
        if p.difference.testable
        and p.difference.plan is not None
        and p.difference.test in ("seed_prompt", stats.BINARY_TEST)
    ]
    if not plans:
        return None
    median = {k: float(np.median([getattr(q, k) for q in plans])) for k in ("seed", "prompt", "residual", "sampling")}
    return stats.PlanVariance(
        **median, n_prompts=plans[0].n_prompts, samples=plans[0].samples, paired=all(q.paired for q in plans)
    )


def noise_split(
    metric: str,
    scores: dict[str, ArmScores],
    *,
    level: float,
    effect: float | None,
    margin: float | None,
    power: float,
    plan: stats.PlanVariance | None = None,
) -> NoiseSplit:
    """Variance components over every condition's ``[seed, prompt]`` table (on their common
    prompts), the predicted SE of a difference at more budget, and the report's one-liner.
    ``plan`` is the difference to predict (default: two unpaired arms with these components)."""
    tables = {c: s.table for c, s in scores.items() if s.table is not None and len(s.table) >= MIN_SEEDS_FOR_TEST}
    prompts = [set(t.columns) for t in tables.values()]
    common = sorted(set.intersection(*prompts)) if prompts else []
    one_run = one_run_split(metric, scores) if not tables else None
    if one_run is not None:
        return one_run
    if len(common) < 2:
        return _unsplit(metric, scores)
    sample_vars = [s.sample_var for s in scores.values() if s.sample_var is not None]
    comps = stats.variance_components(
        {c: t[common].to_numpy() for c, t in tables.items()},
        sample_var=float(np.mean(sample_vars)) if sample_vars else None,
        samples=min(s.samples for c, s in scores.items() if c in tables),
        sampled=any(scores[c].sampled for c in tables),
    )
    by_source = comps.by_source()
    components = components_frame(by_source, sum(by_source.values()), COMPONENT_NOTES)
    plan = plan or comps.as_plan(paired=False)
    line = _split_line(metric, comps)
    if effect:
        line += " " + _seeds_line(effect, comps, plan, level=level, power=power, margin=margin)
    return NoiseSplit(components, budget_table(comps, plan), line)


def _unsplit(metric: str, scores: dict[str, ArmScores]) -> NoiseSplit:
    """Without per-prompt scores on common prompts: the sd of trial means alone (nothing when no
    condition has two seeds)."""
    empty = NoiseSplit(pd.DataFrame(columns=COMPONENT_COLUMNS), pd.DataFrame(columns=BUDGET_COLUMNS), "")
    trial_sds = [float(s.values.std(ddof=1)) for s in scores.values() if len(s.values) >= MIN_SEEDS_FOR_TEST]
    if not trial_sds:
        return empty
    sd = float(np.sqrt(np.mean(np.square(trial_sds))))
    empty.line = (
        f"Noise floor of {metric}: sd of trial means {sd:.3g} (root mean square over the "
        "conditions; no per-prompt scores recorded, so it cannot be split by source)."
    )
    return empty


def budget_table(comps: stats.Components, plan: stats.PlanVariance) -> pd.DataFrame:
    """The predicted SE of a difference as run and with one more seed, twice the prompts or
    twice the eval samples (at best, where sampling cannot be told from the residual)."""
    n = max(MIN_SEEDS_FOR_TEST, int(round(comps.seeds)))
    P, k = comps.n_prompts, comps.samples
    options = [
        ("as run", n, P, k, plan),
        ("+1 seed per arm", n + 1, P, k, plan),
        ("2x eval prompts", n, 2 * P, k, plan),
    ]
    if comps.separable and (k > 1 or comps.eval_sampling > 0):
        options.append(("2x eval samples", n, P, 2 * k, plan))
    elif not comps.separable:  # k = 1: the best case, all of the combined residual being sampling
        best = dataclasses.replace(plan, residual=0.0, sampling=plan.residual + plan.sampling)
        options.append(("2x eval samples (at best)", n, P, 2 * k, best))
    return pd.DataFrame(
        [
            {"option": o, "seeds": s, "prompts": p, "samples": q, "se_diff": float(np.sqrt(v.variance(s, p, q)))}
            for o, s, p, q, v in options
        ],
        columns=BUDGET_COLUMNS,
    )


def _split_line(metric: str, comps: stats.Components) -> str:
    """The noise floor in words: the training-seed sd and the prompt sd of an arm's mean."""
    n = max(MIN_SEEDS_FOR_TEST, int(round(comps.seeds)))
    P = comps.n_prompts
    seed = (
        f"training-seed sd (component) {np.sqrt(comps.seed):.3g}"
        if comps.seed > 0
        else f"training-seed sd (component) 0 (at {n} seeds the spread of the arms' trial means is no more than "
        "their per-prompt noise explains; it is estimated, not known to be 0)"
    )
    return (
        f"Noise floor of {metric}: {seed}, prompt sd "
        f"{np.sqrt((comps.prompt + comps.arm_x_prompt) / P):.3g} of an arm's mean at {P} prompts "
        f"(arm x prompt {np.sqrt(comps.arm_x_prompt / P):.3g} of it does not cancel between arms)."
    )


def _seeds_line(
    effect: float,
    comps: stats.Components,
    plan: stats.PlanVariance,
    *,
    level: float,
    power: float,
    margin: float | None,
) -> str:
    """The seeds per arm that decide a difference of ``effect``, at the prompts run and at 4x."""
    P, needs = comps.n_prompts, []
    for prompts_n in (P, 4 * P):
        scaled = dataclasses.replace(plan, n_prompts=prompts_n)
        need = stats.seeds_to_decide(effect, scaled, level=level, power=power, margin=margin, max_n=SEEDS_SEARCH_LIMIT)
        needs.append(
            f"{need} seeds per arm at {prompts_n} prompts"
            if need
            else f"more than {SEEDS_SEARCH_LIMIT} seeds per arm at {prompts_n} prompts"
        )
    return f"A {effect:.3g} difference is decided with {power:.0%} probability with {needs[0]}, or {needs[1]}."


def one_run_split(metric: str, scores: dict[str, ArmScores]) -> NoiseSplit | None:
    """What one training run per arm can split (``stats.one_run_components``): the prompt, the
    arm x prompt (with seed x prompt) and eval-sampling parts, the training seed's part shown as
    unknown, and the predicted SE of an eval-only difference at more prompts or samples. None
    without per-prompt scores of 2 arms on 2 common prompts."""
    tables = {c: s.table for c, s in scores.items() if s.table is not None}
    if len(tables) < 2:
        return None
    common = sorted(set.intersection(*(set(t.columns) for t in tables.values())))
    if len(common) < 2:
        return None
    sample_vars = [s.sample_var for c, s in scores.items() if c in tables and s.sample_var is not None]
    samples = min(s.samples for c, s in scores.items() if c in tables)
    comps = stats.one_run_components(
        np.stack([t[common].to_numpy().mean(axis=0) for t in tables.values()]),
        sample_var=float(np.mean(sample_vars)) if sample_vars else None,
        samples=samples,
    )
    parts = {"seed": np.nan, "prompt": comps.prompt, "arm x prompt": comps.arm_x_prompt}
    parts["eval sampling"] = comps.eval_sampling
    known = comps.prompt + comps.arm_x_prompt + comps.eval_sampling
    components = components_frame(parts, known, ONE_RUN_NOTES)
    split = comps.difference_split()
    P, k = comps.n_prompts, comps.samples
    options = [("as run", 1, P, k), ("2x eval prompts", 1, 2 * P, k)]
    if k > 1 or comps.eval_sampling > 0:
        options.append(("2x eval samples", 1, P, 2 * k))
    budget = pd.DataFrame(
        [{"option": o, "seeds": n, "prompts": p, "samples": q, "se_diff": split.se(p, q)} for o, n, p, q in options],
        columns=BUDGET_COLUMNS,
    )
    line = (
        f"Noise floor of {metric} from one training run per arm (the training seed's part is unknown; "
        "the shares are of the parts that can be told apart): prompt sd "
        f"{np.sqrt((comps.prompt + comps.arm_x_prompt) / P):.3g} of an arm's mean at {P} prompts (arm x prompt, "
        f"with seed x prompt, {np.sqrt(comps.arm_x_prompt / P):.3g} of it does not cancel between arms)"
        + (f", eval sampling sd {np.sqrt(comps.eval_sampling / P):.3g}" if comps.eval_sampling > 0 else "")
        + "."
    )
    return NoiseSplit(components, budget, line)
