"""The held-out benchmarks' display tables: the benchmarks x comparisons verdicts, the overall
verdicts beside rliable's aggregates, and their report sections."""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.decide.analysis import Analysis
from harness.report.cells import DASH, Section, fmt, fmt_ci, fmt_level, fmt_pct, verdict_label


def _verdict_cell(r) -> str:
    """``+0.058 [0.044, 0.073] better``: a verdict row in one cell."""
    return f"{fmt(r['diff'])} {fmt_ci(r['ci_low'], r['ci_high'])} {verdict_label(r)}"


def benchmark_verdicts_display(analysis: Analysis) -> pd.DataFrame:
    """Benchmarks (rows) x comparisons (columns): each cell the difference, its interval and
    the verdict; the last row the overall verdict on the mean over benchmarks."""
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
    rows.append(
        {
            "benchmark": "overall (mean of the differences)",
            "metric": "—",
            "min_effect": fmt(analysis.header["min_effect"]),
            **{col: _verdict_cell(r) for col, (_, r) in zip(columns, b.overall.iterrows())},
        }
    )
    return pd.DataFrame(rows, columns=["benchmark", "metric", "min_effect", *columns])


def benchmark_overall_display(analysis: Analysis) -> pd.DataFrame:
    """Per comparison: the overall verdict, and beside it rliable's IQM of each side and the
    probability of improvement, with their bootstrap intervals."""
    b = analysis.benchmarks
    aggregates = b.aggregates.set_index("condition")

    def iqm(cond: str) -> str:
        if cond not in aggregates.index:
            return DASH
        a = aggregates.loc[cond]
        return f"{fmt(a['iqm'])} {fmt_ci(a['iqm_low'], a['iqm_high'])}"

    rows = []
    for _, r in b.overall.iterrows():
        poi = aggregates.loc[r["condition"]] if r["condition"] in aggregates.index else None
        if poi is None:
            poi_text = DASH
        else:
            interval = fmt_ci(poi["prob_improvement_low"], poi["prob_improvement_high"])
            poi_text = f"{fmt(poi['prob_improvement'], 3)} {interval}"
        rows.append(
            {
                "condition": r["condition"],
                "control": r["control"],
                "mean difference": fmt(r["diff"]),
                "interval": fmt_ci(r["ci_low"], r["ci_high"]),
                "level": fmt_level(r["ci_level"]),
                "verdict": verdict_label(r),
                "IQM": iqm(r["condition"]),
                "control IQM": iqm(r["control"]),
                "P(improvement)": poi_text,
            }
        )
    return pd.DataFrame(rows)


def _benchmark_caption(analysis: Analysis) -> str:
    b, h = analysis.benchmarks, analysis.header
    return (
        f"Each comparison on each held-out benchmark, with the study's primary test and the benchmark's "
        f"min_effect (else the study's). Intervals at {fmt_level(b.level)}: Bonferroni over the "
        f"{b.family_size} testable comparisons x benchmarks, so all these verdicts hold together with "
        f"probability at least {1 - h['alpha']:.0%}. The last row is the pre-registered overall verdict: the "
        "mean of the benchmark differences, the benchmarks taken as fixed (each seed's scores averaged over "
        f"the benchmarks, then the same paired test, plus each benchmark's arm x prompt term), at "
        f"{fmt_level(b.overall_level)} over the comparisons, against the study's min_effect."
    )


def benchmark_sections(analysis: Analysis) -> list[Section]:
    """The held-out benchmarks' tables (none without benchmarks)."""
    b = analysis.benchmarks
    if b is None:
        return []
    reasons = [
        f"{r['benchmark']}: {r['condition']} vs {r['control']}: {r['reason']}"
        for _, r in pd.concat(
            [b.verdicts.assign(benchmark=b.verdicts["benchmark"]), b.overall.assign(benchmark="overall")]
        ).iterrows()
        if not np.isfinite(r["p_value"])  # untested: the reason says why
    ]
    pct = fmt_pct(analysis.header["alpha"])
    return [
        Section(
            "benchmarks",
            "Verdicts by benchmark",
            benchmark_verdicts_display(analysis),
            _benchmark_caption(analysis),
            [*b.notes, *reasons],
        ),
        Section(
            "benchmarks-overall",
            "Overall verdicts and aggregates across benchmarks",
            benchmark_overall_display(analysis),
            "The overall verdict (as in the last row above) beside rliable's descriptive aggregates over each "
            "condition's seeds x benchmarks scores: the interquartile mean (IQM) and the probability that a seed "
            f"of the arm beats a seed of the control on a benchmark, averaged over benchmarks, each with its {pct} "
            "stratified bootstrap interval (seeds resampled within each benchmark; too narrow to decide on at a "
            "few seeds: the verdicts read the t intervals).",
        ),
    ]
