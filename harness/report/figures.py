"""Plotly figures of what ``analysis`` computed. Nothing here computes a statistic.

Every function takes an ``Analysis`` and returns a ``go.Figure``. A condition has the same colour
in every figure, and so has a verdict. Intervals of a metric with a known range
(``header["metric_ranges"]``) are drawn clipped to it, so a band never claims impossible values.
The curves' optional moving average is a drawing choice of the reader, not a statistic.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from harness.decide.analysis import Analysis
from harness.decide.frames import completed
from harness.decide.overoptimisation import GOLD, KL, PROXY
from harness.errors import ConfigError
from harness.report.cells import fmt_level

PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#17becf",
    "#e377c2",
    "#8c564b",
    "#bcbd22",
    "#7f7f7f",
)
VERDICT_COLORS = {"better": "#1a9850", "worse": "#d73027", "equivalent": "#4575b4", "inconclusive": "#8c8c8c"}
# an eval-only verdict (one training run per arm) in its seed-level word's lighter colour, drawn as a diamond
VERDICT_COLORS.update(
    {
        "better (eval-only)": "#91cf60",
        "worse (eval-only)": "#fc8d59",
        "equivalent (eval-only)": "#91bfdb",
        "inconclusive (eval-only)": "#bdbdbd",
        "untested": "#d9d9d9",
    }
)
# A small white template (plotly's built-in ones are large and slow to validate per figure).
_AXIS = {"gridcolor": "#e8e8e8", "zerolinecolor": "#bbbbbb", "linecolor": "#bbbbbb", "automargin": True}
TEMPLATE = {
    "layout": {
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "font": {"color": "#2a3f5f"},
        "hovermode": "closest",
        "xaxis": _AXIS,
        "yaxis": _AXIS,
        "colorway": list(PALETTE),
    }
}
_MARGIN = dict(l=10, r=10, t=60, b=40)


def colors_for(conditions: list[str]) -> dict[str, str]:
    return {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(conditions)}


def _rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def _legend_swatch(fig: go.Figure, name: str, color: str) -> None:
    """A legend entry for a shaded shape (shapes have none)."""
    fig.add_trace(
        go.Scatter(
            x=[None],
            y=[None],
            mode="markers",
            name=name,
            hoverinfo="skip",
            marker=dict(symbol="square", size=14, color=color),
        )
    )


def check_smooth(smooth) -> int:
    """The curves' moving-average window: a whole number of logged points, 1 (off) or more."""
    if isinstance(smooth, bool) or not isinstance(smooth, (int, np.integer)) or smooth < 1:
        raise ConfigError(
            f"smooth must be a whole number of logged points, 1 or more (1 = no smoothing), got {smooth!r}"
        )
    return int(smooth)


def metric_range(analysis: Analysis, metric: str) -> tuple[float, float]:
    """The values ``metric`` can take, an unbounded side as -inf / inf."""
    low, high = analysis.header["metric_ranges"].get(metric, (None, None))
    return (-np.inf if low is None else float(low), np.inf if high is None else float(high))


def moving_average(frame: pd.DataFrame, window: int) -> pd.DataFrame:
    """Trailing mean over ``window`` logged points (fewer at the start); a gap stays a gap."""
    return frame.rolling(window, min_periods=1).mean().where(frame.notna())


def _pct(level: float) -> str:
    return f"{level * 100:.4g}%"


