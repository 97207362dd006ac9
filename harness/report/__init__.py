"""Study reports: tables from ``harness.stats``, plotly figures, HTML / Markdown / CSV writers.

``write_report(results, out_dir)`` writes ``index.html`` (+ ``plotly.min.js`` beside it),
``summary.md`` and ``results.csv`` and returns the path of ``index.html``.
"""

from __future__ import annotations

from pathlib import Path

from harness.errors import ConfigError, HarnessError
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
    """Write the report of ``results`` into ``out_dir``; returns the path of ``index.html``.

    ``out_dir`` is created if missing (it is the caller's choice: ``harness report`` derives
    its default from the checked study name). An ``out_dir`` that is an existing file, or a
    folder that cannot be created or written, is a one-line ``HarnessError``.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"report folder {out} exists and is not a folder")
    analysis = analyze(results, correction=correction, alpha=alpha, power=power,
                       n_permutations=n_permutations, seed=seed, curve_metrics=curve_metrics)
    figures = all_figures(analysis, results)
    try:
        out.mkdir(parents=True, exist_ok=True)
        analysis.trials.to_csv(out / "results.csv", index=False)
        write_markdown(analysis, out)
        return write_html(analysis, figures, out)
    except OSError as err:
        why = f"{err.strerror}: {err.filename}" if err.strerror and err.filename else (err.strerror or str(err))
        raise HarnessError(f"cannot write the report in {out}: {why}") from None


__all__ = ["Analysis", "analyze", "compare_pair", "noise_floor_table", "write_report"]
