"""What a command prints after deciding: one line per verdict. With held-out benchmarks the overall
verdicts come first, naming their test and level, then the primary metric's, then each benchmark's,
each line labelled with what it is on."""

from __future__ import annotations

import pandas as pd

from harness.decide.analysis import Analysis
from harness.report.cells import fmt_ci, fmt_level, verdict_label


def _line(r, label: str = "") -> str:
    return f"{label}{r['condition']} vs {r['control']}: {verdict_label(r)} (difference {r['diff']:+.4g})"


def _level(r) -> str:
    """The level of a verdict row's interval: the primary metric's and the benchmarks' differ (each
    family its own Bonferroni), so the same benchmark may be better as the primary and not here."""
    return f"{fmt_level(r['ci_level'])} interval"


def _overall_line(r, n_benchmarks: int) -> str:
    return _line(
        r,
        f"overall (mean over {n_benchmarks} benchmarks, test {r['test']}, "
        f"{fmt_level(r['ci_level'])} interval {fmt_ci(r['ci_low'], r['ci_high'])}): ",
    )


def console_lines(analysis: Analysis) -> list[str]:
    """Every comparison's verdict, one line each: without benchmarks the primary metric's (as
    ``condition vs control: verdict (difference +d)``); with benchmarks first the overall verdicts,
    then the primary metric's (labelled with it) and each benchmark's (labelled with its name), each
    with its interval's level."""
    b = analysis.benchmarks
    if b is None:
        return [_line(r) for _, r in analysis.verdicts.iterrows()]
    lines = [_overall_line(r, len(b.benchmarks)) for _, r in b.overall.iterrows()]
    primary = analysis.header["primary_metric"]
    lines += [_line(r, f"primary {primary} ({_level(r)}): ") for _, r in analysis.verdicts.iterrows()]
    for bench in b.benchmarks:
        rows: pd.DataFrame = b.verdicts[b.verdicts["benchmark"] == bench.name]
        lines += [_line(r, f"{bench.name} ({_level(r)}): ") for _, r in rows.iterrows()]
    return lines


__all__ = ["console_lines"]
