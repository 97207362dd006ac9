"""The held-out benchmarks' display tables: the overall verdicts, the benchmarks x comparisons
verdicts and rliable's aggregates, each at one level, and their report sections."""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.decide.analysis import Analysis
from harness.decide.benchmarks import EVAL_ONLY_OVERALL_TEST, MIN_SEEDS_FOR_AGGREGATE_INTERVAL
from harness.report.cells import DASH, Section, fmt, fmt_ci, fmt_level, fmt_pct, verdict_label


def _verdict_cell(r) -> str:
    """``+0.058 [0.044, 0.073] better``: a verdict row in one cell."""
    return f"{fmt(r['diff'])} {fmt_ci(r['ci_low'], r['ci_high'])} {verdict_label(r)}"


def benchmark_verdicts_display(analysis: Analysis) -> pd.DataFrame:
    """Benchmarks (rows) x comparisons (columns): each cell the difference, its interval and
    the verdict, all at the benchmarks' level (the overall verdicts, at theirs, are a table of
    their own)."""
    b = analysis.benchmarks
    columns = [f"{c} vs {k}" for c, k in zip(b.overall["condition"], b.overall["control"])]
    rows = []
    for bench in b.benchmarks:
        v = b.verdicts[b.verdicts["benchmark"] == bench.name]
        margin = v["min_effect"].iloc[0] if len(v) else None
        rows.append(
            {
                "benchmark": bench.name,
                "metric": bench.metric,
                "min_effect": fmt(margin),
                **{col: _verdict_cell(r) for col, (_, r) in zip(columns, v.iterrows())},
            }
        )
    return pd.DataFrame(rows, columns=["benchmark", "metric", "min_effect", *columns])


def benchmark_overall_display(analysis: Analysis) -> pd.DataFrame:
    """Per comparison: the overall verdict on the mean over benchmarks."""
    return pd.DataFrame(
        [
            {
                "condition": r["condition"],
                "control": r["control"],
                "mean difference": fmt(r["diff"]),
                "interval": fmt_ci(r["ci_low"], r["ci_high"]),
                "level": fmt_level(r["ci_level"]),
                "test": r["test"] if isinstance(r["test"], str) else DASH,
                "verdict": verdict_label(r),
            }
            for _, r in analysis.benchmarks.overall.iterrows()
        ],
        columns=["condition", "control", "mean difference", "interval", "level", "test", "verdict"],
    )


def _no_interval(seeds: int) -> str:
    return f"no interval: {fmt(seeds)} seed{'s' if seeds != 1 else ''}"


def benchmark_aggregates_display(analysis: Analysis) -> pd.DataFrame:
    """Per comparison: rliable's IQM of each side and the probability of improvement, with their
    bootstrap intervals, or where a side has too few seeds for one, no interval and why."""
    b = analysis.benchmarks
    aggregates = b.aggregates.set_index("condition")

    def iqm(cond: str) -> str:
        if cond not in aggregates.index:
            return DASH
        a = aggregates.loc[cond]
        if int(a["seeds"]) < MIN_SEEDS_FOR_AGGREGATE_INTERVAL:
            return f"{fmt(a['iqm'])} ({_no_interval(int(a['seeds']))})"
        return f"{fmt(a['iqm'])} {fmt_ci(a['iqm_low'], a['iqm_high'])}"

    def improvement(cond: str) -> str:
        if cond not in aggregates.index or not np.isfinite(aggregates.loc[cond, "prob_improvement"]):
            return DASH
        a = aggregates.loc[cond]
        fewest = min(int(a["seeds"]), int(a["control_seeds"]))
        if fewest < MIN_SEEDS_FOR_AGGREGATE_INTERVAL:
            return f"{fmt(a['prob_improvement'], 3)} (no interval: {fmt(fewest)} seed on a side)"
        return f"{fmt(a['prob_improvement'], 3)} {fmt_ci(a['prob_improvement_low'], a['prob_improvement_high'])}"

    return pd.DataFrame(
        [
            {
                "condition": r["condition"],
                "control": r["control"],
                "IQM": iqm(r["condition"]),
                "control IQM": iqm(r["control"]),
                "P(improvement)": improvement(r["condition"]),
            }
            for _, r in b.overall.iterrows()
        ],
        columns=["condition", "control", "IQM", "control IQM", "P(improvement)"],
    )


def _comparisons(rows: pd.DataFrame) -> str:
    return ", ".join(f"{c} vs {k}" for c, k in zip(rows["condition"], rows["control"]))


