"""``index.html``: header, tables and plotly figures, readable offline.

plotly.js (from the installed plotly package, 4.8 MB) is written once as ``plotly.min.js`` and
loaded with a relative ``<script src>``; nothing is fetched from the network. The reports in the
harness's own reports folder (``reports/<name>/`` and reports nested in those) share one copy in
``reports/``; a report written anywhere else (``--out``) keeps its own copy beside it, so that its
folder can be moved or sent whole.
"""

from __future__ import annotations

import html as _html
import os
from pathlib import Path

import plotly.offline

from harness.decide.analysis import Analysis
from harness.ground.folders import REPORTS_ROOT
from harness.report.cells import Section
from harness.report.tables import sections

PLOTLY_JS = "plotly.min.js"

_CSS = """
body { font-family: system-ui, -apple-system, Segoe UI, Roboto, sans-serif; margin: 2em auto; max-width: 1400px;
       padding: 0 1em; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
table { border-collapse: collapse; font-size: 0.9em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
.caption { color: #555; font-size: 0.9em; max-width: 60em; }
.state { background: #fff3cd; border: 1px solid #e0c36c; padding: 0.6em 1em; margin: 0.6em 0; font-weight: 600; }
.meta td:first-child { font-weight: 600; }
.figure { margin: 1em 0; }
.curve-grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 0 1.5em; }
.curve-grid > div { min-width: 0; }
.curve-grid h3 { font-size: 1em; margin: 1em 0 0; }
.scroll { overflow-x: auto; }
.notes { font-size: 0.9em; color: #333; max-width: 70em; }
"""


def plotly_home(out_dir: Path) -> Path:
    """The folder whose ``plotly.min.js`` the report in ``out_dir`` loads: the harness's reports
    folder when ``out_dir`` is inside it (``reports/<name>/``, or a report nested in one, such as
    ``harness decide``'s pass@k reports, whatever way the folder was named), else ``out_dir``
    itself (a folder the user chose, which may be anywhere and be moved or sent whole)."""
    out = Path(out_dir)
    return REPORTS_ROOT if REPORTS_ROOT.resolve() in out.resolve().parents else out


def plotly_src(out_dir: Path, home: Path) -> str:
    """The page's ``<script src>`` of ``home``'s plotly.min.js, relative to ``out_dir``."""
    return Path(os.path.relpath(Path(home).resolve() / PLOTLY_JS, Path(out_dir).resolve())).as_posix()


def plotly_js_to_write(folder: Path) -> str | None:
    """plotly.js for ``folder``, or None when the folder has it already (it is written once per
    folder, and again only if the installed plotly's differs)."""
    path = Path(folder) / PLOTLY_JS
    js = plotly.offline.get_plotlyjs()
    if path.exists() and path.stat().st_size == len(js.encode("utf-8")):
        return None
    return js


def _esc(x) -> str:
    return _html.escape(str(x))


def _table(section: Section) -> str:
    parts = [f'<h2 id="{section.key}">{_esc(section.title)}</h2>']
    if section.caption:
        parts.append(f'<p class="caption">{_esc(section.caption)}</p>')
    if section.table is None or section.table.empty:
        parts.append("<p><em>none</em></p>")
    else:
        body = section.table.to_html(index=False, escape=True, border=0, na_rep="—", classes=f"table-{section.key}")
        parts.append(f'<div class="scroll">{body}</div>')
    if section.notes:
        parts.append('<ul class="notes">' + "".join(f"<li>{_esc(n)}</li>" for n in section.notes) + "</ul>")
    return "\n".join(parts)


