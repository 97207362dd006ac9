"""Study reports: tables from ``harness.stats``, plotly figures, HTML / Markdown / CSV writers.

``write_report(results, out_dir)`` writes ``index.html`` (+ ``plotly.min.js`` beside it),
``summary.md`` and ``results.csv`` and returns the path of ``index.html``.
"""

from __future__ import annotations

from pathlib import Path

from harness.report.analysis import Analysis, analyze, compare_pair, noise_floor_table
from harness.report.figures import all_figures
from harness.report.html_report import write_html
from harness.report.markdown import write_markdown


def write_report(
    results,
    out_dir,
    *,
    correction: str = "holm",
    alpha: float = 0.05,
    power: float = 0.8,
    n_permutations: int = 10_000,
    seed: int = 0,
    curve_metrics: list[str] | None = None,
) -> Path:
    """Write the report of ``results`` into ``out_dir``; returns the path of ``index.html``."""
    analysis = analyze(results, correction=correction, alpha=alpha, power=power,
                       n_permutations=n_permutations, seed=seed, curve_metrics=curve_metrics)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    analysis.trials.to_csv(out / "results.csv", index=False)
    write_markdown(analysis, out)
    return write_html(analysis, all_figures(analysis, results), out)


__all__ = ["Analysis", "analyze", "compare_pair", "noise_floor_table", "write_report"]
