"""Ceilings and efficiency in the report: a study whose trials evaluate often enough gets the
figure of its compute curves with the fits drawn over and the table of A, B and C_mid with their
verdicts and the extrapolation check; a study without a fit gets the report it always got."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from report_fakes import make_results

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "decide"))
from scaling_fakes import AXIS, PRIMARY, make_scaling_results

from harness.decide.analysis import analyze
from harness.decide.rules import ReadOptions
from harness.report import write_report
from harness.report.figures import all_figures, scaling_plot
from harness.report.scaling_tables import scaling_display, scaling_notes
from harness.report.tables import sections


def test_the_report_shows_the_fitted_curves_and_their_verdicts(tmp_path):
    write_report(make_scaling_results(), tmp_path, ReadOptions(n_permutations=200))
    page = (tmp_path / "index.html").read_text()
    summary = (tmp_path / "summary.md").read_text()
    assert 'id="fig-scaling"' in page and 'id="scaling"' in page
    for text in (page, summary):
        assert "Ceilings and efficiency (fitted compute curves)" in text
        assert "more efficient: 0.3156" in text and "equally efficient" in text
        assert "Extrapolation, fast: fitted on compute/generated_tokens up to 5000" in text
    assert "| condition | seeds | A (ceiling) | B | C_mid | fit | ceiling vs control |" in summary


def test_the_table_reads_the_analysis():
    analysis = analyze(make_scaling_results(), ReadOptions(n_permutations=200))
    table = scaling_display(analysis).set_index("condition")
    params = analysis.scaling.parameters.set_index("condition")
    assert table.loc["high", "A (ceiling)"].startswith(f"{params.loc['high', 'A']:.4g} [")
    assert table.loc["grpo", "ceiling vs control"] == "—"  # the control
    assert table.loc["high", "ceiling vs control"].startswith("better: 0.145 97.5% [")
    assert table.loc["fast", "fit"] == "identified"


def test_a_condition_without_verdict_says_why():
    true = {"grpo": (0.70, 1.5, 3000.0), "late": (0.90, 1.5, 60_000.0)}
    analysis = analyze(make_scaling_results(true=true), ReadOptions(n_permutations=200))
    table = scaling_display(analysis).set_index("condition")
    assert table.loc["late", "ceiling vs control"] == "no verdict"
    assert table.loc["late", "fit"].startswith(analysis.scaling.parameters.set_index("condition").loc["late", "reason"])
    notes = scaling_notes(analysis)
    assert any(n.startswith("late vs grpo, ceiling: no verdict, the arm's fit is not identified") for n in notes)


def test_the_figure_draws_band_mean_and_fit_per_condition_and_each_identified_ceiling():
    analysis = analyze(make_scaling_results(), ReadOptions(n_permutations=200))
    fig = scaling_plot(analysis)
    names = [t.name for t in fig.data if t.showlegend is not False]
    assert names == ["grpo", "high", "fast"]
    fits = [t for t in fig.data if t.name and t.name.endswith(" fit")]
    assert len(fits) == 3 and all(t.line.dash == "dash" for t in fits)
    ceilings = sorted(round(s.y0, 4) for s in fig.layout.shapes)
    assert ceilings == sorted(round(a, 4) for a in analysis.scaling.parameters["A"])
    assert fig.layout.xaxis.title.text == AXIS and fig.layout.yaxis.title.text == PRIMARY
    curves = analysis.scaling.curves
    band = fig.data[0]  # grpo's band: high then low, clipped to the metric's range
    assert np.all(np.asarray(band.y) <= 1.0) and len(band.x) == 2 * (curves["condition"] == "grpo").sum()


def test_a_study_without_a_fit_has_no_such_section(tmp_path):
    analysis = analyze(make_results(), ReadOptions(n_permutations=200))
    assert analysis.scaling is None
    assert "scaling" not in {s.key for s in sections(analysis)}
    assert "fig-scaling" not in {k for k, _, _ in all_figures(analysis)}
    write_report(make_results(), tmp_path, ReadOptions(n_permutations=200))
    assert "Ceilings and efficiency" not in (tmp_path / "index.html").read_text()
    assert "Ceilings and efficiency" not in (tmp_path / "summary.md").read_text()