def _verdict_traces(fig: go.Figure, v: pd.DataFrame, labels: pd.Series, span: float) -> None:
    """One marker per verdict row of ``v`` at its difference, with the verdict's interval
    (clipped to +-``span``), coloured by verdict, on the y-axis at ``labels``."""
    for verdict, color in VERDICT_COLORS.items():
        keep = (v["verdict"] == verdict).to_numpy()
        g = v[keep]
        if g.empty:
            continue
        diff = g["diff"].to_numpy(float)
        ci_low = g["ci_low"].to_numpy(float)
        ci_high = g["ci_high"].to_numpy(float)
        small = g["smaller_than_min_effect"].to_numpy(bool)
        shape = "diamond" if verdict.endswith("(eval-only)") else "circle"
        hover = [
            f"{label}<br>verdict: {r.verdict}"
            + (" (smaller than the minimum effect)" if s else "")
            + f"<br>diff {r.diff:.4g}<br>{_pct(r.ci_level)} interval [{r.ci_low:.4g}, {r.ci_high:.4g}]"
            + f"<br>test: {r.test}"
            for label, r, s in zip(labels[keep], g.itertuples(), small)
        ]
        fig.add_trace(
            go.Scatter(
                x=diff,
                y=labels[keep],
                mode="markers+text",
                name=verdict,
                marker=dict(
                    size=11,
                    color=color,
                    symbol=np.where(small, f"{shape}-open", shape),
                    line=dict(width=2, color=color),
                ),
                text=np.where(small, "below min effect", ""),
                textposition="top center",
                textfont=dict(color=color, size=11),
                error_x=dict(
                    type="data",
                    symmetric=False,
                    color=color,
                    array=np.clip(ci_high, -span, span) - diff,
                    arrayminus=diff - np.clip(ci_low, -span, span),
                ),
                hovertext=hover,
                hovertemplate="%{hovertext}<extra></extra>",
            )
        )


def forest_plot(analysis: Analysis) -> go.Figure:
    """Each comparison's difference from its control with the verdict's interval, coloured by
    verdict, against 0 and the ±min_effect band: the verdict table as a picture."""
    h = analysis.header
    metric, min_effect = h["primary_metric"], h["min_effect"]
    v = analysis.verdicts[np.isfinite(analysis.verdicts["diff"].astype(float))]
    low, high = metric_range(analysis, metric)
    span = high - low  # a difference of two values in [low, high] lies in [-span, span]
    fig = go.Figure()
    if min_effect is not None:
        fig.add_vrect(x0=-min_effect, x1=min_effect, fillcolor="rgba(69,117,180,0.12)", line_width=0, layer="below")
        _legend_swatch(fig, f"±{min_effect:g}: smaller than the minimum effect that matters", "rgba(69,117,180,0.3)")
    fig.add_vline(x=0, line_color="rgba(60,60,60,0.8)", line_width=1)
    _verdict_traces(fig, v, v["condition"] + " vs " + v["control"], span)
    better = "right" if h["direction"] == "maximize" else "left"
    subtitle = (
        "shaded: ±min_effect; a verdict needs the whole interval on one side of 0 (better/worse) "
        "or inside the band (equivalent)"
        if min_effect is not None
        else "no min_effect set in the study: equivalence cannot be concluded"
    )
    fig.update_layout(
        template=TEMPLATE,
        title=dict(
            text=f"{metric}: difference from the control, with the verdict's interval ({better} is better)",
            subtitle=dict(text=subtitle),
        ),
        xaxis_title=f"{metric}: condition − control",
        yaxis=dict(autorange="reversed", type="category"),
        legend_title_text="verdict",
        height=200 + 45 * max(len(v), 1),
        margin=dict(_MARGIN, t=90),
    )
    return fig


def seed_plot(analysis: Analysis) -> go.Figure:
    """Each completed trial's primary metric per condition (as the comparisons read it: at the
    final evaluation or at the study's compute point), beside the condition's mean and CI.
    In a seed-matched design a thin line joins one seed across conditions: parallel lines mean
    seed effects shared by the arms, which the paired test removes."""
    h = analysis.header
    metric, conds = h["primary_metric"], h["conditions"]
    colors = colors_for(conds)
    values = {c: analysis.seed_values.get(c, pd.Series(dtype=float)) for c in conds}
    seeds = sorted({s for v in values.values() for s in v.index})
    # one offset per seed, the same in every column, so the lines joining a seed stay straight
    offset = dict(zip(seeds, np.linspace(-0.2, 0.1, len(seeds)) if len(seeds) > 1 else [0.0]))
    fig = go.Figure()
    if h["seed_matched"]:
        _add_seed_lines(fig, conds, seeds, values, offset)
    for i, cond in enumerate(conds):
        v = values[cond]
        if v.empty:
            continue
        fig.add_trace(
            go.Scatter(
                x=[i + offset[s] for s in v.index],
                y=v.to_numpy(),
                mode="markers",
                name=cond,
                marker=dict(size=10, color=colors[cond], line=dict(width=1, color="white")),
                text=[f"seed {s}" for s in v.index],
                hovertemplate=f"{cond}<br>%{{text}}<br>{metric} %{{y:.4g}}<extra></extra>",
            )
        )
    c = analysis.conditions[np.isfinite(analysis.conditions["mean"].astype(float))]
    if len(c):
        fig.add_trace(_mean_and_ci(analysis, c, conds))
    fig.update_layout(
        template=TEMPLATE,
        title=f"{metric} per seed (completed trials)",
        yaxis_title=metric,
        xaxis=dict(
            tickmode="array",
            tickvals=list(range(len(conds))),
            ticktext=conds,
            range=[-0.6, len(conds) - 0.4],
            zeroline=False,
        ),
        height=420,
        margin=_MARGIN,
    )
    return fig


