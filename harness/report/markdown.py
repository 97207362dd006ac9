"""``summary.md``: the header and the tables (figures are in index.html)."""

from __future__ import annotations

import html

import pandas as pd

from harness.decide.analysis import Analysis
from harness.report.tables import sections


def md_text(x) -> str:
    """Text from the study, its trials or its results, safe in Markdown as index.html makes it safe
    in HTML: ``&``, ``<`` and ``>`` become entities, so a failure reason's ``<script>`` or
    ``<img onerror=...>`` is shown as text, never read as markup."""
    return html.escape(str(x), quote=False)


def md_line(x) -> str:
    """``md_text`` on one line: a line break would end the quote or list item it is in, and the
    next line could start a heading or a list of its own."""
    return " ".join(md_text(x).splitlines())


def _cell(x) -> str:
    return md_line(x).replace("|", "\\|")


def md_table(df: pd.DataFrame) -> str:
    if df is None or df.empty:
        return "_none_"
    cols = [_cell(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def render_markdown(analysis: Analysis) -> str:
    h = analysis.header
    out = [f"# Study report: {md_line(h['study'])}", ""]
    if h.get("description"):
        out += [md_text(h["description"]), ""]
    if h.get("noise_line"):
        out += [f"**{md_line(h['noise_line'])}**", ""]
    for line in h["state"]:
        out += [f"> **{md_line(line)}**", ""]
    margin = h["min_effect"] if h["min_effect"] is not None else "not set: equivalence cannot be concluded"
    facts = [
        ("Compared", "; ".join(h["comparisons"]) or "(no comparisons)"),
        *([("Read from", h["source"])] if h.get("source") else []),
        ("Primary metric", f"{h['primary_metric']} ({h['direction']})"),
        *([("Primary comparison", h["primary_at"])] if h.get("primary_at") else []),
        ("Control", h["control"]),
        ("Smallest effect of interest (min_effect)", margin),
        ("Primary test", f"{h['test']}; failed trials: {h['failures']}"),
        ("Seeds", f"{', '.join(str(s) for s in h['seeds'])}{' (seed-matched)' if h['seed_matched'] else ''}"),
        ("Design", h.get("design", "")),
        *([("Sequential rule", h["rule"])] if h.get("rule") else []),
        ("Correction", f"{h['correction']} (alpha={h['alpha']:g}; each table states its intervals' level)"),
        (
            "Trials",
            h["trials_line"],
        ),
        (
            "Harness",
            f"{h['harness_version']} (commit {h['git_commit']}); report by harness {h['report_harness_version']}",
        ),
        ("Date", h["date"]),
    ]
    out += [f"- **{name}:** {md_line(value)}" for name, value in facts]
    out += [
        "",
        "Figures (forest plot, per-seed values, learning curves) are in `index.html`; "
        "the per-trial table is `results.csv`.",
        "",
    ]
    if len(analysis.overoptimisation):
        out += [
            "Trained on a learned reward: `index.html` draws each arm's gold (verifier) reward against its "
            "proxy (reward-model) reward and against the KL to the reference, step by step (section "
            "*Over-optimisation*); the table below gives the last step's.",
            "",
        ]
    if analysis.scaling is not None:
        out += [
            f"`index.html` draws each arm's {md_line(analysis.scaling.metric)} against "
            f"{md_line(analysis.scaling.axis)} with its fitted saturating curve (section *Ceilings and "
            "efficiency*); the table below gives the fitted parameters and their verdicts.",
            "",
        ]
    for s in sections(analysis, include_trials=False):
        out += [f"## {md_line(s.title)}", ""]
        if s.caption:
            out += [md_line(s.caption), ""]
        out += [md_table(s.table), ""]
        if s.notes:
            out += [f"- {md_line(n)}" for n in s.notes] + [""]
    for note in analysis.notes:
        out += [f"_{md_line(note)}_", ""]
    return "\n".join(out)