def overall_method(test: str, paired: bool) -> str:
    """How an overall verdict of this test was reached, in words."""
    if test == EVAL_ONLY_OVERALL_TEST:
        return (
            "the mean of the benchmarks' eval-only differences, each over its own prompts (the benchmarks "
            "taken as fixed, their prompts independent; a side has one training run, so the verdict is "
            "conditional on these checkpoints and says nothing about another training run of the arm)"
        )
    return (
        "each seed's scores averaged over the benchmarks, then the "
        f"{'paired t over seeds' if paired else 'Welch t over seeds'}, plus each benchmark's arm x prompt term "
        "(the benchmarks taken as fixed)"
    )


def overall_methods(overall: pd.DataFrame) -> str:
    """The methods the overall verdicts used: one sentence when they share one, else each named
    with the comparisons it decided."""
    groups = list(overall.groupby(["test", "paired"], sort=False))
    if len(groups) == 1:
        (test, paired), _ = groups[0]
        method = overall_method(test, bool(paired))
        return method[0].upper() + method[1:] + "."
    return " ".join(f"{_comparisons(rows)}: {overall_method(test, bool(paired))}." for (test, paired), rows in groups)


def _overall_caption(analysis: Analysis) -> str:
    b, h = analysis.benchmarks, analysis.header
    testable = int(np.isfinite(b.overall["p_value"]).sum())
    family = (
        f"Bonferroni over the {testable} testable comparison{'s' if testable != 1 else ''}, so the overall "
        f"verdicts hold together with probability at least {1 - h['alpha']:.0%}"
        if h["correction"] == "bonferroni"
        else "each comparison alone (correction: none)"
    )
    return (
        f"The pre-registered overall verdict of each comparison: the mean over the {len(b.benchmarks)} "
        f"benchmarks of the arm-minus-control differences, against the study's min_effect. Intervals at "
        f"{fmt_level(b.overall_level)} ({family}). " + overall_methods(b.overall)
    )


def _benchmark_caption(analysis: Analysis) -> str:
    b, h = analysis.benchmarks, analysis.header
    family = (
        f"Bonferroni over the {b.family_size} testable comparisons x benchmarks, so all these verdicts hold "
        f"together with probability at least {1 - h['alpha']:.0%}"
        if h["correction"] == "bonferroni"
        else "each comparison alone (correction: none): the verdicts do not hold together"
    )
    return (
        f"Each comparison on each held-out benchmark, with the study's primary test and the benchmark's "
        f"min_effect (else the study's). Intervals at {fmt_level(b.level)} ({family}). The overall verdicts "
        "are in the table above, at their own level."
    )


def _untested(verdicts: pd.DataFrame) -> list[str]:
    """Why each untested verdict row (no p-value) could not be tested, named by its benchmark."""
    return [
        f"{r['benchmark']}: {r['condition']} vs {r['control']}: {r['reason']}"
        for _, r in verdicts.iterrows()
        if not np.isfinite(r["p_value"])
    ]


def benchmark_sections(analysis: Analysis) -> list[Section]:
    """The held-out benchmarks' tables (none without benchmarks): the overall verdicts, the verdicts
    by benchmark and the aggregates, each table at one level, stated in its caption."""
    b = analysis.benchmarks
    if b is None:
        return []
    pct = fmt_pct(analysis.header["alpha"])
    return [
        Section(
            "benchmarks-overall",
            "Overall verdicts across benchmarks",
            benchmark_overall_display(analysis),
            _overall_caption(analysis),
            _untested(b.overall.assign(benchmark="overall")),
        ),
        Section(
            "benchmarks",
            "Verdicts by benchmark",
            benchmark_verdicts_display(analysis),
            _benchmark_caption(analysis),
            [*b.notes, *_untested(b.verdicts)],
        ),
        Section(
            "benchmarks-aggregates",
            "Aggregates across benchmarks",
            benchmark_aggregates_display(analysis),
            "rliable's descriptive aggregates over each condition's seeds x benchmarks scores: the interquartile "
            "mean (IQM) and the probability that a seed of the arm beats a seed of the control on a benchmark, "
            f"averaged over benchmarks. Intervals at {pct}: stratified bootstrap (seeds resampled within each "
            "benchmark; too narrow to decide on at a few seeds: the verdicts read the t intervals). With one seed "
            "a side has no interval: every resample is that seed.",
        ),
    ]