def _add_seed_lines(fig: go.Figure, conds: list[str], seeds: list, values: dict[str, pd.Series], offset: dict) -> None:
    """A thin line per seed across the conditions (seed-matched designs), at that seed's offset."""
    for k, s in enumerate(seeds):
        fig.add_trace(
            go.Scatter(
                x=[i + offset[s] for i in range(len(conds))],
                y=[values[c].get(s) for c in conds],
                mode="lines",
                line=dict(width=1, color="rgba(120,120,120,0.45)"),
                hoverinfo="skip",
                name="same seed",
                legendgroup="same seed",
                showlegend=k == 0,
            )
        )


def _mean_and_ci(analysis: Analysis, c: pd.DataFrame, conds: list[str]) -> go.Scatter:
    """Each condition's mean with its interval (clipped to the metric's range), beside its seeds."""
    h = analysis.header
    metric = h["primary_metric"]
    low, high = metric_range(analysis, metric)
    mean = c["mean"].to_numpy(float)
    level = f"{int(round((1 - h['alpha']) * 100))}%"
    return go.Scatter(
        x=[conds.index(n) + 0.3 for n in c["condition"]],
        y=mean,
        mode="markers",
        name=f"mean and {level} CI",
        marker=dict(symbol="line-ew-open", size=18, color="#333", line=dict(width=3)),
        error_y=dict(
            type="data",
            symmetric=False,
            color="#333",
            thickness=1.5,
            array=np.clip(c["ci_high"].to_numpy(float), low, high) - mean,
            arrayminus=mean - np.clip(c["ci_low"].to_numpy(float), low, high),
        ),
        hovertext=[
            f"{r.condition}: mean {r.mean:.4g}, {level} CI [{r.ci_low:.4g}, {r.ci_high:.4g}], n={r.n}"
            for r in c.itertuples()
        ],
        hovertemplate="%{hovertext}<extra></extra>",
    )


def components_plot(analysis: Analysis) -> go.Figure:
    """Share of the primary metric's variance from each source: which of seeds, prompts or eval
    samples would buy the most precision."""
    c = analysis.components
    fig = go.Figure(
        go.Bar(
            x=c["share"],
            y=c["source"],
            orientation="h",
            marker_color="#4575b4",
            text=[f"{s:.0%}" for s in c["share"]],
            textposition="outside",
            cliponaxis=False,
            hovertext=[
                f"{r.source}<br>share {r.share:.1%}<br>sd {r.sd:.4g} (variance {r.variance:.4g})"
                + (f"<br>{r.note}" if r.note else "")
                for r in c.itertuples()
            ],
            hovertemplate="%{hovertext}<extra></extra>",
        )
    )
    fig.update_layout(
        template=TEMPLATE,
        title=f"{analysis.header['primary_metric']}: where the variance comes from",
        xaxis=dict(title="share of the total variance", tickformat=".0%", range=[0, 1]),
        yaxis=dict(autorange="reversed", type="category"),
        height=160 + 40 * max(len(c), 1),
        margin=_MARGIN,
    )
    return fig