def _header(h: dict) -> str:
    rows = [
        ("Compared", "; ".join(h["comparisons"]) or "(no comparisons)"),
        *([("Read from", h["source"])] if h.get("source") else []),
        ("Conditions", ", ".join(h["conditions"])),
        ("Primary metric", f"{h['primary_metric']} ({h['direction']})"),
        *([("Primary comparison", h["primary_at"])] if h.get("primary_at") else []),
        ("Control", h["control"]),
        ("Seeds", ", ".join(str(s) for s in h["seeds"]) + (" (seed-matched)" if h["seed_matched"] else "")),
        ("Design", h.get("design", "")),
        *([("Sequential rule", h["rule"])] if h.get("rule") else []),
        ("Correction", f"{h['correction']} (alpha={h['alpha']:g}; each table states its intervals' level)"),
        (
            "Minimum effect",
            f"±{h['min_effect']:g}"
            if h["min_effect"] is not None
            else "not set: no comparison can be called equivalent",
        ),
        ("Noise", h["noise_line"]),
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
    out = [f"<h1>Study report: {_esc(h['study'])}</h1>"]
    if h.get("description"):
        out.append(f"<p>{_esc(h['description'])}</p>")
    for line in h["state"]:
        out.append(f'<div class="state">{_esc(line)}</div>')
    out.append(
        '<table class="meta">' + "".join(f"<tr><td>{_esc(k)}</td><td>{_esc(v)}</td></tr>" for k, v in rows) + "</table>"
    )
    return "\n".join(out)


def render_html(analysis: Analysis, figures: list[tuple[str, str, object]], *, plotly_js: str = PLOTLY_JS) -> str:
    """The page; ``plotly_js``: where it loads plotly.js from, relative to the page."""
    by_key = {s.key: s for s in sections(analysis)}
    fig_html = {
        div_id: (
            title,
            fig.to_html(
                full_html=False,
                include_plotlyjs=False,
                div_id=div_id,
                config={"displaylogo": False, "responsive": True},
            ),
        )
        for div_id, title, fig in figures
    }

    def figs(prefix: str, tag: str = "h2") -> list[str]:
        return [
            f'<{tag} id="h-{k}">{_esc(t)}</{tag}><div class="figure">{body}</div>'
            for k, (t, body) in fig_html.items()
            if k.startswith(prefix)
        ]

    order: list[str] = [_header(analysis.header)]
    order += [_table(by_key["verdicts"]), _table(by_key["verdicts-full"])]
    order += [
        _table(by_key[key]) for key in ("benchmarks-overall", "benchmarks", "benchmarks-aggregates") if key in by_key
    ]
    order += figs("fig-bench")
    order += [_table(by_key[key]) for key in ("looks", "calibration") if key in by_key]
    order += figs("fig-forest")
    order.append(_table(by_key["robustness"]))
    order += figs("fig-strip")
    order.append(_table(by_key["conditions"]))
    order += [_table(by_key[key]) for key in ("noise", "noise-benchmarks") if key in by_key]
    order += figs("fig-components")
    order += [
        _table(by_key[key])
        for key in ("components", "budget", "components-benchmarks", "budget-benchmarks")
        if key in by_key
    ]
    curves = figs("fig-curve", "h3")
    if curves:  # two panels a row on a wide screen: by step beside by tokens of the same metric
        order.append(
            '<h2 id="curves">Training curves</h2><div class="curve-grid">'
            + "".join(f"<div>{c}</div>" for c in curves)
            + "</div>"
        )
    if "scaling" in by_key:  # fitted compute curves: the figure, then the parameters and verdicts
        order += figs("fig-scaling")
        order.append(_table(by_key["scaling"]))
    if "overoptimisation" in by_key:  # a learned reward: gold against proxy and KL, then the last step's table
        order += figs("fig-overopt")
        order.append(_table(by_key["overoptimisation"]))
    for key in ("cost", "failed", "pending", "config"):
        if key in by_key:
            order.append(_table(by_key[key]))
    for note in analysis.notes:
        order.append(f'<p class="caption">{_esc(note)}</p>')
    trials = by_key["trials"]
    order.append(
        f"<details><summary>{_esc(trials.title)} ({len(trials.table)} rows; also results.csv)</summary>"
        + _table(trials)
        + "</details>"
    )
    title = _esc(f"Study report: {analysis.header['study']}")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<title>{title}</title>\n<script src="{_esc(plotly_js)}"></script>\n<style>{_CSS}</style>\n</head>\n<body>\n'
        + "\n".join(order)
        + "\n</body>\n</html>\n"
    )


__all__ = ["PLOTLY_JS", "plotly_home", "plotly_js_to_write", "plotly_src", "render_html"]
