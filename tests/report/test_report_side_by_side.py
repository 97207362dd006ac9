"""Numbers the report puts side by side mean the same thing (issue 27, item 9).

Two seed spreads are shown: the training seed's variance component (method of moments, in the
header's noise line and under 'Noise by source') and the sd of trial means (the noise-floor
table; it carries the eval prompts' sampling noise too, so it is the larger). Each has a name that
says which it is, the same in index.html, summary.md and ``harness noise-floor``. And the verdict
table, 15 columns wide, comes after a compact one that a terminal or a narrow window can show.
"""

from __future__ import annotations

import re

import pytest
from report_fakes import make_results, with_prompts
from typer.testing import CliRunner

from harness.cli import app, report_cmds
from harness.decide.analysis import analyze
from harness.decide.rules import ReadOptions
from harness.report.html_report import render_html
from harness.report.markdown import render_markdown

COMPONENT = "training-seed sd (component)"
TRIAL_MEANS = "sd of trial means"
#: "seed sd" or "seed std" not preceded by "training-": a name that could be either spread
AMBIGUOUS = re.compile(r"(?<!training-)\bseed (sd|std)\b")
COMPACT_HEADER = "| condition | difference | interval | verdict | seeds to decide (0 / effect) |"


@pytest.fixture(scope="module")
def prompted():
    """The synthetic study with per-prompt scores, so the noise splits by source."""
    return with_prompts(make_results(), 32)


@pytest.fixture(scope="module")
def analysis(prompted):
    return analyze(prompted, ReadOptions(n_permutations=200))


def test_each_seed_spread_is_named_for_what_it_is_in_the_report(analysis):
    line = analysis.header["noise_line"]
    assert line.startswith(f"Noise floor of eval/accuracy: {COMPONENT} ")
    md, page = render_markdown(analysis), render_html(analysis, [])
    for text in (md, page):
        assert not AMBIGUOUS.search(text), AMBIGUOUS.search(text)
        assert COMPONENT in text and TRIAL_MEANS in text
    assert f"| condition | seeds | failed | mean | {TRIAL_MEANS} | 95% CI of that sd |" in md
    assert "| source | variance | sd (component) | share | note |" in md
    assert f"<th>{TRIAL_MEANS}</th>" in page and "<th>sd (component)</th>" in page


def test_without_per_prompt_scores_the_line_names_the_sd_of_trial_means():
    analysis = analyze(make_results(), ReadOptions(n_permutations=200))
    assert analysis.header["noise_line"].startswith(f"Noise floor of eval/accuracy: {TRIAL_MEANS} 0.")
    assert not AMBIGUOUS.search(render_markdown(analysis))


def test_noise_floor_command_uses_the_same_names(prompted, monkeypatch):
    monkeypatch.setattr(report_cmds, "_load", lambda study: prompted)
    r = CliRunner().invoke(app, ["noise-floor", "s.yaml"])
    assert r.exit_code == 0, r.output
    assert not AMBIGUOUS.search(r.output), r.output
    lines = r.output.splitlines()
    assert lines[1].startswith(f"Noise floor of eval/accuracy: {COMPONENT} ")
    assert TRIAL_MEANS in lines[2] and "sd (component)" in r.output.split("by source:")[1]


def test_the_report_leads_with_a_compact_verdict_table(analysis):
    md = render_markdown(analysis)
    compact = md[md.index("## Verdicts\n") : md.index("## Verdicts in full")]
    rows = [line for line in compact.splitlines() if line.startswith("|")]
    assert rows[0] == COMPACT_HEADER and len(rows) == 2 + len(analysis.verdicts)
    full = md[md.index("## Verdicts in full") :]
    full_rows = [line for line in full.splitlines() if line.startswith("|")][: 2 + len(analysis.verdicts)]
    assert len(full_rows[0].split(" | ")) == 15  # the full table stays, below the compact one
    head = [c.strip() for c in full_rows[0].strip("|").split("|")]
    for short, long in zip(rows[2:], full_rows[2:]):  # the same cells, cut from the full row
        cells = [c.strip() for c in short.strip("|").split("|")]
        row = dict(zip(head, (c.strip() for c in long.strip("|").split("|"))))
        assert cells == [
            row["condition"],
            row["difference"],
            row["interval"],
            row["verdict"],
            f"{row['seeds to decide (true difference 0)']} / "
            f"{row['seeds to decide (true difference = planning effect)']}",
        ]
    page = render_html(analysis, [])
    assert page.index('id="verdicts"') < page.index('id="verdicts-full"') < page.index('id="robustness"')
    table = page[page.index('id="verdicts"') : page.index('id="verdicts-full"')]
    assert table.count("<th>") == 5