def curve_plot(analysis: Analysis, metric: str, x: str, *, smooth: int = 1) -> go.Figure:
    """Mean learning curve of each condition with its CI band (``stats.curve_band``), optionally
    as a trailing moving average over ``smooth`` logged points, clipped to the metric's range."""
    band = analysis.curves[(metric, x)]
    colors = colors_for(analysis.header["conditions"])
    low, high = metric_range(analysis, metric)
    fig = go.Figure()
    for cond, b in band.groupby("condition", sort=False):
        color = colors.get(cond, PALETTE[0])
        drawn = moving_average(b[["mean", "low", "high"]].astype(float), smooth).clip(low, high)
        xs = b["x"].to_numpy(float)
        ok = np.isfinite(drawn["low"].to_numpy()) & np.isfinite(drawn["high"].to_numpy())
        if ok.any():
            fig.add_trace(
                go.Scatter(
                    x=np.concatenate([xs[ok], xs[ok][::-1]]),
                    y=np.concatenate([drawn["high"].to_numpy()[ok], drawn["low"].to_numpy()[ok][::-1]]),
                    mode="lines",
                    fill="toself",
                    fillcolor=_rgba(color, 0.18),
                    line=dict(width=0),
                    hoverinfo="skip",
                    name=f"{cond} CI",
                    legendgroup=cond,
                    showlegend=False,
                )
            )
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=drawn["mean"],
                mode="lines+markers" if len(b) <= 20 else "lines",
                name=cond,
                legendgroup=cond,
                line=dict(color=color, width=2),
                customdata=b["n_seeds"],
                hovertemplate=f"{cond}<br>x %{{x:.4g}}<br>mean %{{y:.4g}}<br>seeds %{{customdata}}<extra></extra>",
            )
        )
    by = "step" if x == "step" else "tokens processed"
    smoothed = f"; moving average of {smooth} logged points" if smooth > 1 else ""
    fig.update_layout(  # a short title: the page lays these panels out two a row
        template=TEMPLATE,
        title=dict(text=f"{metric} by {by}", subtitle=dict(text=f"mean and CI over seeds{smoothed}")),
        xaxis_title="step" if x == "step" else "tokens processed (tokens/total)",
        yaxis_title=metric,
        height=400,
        margin=dict(_MARGIN, t=80),
    )
    return fig


def overoptimisation_plot(analysis: Analysis) -> go.Figure:
    """Gold against proxy (left) and against KL to the reference (right), one line per condition
    through its seed-mean points in step order; the first step is marked open."""
    frame, colors = analysis.overoptimisation, colors_for(analysis.header["conditions"])
    has_kl = bool(frame["kl"].notna().any())
    fig = make_subplots(
        rows=1,
        cols=2 if has_kl else 1,
        horizontal_spacing=0.1,
        subplot_titles=["gold against proxy", *(["gold against KL to the reference"] if has_kl else [])],
    )
    panels = [("proxy", PROXY, 1), *([("kl", KL, 2)] if has_kl else [])]
    for cond, g in frame.groupby("condition", sort=False):
        g = g.sort_values("step")
        color = colors.get(cond, "#1f77b4")
        for x, label, col in panels:
            ok = g[[x, "gold"]].notna().all(axis=1)
            h = g[ok]
            if h.empty:
                continue
            symbols = ["circle-open"] + ["circle"] * (len(h) - 1)
            fig.add_trace(
                go.Scatter(
                    x=h[x],
                    y=h["gold"],
                    mode="lines+markers",
                    name=cond,
                    legendgroup=cond,
                    showlegend=col == 1,
                    line=dict(color=color, width=2),
                    marker=dict(color=color, size=7, symbol=symbols),
                    customdata=np.stack([h["step"], h["n_seeds"]], axis=-1),
                    hovertemplate=(
                        f"{cond}<br>step %{{customdata[0]}}<br>{label} %{{x:.4g}}<br>{GOLD} %{{y:.4g}}"
                        "<br>seeds %{customdata[1]}<extra></extra>"
                    ),
                ),
                row=1,
                col=col,
            )
            fig.update_xaxes(title_text=f"{label} (seed mean)", row=1, col=col)
    fig.update_yaxes(title_text=f"{GOLD} (seed mean)", row=1, col=1)
    fig.update_layout(
        template=TEMPLATE,
        height=440,
        margin=dict(l=10, r=10, t=90, b=40),
        title=dict(
            text="Over-optimisation: the verifier's (gold) reward against the learned (proxy) reward and the KL",
            subtitle=dict(
                text="per arm, the seed means at each logged step, joined in step order (open "
                "marker: the first step); gold falling while the proxy rises is the proxy exploited"
            ),
        ),
    )
    return fig


