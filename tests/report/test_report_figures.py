"""The report's figures draw exactly what the analysis computed.

Inputs are hand-built ``Analysis`` objects (small frames with known numbers), so each test can
read the figure's trace data back and compare it with the frame it was drawn from.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from analysis_fakes import CONDS, METRIC, make_analysis, verdict_rows

from harness.errors import ConfigError
from harness.report import html_report, write_report
from harness.report.cells import Section
from harness.report.figures import (
    VERDICT_COLORS,
    all_figures,
    check_smooth,
    components_plot,
    curve_plot,
    forest_plot,
    moving_average,
    seed_plot,
)


def traces(fig, name):
    return [t for t in fig.data if t.name == name]


# ----------------------------------------------------------------------------- forest of differences


def test_forest_draws_each_difference_with_the_verdicts_interval_in_its_colour():
    fig = forest_plot(make_analysis())
    v = verdict_rows().set_index("condition")
    drawn = {}
    for verdict in ("better", "equivalent"):
        (t,) = traces(fig, verdict)
        assert t.marker.color == VERDICT_COLORS[verdict]
        for label, x, plus, minus, hover in zip(t.y, t.x, t.error_x.array, t.error_x.arrayminus, t.hovertext):
            drawn[label] = (x, x - minus, x + plus, hover)
    assert set(drawn) == {"up vs ctrl", "same vs ctrl", "tiny vs ctrl"}
    for cond, row in v.iterrows():
        x, low, high, hover = drawn[f"{cond} vs ctrl"]
        assert (x, low, high) == pytest.approx((row["diff"], row["ci_low"], row["ci_high"]))
        assert f"verdict: {row['verdict']}" in hover and "99.17% interval" in hover and "test: paired t" in hover
    assert not traces(fig, "worse") and not traces(fig, "inconclusive")  # no empty legend entries


def test_forest_marks_a_difference_smaller_than_the_minimum_effect():
    (better,) = traces(forest_plot(make_analysis()), "better")
    marks = dict(zip(better.y, zip(better.marker.symbol, better.text)))
    assert marks == {"up vs ctrl": ("circle", ""), "tiny vs ctrl": ("circle-open", "below min effect")}
    assert "smaller than the minimum effect" in better.hovertext[list(better.y).index("tiny vs ctrl")]


def test_forest_shades_plus_minus_min_effect_and_marks_zero():
    fig = forest_plot(make_analysis(min_effect=0.02))
    rects = [s for s in fig.layout.shapes if s.type == "rect"]
    lines = [s for s in fig.layout.shapes if s.type == "line"]
    assert [(r.x0, r.x1) for r in rects] == [(-0.02, 0.02)]
    assert [(ln.x0, ln.x1) for ln in lines] == [(0, 0)]
    assert any(t.name.startswith("±0.02: smaller than the minimum effect") for t in fig.data)
    assert "equivalence cannot be concluded" not in fig.layout.title.subtitle.text


def test_forest_without_min_effect_has_no_band_and_says_equivalence_cannot_be_concluded():
    fig = forest_plot(make_analysis(min_effect=None))
    assert [s.type for s in fig.layout.shapes] == ["line"]
    assert not any("minimum effect that matters" in (t.name or "") for t in fig.data)
    assert "equivalence cannot be concluded" in fig.layout.title.subtitle.text


def test_forest_clips_an_interval_to_the_range_a_difference_can_take():
    a = make_analysis()
    a.verdicts.loc[0, ["diff", "ci_low", "ci_high", "verdict"]] = [0.5, -1.4, 2.5, "inconclusive"]
    (t,) = traces(forest_plot(a), "inconclusive")
    assert (t.x[0] - t.error_x.arrayminus[0], t.x[0] + t.error_x.array[0]) == pytest.approx((-1.0, 1.0))
    assert "[-1.4, 2.5]" in t.hovertext[0]  # the hover keeps the computed interval


# ----------------------------------------------------------------------------- per seed


def test_seed_plot_joins_each_seed_across_conditions_when_seed_matched():
    fig = seed_plot(make_analysis(seed_matched=True))
    points = {}  # (condition, seed) -> (x, y) of the marker
    for cond in CONDS:
        (t,) = traces(fig, cond)
        for x, y, seed in zip(t.x, t.y, t.text):
            points[(cond, int(seed.removeprefix("seed ")))] = (x, y)
    assert ("tiny", 2) not in points  # failed: not drawn
    lines = traces(fig, "same seed")
    assert len(lines) == 3 and [ln.showlegend for ln in lines] == [True, False, False]
    for seed, line in enumerate(lines):
        for cond, x, y in zip(CONDS, line.x, line.y):
            if (cond, seed) in points:
                assert (x, y) == pytest.approx(points[(cond, seed)])
            else:
                assert y is None  # the line breaks where the seed has no completed trial
        assert line.line.width == 1


def test_seed_plot_draws_no_seed_lines_when_not_seed_matched():
    assert not traces(seed_plot(make_analysis(seed_matched=False)), "same seed")


def test_seed_plot_shows_condition_means_with_their_ci_clipped_to_the_range():
    (t,) = traces(seed_plot(make_analysis()), "mean and 95% CI")
    c = make_analysis().conditions
    assert list(t.y) == pytest.approx(c["mean"].tolist())
    low = np.array(t.y) - np.array(t.error_y.arrayminus)
    high = np.array(t.y) + np.array(t.error_y.array)
    assert low == pytest.approx([0.48, 0.58, 0.68, 0.0]) and high == pytest.approx([0.54, 0.64, 0.74, 1.0])


# ----------------------------------------------------------------------------- variance components


def test_components_bar_shows_each_share_with_sd_in_hover():
    fig = components_plot(make_analysis())
    (bar,) = fig.data
    assert list(bar.y) == ["seed", "prompt", "eval sampling"] and list(bar.x) == [0.4, 0.5, 0.1]
    assert "sd 0.02" in bar.hovertext[0] and "from 4 samples per prompt" in bar.hovertext[2]
    assert fig.layout.xaxis.tickformat == ".0%"


def test_all_figures_in_page_order_and_components_absent_when_empty():
    a = make_analysis()
    ids = [div for div, _, _ in all_figures(a)]
    assert ids == ["fig-forest", "fig-strip", "fig-components", "fig-curve-0", "fig-curve-1"]
    a.components = pd.DataFrame(columns=["source", "variance", "sd", "share", "note"])
    assert "fig-components" not in [div for div, _, _ in all_figures(a)]


# ----------------------------------------------------------------------------- curves


def band_of(fig):
    (band,) = [t for t in fig.data if t.fill == "toself"]
    (mean,) = [t for t in fig.data if t.fill != "toself"]
    return band, mean


def test_bounded_metric_band_stays_within_its_range():
    band, mean = band_of(curve_plot(make_analysis(), METRIC, "step"))
    assert min(band.y) == 0.0 and max(band.y) == 1.0
    assert sorted(band.y) == pytest.approx(sorted([0.5, 0.6, 0.9, 1.0, 0.0, 0.2, 0.5, 0.8]))
    assert list(mean.y) == pytest.approx([0.1, 0.4, 0.7, 0.95])


def test_unbounded_metric_is_drawn_as_computed():
    band, mean = band_of(curve_plot(make_analysis(), "train/kl_ref", "step"))
    assert list(mean.y) == [0.0, 3.0, 6.0, 9.0]
    assert min(band.y) == -1.0 and max(band.y) == 10.0


def test_moving_average_is_trailing_and_keeps_gaps():
    frame = pd.DataFrame({"mean": [0.0, 3.0, 6.0, 9.0], "low": [-1.0, 2.0, np.nan, 8.0]})
    out = moving_average(frame, 2)
    assert out["mean"].tolist() == [0.0, 1.5, 4.5, 7.5]
    assert out["low"].tolist()[:2] == [-1.0, 0.5] and np.isnan(out["low"][2]) and out["low"][3] == 8.0
    assert moving_average(frame, 3)["mean"].tolist() == [0.0, 1.5, 3.0, 6.0]
    assert moving_average(frame, 1).equals(frame)


def test_smoothed_curve_draws_the_moving_average_and_says_so():
    fig = curve_plot(make_analysis(), "train/kl_ref", "step", smooth=3)
    _, mean = band_of(fig)
    assert list(mean.y) == [0.0, 1.5, 3.0, 6.0]
    assert "moving average of 3 logged points" in fig.layout.title.subtitle.text
    assert "moving average" not in curve_plot(make_analysis(), "train/kl_ref", "step").layout.title.subtitle.text


def test_smoothing_a_bounded_band_still_stays_in_range():
    band, _ = band_of(curve_plot(make_analysis(), METRIC, "step", smooth=2))
    assert min(band.y) >= 0.0 and max(band.y) <= 1.0


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "3"])
def test_smooth_must_be_a_whole_number_of_points(bad):
    with pytest.raises(ConfigError, match=r"smooth must be a whole number of logged points, 1 or more"):
        check_smooth(bad)


def test_write_report_refuses_a_bad_smooth_before_writing(results, tmp_path):
    with pytest.raises(ConfigError, match="smooth"):
        write_report(results, tmp_path / "out", smooth=0)
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- page layout


@pytest.fixture
def page(monkeypatch):
    """index.html of the hand-built analysis (its tables stubbed: only the layout is tested here)."""
    keys = ("verdicts", "verdicts-full", "robustness", "conditions", "noise", "components", "trials")
    monkeypatch.setattr(
        html_report, "sections", lambda a: [Section(k, f"table {k}", pd.DataFrame({"x": [k]})) for k in keys]
    )
    a = make_analysis()
    return html_report.render_html(a, all_figures(a))


def test_page_order_forest_first_then_seeds_components_curves(page):
    ids = re.findall(r'<div id="(fig-[\w-]+)" class="plotly-graph-div"', page)
    assert ids == ["fig-forest", "fig-strip", "fig-components", "fig-curve-0", "fig-curve-1"]
    order = [
        page.index(s)
        for s in (
            'id="verdicts"',
            'id="verdicts-full"',
            'id="fig-forest"',
            'id="fig-strip"',
            'id="fig-components"',
            'id="components"',
            'id="curves"',
        )
    ]
    assert order == sorted(order)


def test_curve_panels_share_one_grid(page):
    grid = page[page.index('<div class="curve-grid">') :]
    assert grid.count('class="plotly-graph-div"') == 2
    assert '<h3 id="h-fig-curve-0">' in grid and '<h3 id="h-fig-curve-1">' in grid
    assert ".curve-grid { display: grid" in page


def test_header_states_the_minimum_effect_and_the_noise(page):
    assert "<td>Minimum effect</td><td>±0.02</td>" in page
    assert "<td>Noise</td><td>training-seed sd (component) 0.01 (ctrl); MDE at 3 seeds 0.05</td>" in page
    a = make_analysis(min_effect=None)
    assert "not set: no comparison can be called equivalent" in html_report.render_html(a, [])
