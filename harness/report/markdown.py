"""Write ``summary.md``: the header and the tables (figures are in index.html)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.decide.analysis import Analysis
from harness.ground.files import atomic_write
from harness.report.tables import sections


def _cell(x) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def md_table(df: pd.DataFrame) -> str:
    if df is None or df.empty:
        return "_none_"
    cols = [_cell(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def render_markdown(analysis: Analysis) -> str:
    h = analysis.header
    out = [f"# Study report: {h['study']}", ""]
    if h.get("description"):
        out += [h["description"], ""]
    if h.get("noise_line"):
        out += [f"**{h['noise_line']}**", ""]
    for line in h["state"]:
        out += [f"> **{line}**", ""]
    out += [
        f"- **Compared:** {'; '.join(h['comparisons']) or '(no comparisons)'}",
        f"- **Primary metric:** {h['primary_metric']} ({h['direction']})",
        f"- **Control:** {h['control']}",
        f"- **Smallest effect of interest (min_effect):** "
        f"{h['min_effect'] if h['min_effect'] is not None else 'not set: equivalence cannot be concluded'}",
        f"- **Primary test:** {h['test']}; failed trials: {h['failures']}",
        f"- **Seeds:** {', '.join(str(s) for s in h['seeds'])}{' (seed-matched)' if h['seed_matched'] else ''}",
        f"- **Design:** {h.get('design', '')}",
        *([f"- **Sequential rule:** {h['rule']}"] if h.get("rule") else []),
        f"- **Correction:** {h['correction']} (alpha={h['alpha']:g}; intervals at {h['ci_level']:.4g})",
        f"- **Trials:** {h['n_completed']} completed, {h['n_failed']} failed, "
        f"{h['n_pending']} running/waiting, {h['n_trials']} in all",
        f"- **Harness:** {h['harness_version']} (commit {h['git_commit']}); "
        f"report by harness {h['report_harness_version']}",
        f"- **Date:** {h['date']}",
        "",
        "Figures (forest plot, per-seed values, learning curves) are in `index.html`; "
        "the per-trial table is `results.csv`.",
        "",
    ]
    if len(analysis.overoptimisation):
        out += ["Trained on a learned reward: `index.html` draws each arm's gold (verifier) reward against its "
                "proxy (reward-model) reward and against the KL to the reference, step by step (section "
                "*Over-optimisation*); the table below gives the last step's.", ""]
    for s in sections(analysis, include_trials=False):
        out += [f"## {s.title}", ""]
        if s.caption:
            out += [s.caption, ""]
        out += [md_table(s.table), ""]
        if s.notes:
            out += [f"- {n}" for n in s.notes] + [""]
    for note in analysis.notes:
        out += [f"_{note}_", ""]
    return "\n".join(out)


def write_markdown(analysis: Analysis, out_dir: Path) -> Path:
    path = Path(out_dir) / "summary.md"
    return atomic_write(path, render_markdown(analysis))