def benchmark_forest_plot(analysis: Analysis) -> go.Figure:
    """Each comparison's difference on each benchmark and overall, with the verdict's interval,
    coloured by verdict: the benchmark verdict table as a picture (one group of rows per benchmark)."""
    b, h = analysis.benchmarks, analysis.header
    overall = b.overall.assign(benchmark="overall (mean)")
    v = pd.concat([b.verdicts, overall], ignore_index=True)
    v = v[np.isfinite(v["diff"].astype(float))].reset_index(drop=True)
    labels = v["benchmark"] + ": " + v["condition"] + " vs " + v["control"]
    span = float(np.nanmax(np.abs(v[["ci_low", "ci_high"]].to_numpy(float)), initial=1.0)) * 1.05
    fig = go.Figure()
    fig.add_vline(x=0, line_color="rgba(60,60,60,0.8)", line_width=1)
    _verdict_traces(fig, v, labels, span)
    better = "right" if h["direction"] == "maximize" else "left"
    fig.update_layout(
        template=TEMPLATE,
        title=dict(
            text=f"Difference from the control on each benchmark, with the verdict's interval ({better} is better)",
            subtitle=dict(
                text=f"intervals at {fmt_level(b.level)}; the last rows: the mean over benchmarks, at "
                f"{fmt_level(b.overall_level)}; each benchmark's min_effect is in its table above"
            ),
        ),
        xaxis_title="condition − control",
        yaxis=dict(autorange="reversed", type="category"),
        legend_title_text="verdict",
        height=200 + 32 * max(len(v), 1),
        margin=dict(_MARGIN, t=90),
    )
    return fig


def performance_profile_plot(analysis: Analysis) -> go.Figure:
    """rliable's performance profiles: per condition, the share of its seed x benchmark scores
    above each threshold, with the stratified bootstrap band."""
    profiles = analysis.benchmarks.profiles
    conds = [c for c in analysis.header["conditions"] if c in set(profiles["condition"])]
    colors = colors_for(analysis.header["conditions"])
    fig = go.Figure()
    for cond in conds:
        p = profiles[profiles["condition"] == cond]
        if p[["low", "high"]].isna().all().all():  # one seed: no band to draw
            fig.add_trace(
                go.Scatter(
                    x=p["tau"],
                    y=p["fraction"],
                    mode="lines",
                    name=f"{cond} (one seed: no band)",
                    line=dict(color=colors[cond]),
                    legendgroup=cond,
                )
            )
            continue
        fig.add_trace(
            go.Scatter(
                x=np.concatenate([p["tau"], p["tau"][::-1]]),
                y=np.concatenate([p["high"], p["low"][::-1]]),
                fill="toself",
                fillcolor=_rgba(colors[cond], 0.15),
                line=dict(width=0),
                hoverinfo="skip",
                showlegend=False,
                legendgroup=cond,
            )
        )
        fig.add_trace(
            go.Scatter(
                x=p["tau"], y=p["fraction"], mode="lines", name=cond, line=dict(color=colors[cond]), legendgroup=cond
            )
        )
    minimise = analysis.header["direction"] == "minimize"
    fig.update_layout(
        template=TEMPLATE,
        title=dict(
            text="Performance profiles over the benchmarks",
            subtitle=dict(
                text=f"share of seed x benchmark scores {'below' if minimise else 'above'} each threshold; "
                "band: stratified bootstrap interval"
            ),
        ),
        xaxis_title="threshold (benchmark score)",
        yaxis_title=f"fraction of scores {'<' if minimise else '>'} threshold",
        yaxis_range=[0, 1],
        height=420,
        margin=dict(_MARGIN, t=90),
    )
    return fig


