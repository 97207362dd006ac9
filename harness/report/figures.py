"""Plotly figures of what ``analysis`` computed. Nothing here computes a statistic.

Every function takes an ``Analysis`` (or one of its frames) and returns a ``go.Figure``; the
colours of a condition are the same in every figure.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from harness.report.analysis import Analysis, completed, seed_values

PALETTE = (
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
    "#17becf", "#e377c2", "#8c564b", "#bcbd22", "#7f7f7f",
)
# A small white template (plotly's built-in ones are large and slow to validate per figure).
_AXIS = {"gridcolor": "#e8e8e8", "zerolinecolor": "#bbbbbb", "linecolor": "#bbbbbb", "automargin": True}
TEMPLATE = {"layout": {"paper_bgcolor": "white", "plot_bgcolor": "white", "font": {"color": "#2a3f5f"},
                       "hovermode": "closest", "xaxis": _AXIS, "yaxis": _AXIS, "colorway": list(PALETTE)}}


def colors_for(conditions: list[str]) -> dict[str, str]:
    return {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(conditions)}


def _rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def forest_plot(analysis: Analysis) -> go.Figure:
    """Each condition's mean and CI of the primary metric; the control's seed-noise band shaded."""
    h = analysis.header
    conds = analysis.conditions
    colors = colors_for(h["conditions"])
    fig = go.Figure()
    control = h.get("control")
    nf = analysis.noise_floor.set_index("condition") if len(analysis.noise_floor) else pd.DataFrame()
    if control in nf.index and np.isfinite(nf.loc[control, "std"]):
        mean, sd = float(nf.loc[control, "mean"]), float(nf.loc[control, "std"])
        fig.add_vrect(x0=mean - sd, x1=mean + sd, fillcolor="rgba(120,120,120,0.18)", line_width=0, layer="below")
        fig.add_vline(x=mean, line_dash="dot", line_color="rgba(90,90,90,0.8)")
        # a legend entry for the band (shapes have none)
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=f"control {control}: mean ± 1 seed sd",
                                 marker=dict(symbol="square", size=14, color="rgba(120,120,120,0.35)")))
    for _, row in conds.iterrows():
        if not np.isfinite(row["mean"]):
            continue
        has_ci = np.isfinite(row["ci_low"]) and np.isfinite(row["ci_high"])
        fig.add_trace(go.Scatter(
            x=[row["mean"]], y=[row["condition"]], mode="markers", name=row["condition"],
            marker=dict(size=11, color=colors.get(row["condition"]),
                        symbol="diamond" if row["condition"] == control else "circle"),
            error_x=dict(type="data", symmetric=False, array=[row["ci_high"] - row["mean"]],
                         arrayminus=[row["mean"] - row["ci_low"]], visible=bool(has_ci)),
            hovertemplate=(f"{row['condition']}<br>mean %{{x:.4g}}<br>"
                           + (f"CI [{row['ci_low']:.4g}, {row['ci_high']:.4g}]" if has_ci
                              else "no CI (fewer than 2 seeds)")
                           + f"<br>n={int(row['n'])}<extra></extra>"),
        ))
    fig.update_layout(
        template=TEMPLATE,
        title=(f"{h['primary_metric']}: condition means and {int(round((1 - h['alpha']) * 100))}% CIs "
               f"({h['direction']})"),
        xaxis_title=h["primary_metric"], yaxis=dict(autorange="reversed", type="category"),
        height=160 + 45 * max(len(conds), 1), margin=dict(l=10, r=10, t=60, b=40),
    )
    return fig


def strip_plot(analysis: Analysis, results) -> go.Figure:
    """The primary metric of every completed seed, one column per condition (hover shows the seed)."""
    h = analysis.header
    metric = h["primary_metric"]
    colors = colors_for(h["conditions"])
    fig = go.Figure()
    for i, cond in enumerate(h["conditions"]):
        v = seed_values(results.trials, cond, metric)
        if v.empty:
            continue
        offsets = np.linspace(-0.18, 0.18, len(v)) if len(v) > 1 else np.zeros(1)
        fig.add_trace(go.Scatter(
            x=i + offsets, y=v.to_numpy(), mode="markers", name=cond,
            marker=dict(size=10, color=colors[cond], line=dict(width=1, color="white")),
            text=[f"seed {s}" for s in v.index],
            hovertemplate=f"{cond}<br>%{{text}}<br>{metric} %{{y:.4g}}<extra></extra>",
        ))
    fig.update_layout(
        template=TEMPLATE, title=f"{metric} per seed (completed trials)", yaxis_title=metric,
        xaxis=dict(tickmode="array", tickvals=list(range(len(h["conditions"]))), ticktext=h["conditions"],
                   range=[-0.6, len(h["conditions"]) - 0.4]),
        height=420, margin=dict(l=10, r=10, t=60, b=40),
    )
    return fig


def curve_plot(analysis: Analysis, metric: str, x: str) -> go.Figure:
    """Mean learning curve of each condition with its CI band (``stats.curve_band``)."""
    band = analysis.curves[(metric, x)]
    colors = colors_for(analysis.header["conditions"])
    fig = go.Figure()
    for cond, b in band.groupby("condition", sort=False):
        color = colors.get(cond, PALETTE[0])
        ok = b[np.isfinite(b["low"].astype(float)) & np.isfinite(b["high"].astype(float))]
        if len(ok):
            fig.add_trace(go.Scatter(
                x=np.concatenate([ok["x"].to_numpy(), ok["x"].to_numpy()[::-1]]),
                y=np.concatenate([ok["high"].to_numpy(), ok["low"].to_numpy()[::-1]]),
                mode="lines", fill="toself", fillcolor=_rgba(color, 0.18), line=dict(width=0), hoverinfo="skip",
                name=f"{cond} CI", legendgroup=cond, showlegend=False,
            ))
        fig.add_trace(go.Scatter(
            x=b["x"], y=b["mean"], mode="lines+markers" if len(b) <= 20 else "lines", name=cond,
            legendgroup=cond, line=dict(color=color, width=2), customdata=b["n_seeds"],
            hovertemplate=f"{cond}<br>x %{{x:.4g}}<br>mean %{{y:.4g}}<br>seeds %{{customdata}}<extra></extra>",
        ))
    x_title = "step" if x == "step" else "tokens processed (tokens/total)"
    fig.update_layout(
        template=TEMPLATE,
        title=f"{metric} by {'step' if x == 'step' else 'tokens processed'} (mean and CI over seeds)",
        xaxis_title=x_title, yaxis_title=metric, height=420, margin=dict(l=10, r=10, t=60, b=40),
    )
    return fig


def all_figures(analysis: Analysis, results) -> list[tuple[str, str, go.Figure]]:
    """(div id, heading, figure) for every figure of the report, in page order."""
    figs: list[tuple[str, str, go.Figure]] = []
    if len(completed(results.trials)):
        figs.append(("fig-forest", "Forest plot", forest_plot(analysis)))
        figs.append(("fig-strip", "Per-seed values", strip_plot(analysis, results)))
    for i, (metric, x) in enumerate(analysis.curves):
        figs.append((f"fig-curve-{i}", f"Learning curve: {metric} by {x}", curve_plot(analysis, metric, x)))
    return figs