def scaling_plot(analysis: Analysis) -> go.Figure:
    """Each condition's mean curve of the primary metric against the compute axis with its band
    over seeds (shaded), the fitted saturating curve over it (dashed) and, where the fit is
    identified, its ceiling A (dotted)."""
    s = analysis.scaling
    colors = colors_for(analysis.header["conditions"])
    low, high = metric_range(analysis, s.metric)
    params = s.parameters.set_index("condition")
    fig = go.Figure()
    for cond, b in s.curves.groupby("condition", sort=False):
        color = colors.get(cond, PALETTE[0])
        xs = b["x"].to_numpy(float)
        lo, hi = b["low"].clip(low, high).to_numpy(float), b["high"].clip(low, high).to_numpy(float)
        ok = np.isfinite(lo) & np.isfinite(hi)
        if ok.any():
            fig.add_trace(
                go.Scatter(
                    x=np.concatenate([xs[ok], xs[ok][::-1]]),
                    y=np.concatenate([hi[ok], lo[ok][::-1]]),
                    mode="lines",
                    fill="toself",
                    fillcolor=_rgba(color, 0.18),
                    line=dict(width=0),
                    hoverinfo="skip",
                    legendgroup=cond,
                    showlegend=False,
                )
            )
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=b["mean"],
                mode="lines",
                name=cond,
                legendgroup=cond,
                line=dict(color=color, width=2),
                customdata=b["n_seeds"],
                hovertemplate=f"{cond}<br>{s.axis} %{{x:.4g}}<br>mean %{{y:.4g}}<br>seeds %{{customdata}}"
                "<extra></extra>",
            )
        )
        p = params.loc[cond]
        if b["fitted"].notna().any():
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=b["fitted"],
                    mode="lines",
                    name=f"{cond} fit",
                    legendgroup=cond,
                    showlegend=False,
                    line=dict(color=color, width=2, dash="dash"),
                    hovertemplate=(
                        f"{cond} fit: A {p['A']:.4g}, B {p['B']:.3g}, C_mid {p['C_mid']:.4g}"
                        "<br>%{x:.4g}: %{y:.4g}<extra></extra>"
                    ),
                )
            )
        if p["identified"]:
            fig.add_hline(y=float(p["A"]), line=dict(color=color, width=1, dash="dot"), opacity=0.7)
    fig.update_layout(
        template=TEMPLATE,
        title=dict(
            text=f"{s.metric} against {s.axis}: ceilings and efficiency",
            subtitle=dict(
                text=f"mean and {_pct(s.level)} band over seeds; dashed: the fitted R0 + (A - R0) / (1 + (C_mid/C)^B); "
                "dotted: the ceiling A of an identified fit"
            ),
        ),
        xaxis_title=s.axis,
        yaxis_title=s.metric,
        height=440,
        margin=dict(_MARGIN, t=90),
    )
    return fig


def all_figures(analysis: Analysis, *, smooth: int = 1) -> list[tuple[str, str, go.Figure]]:
    """(div id, heading, figure) for every figure of the report, in page order."""
    figs: list[tuple[str, str, go.Figure]] = []
    if np.isfinite(analysis.verdicts["diff"].astype(float)).any():
        figs.append(("fig-forest", "Differences from the control", forest_plot(analysis)))
    if analysis.benchmarks is not None:
        figs.append(("fig-bench-forest", "Differences per benchmark", benchmark_forest_plot(analysis)))
        if len(analysis.benchmarks.profiles):
            figs.append(("fig-bench-profile", "Performance profiles", performance_profile_plot(analysis)))
    if len(completed(analysis.trials)):
        figs.append(("fig-strip", "Per-seed values", seed_plot(analysis)))
    if len(analysis.components):
        figs.append(("fig-components", "Variance components", components_plot(analysis)))
    for i, (metric, x) in enumerate(analysis.curves):
        figs.append((f"fig-curve-{i}", f"{metric} by {x}", curve_plot(analysis, metric, x, smooth=smooth)))
    if len(analysis.overoptimisation):
        figs.append(("fig-overopt", "Over-optimisation: gold against proxy and KL", overoptimisation_plot(analysis)))
    if analysis.scaling is not None and len(analysis.scaling.curves):
        figs.append(("fig-scaling", "Ceilings and efficiency: fitted compute curves", scaling_plot(analysis)))
    return figs
