"""Over-optimisation of a learned reward, measured (Gao, Schulman & Hilton 2023).

A study trained on a learned reward model logs, per step, the proxy (``train/reward_proxy``: the
training reward, from the model) beside the gold score (``train/reward_gold``: the verifier's on
the same samples). An arm exploiting the proxy shows gold that flattens or falls while the proxy
keeps rising, and, against the KL to the reference (``train/kl_ref``), where along the drift it
starts. Per condition this takes the seed mean of each at every step (``stats.curve_band``) over
completed trials; the figure draws gold against proxy and gold against KL, the points joined in
step order. A report of a study that logged no proxy and gold has no such section.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from harness import stats
from harness.report.frames import completed, conditions_of

PROXY, GOLD, KL = "train/reward_proxy", "train/reward_gold", "train/kl_ref"
COLUMNS = ["condition", "step", "proxy", "gold", "kl", "n_seeds"]


def overoptimisation_frame(results) -> pd.DataFrame:
    """Per condition and step: the seed means of proxy, gold and KL (KL NaN when not logged), and
    the seeds with both proxy and gold at that step. Empty unless the curves hold proxy and gold."""
    curves = results.curves
    if curves is None or not len(curves) or not {PROXY, GOLD} <= set(curves["metric"].unique()):
        return pd.DataFrame(columns=COLUMNS)
    done = set(completed(results.trials)["trial_id"])
    curves = curves[curves["trial_id"].isin(done) & curves["metric"].isin([PROXY, GOLD, KL])]
    frames = []
    for cond in conditions_of(results):
        mine = curves[curves["arm"] == cond]
        if mine.empty or not {PROXY, GOLD} <= set(mine["metric"]):
            continue
        steps = np.sort(mine.loc[mine["metric"].isin([PROXY, GOLD]), "step"].unique())
        trials = sorted(mine["trial_id"].unique())
        wide = {metric: (mine[mine["metric"] == metric]
                         .pivot_table(index="trial_id", columns="step", values="value", aggfunc="last")
                         .reindex(index=trials, columns=steps).to_numpy(dtype=float))
                for metric in (PROXY, GOLD, KL)}
        row = {"condition": cond, "step": steps,
               **{name: np.asarray(stats.curve_band(wide[metric])[0], dtype=float)
                  for metric, name in ((PROXY, "proxy"), (GOLD, "gold"), (KL, "kl"))},
               "n_seeds": (np.isfinite(wide[PROXY]) & np.isfinite(wide[GOLD])).sum(axis=0)}
        frames.append(pd.DataFrame(row))
    return pd.concat(frames, ignore_index=True)[COLUMNS] if frames else pd.DataFrame(columns=COLUMNS)


def last_step_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Each condition's last step with proxy and gold: the step and its seed means."""
    if frame.empty:
        return pd.DataFrame(columns=["condition", "step", "proxy", "gold", "kl", "seeds"])
    rows = []
    for cond, g in frame.groupby("condition", sort=False):
        g = g.dropna(subset=["proxy", "gold"])
        if len(g):
            last = g.iloc[-1]
            rows.append({"condition": cond, "step": int(last["step"]), "proxy": last["proxy"], "gold": last["gold"],
                         "kl": last["kl"], "seeds": int(last["n_seeds"])})
    return pd.DataFrame(rows, columns=["condition", "step", "proxy", "gold", "kl", "seeds"])


def overoptimisation_plot(frame: pd.DataFrame, colors: dict[str, str], template: dict) -> go.Figure:
    """Gold against proxy (left) and against KL to the reference (right), one line per condition
    through its seed-mean points in step order; the first step is marked open."""
    has_kl = bool(frame["kl"].notna().any())
    fig = make_subplots(rows=1, cols=2 if has_kl else 1, horizontal_spacing=0.1,
                        subplot_titles=["gold against proxy", *(["gold against KL to the reference"] if has_kl else [])])
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
            fig.add_trace(go.Scatter(
                x=h[x], y=h["gold"], mode="lines+markers", name=cond, legendgroup=cond, showlegend=col == 1,
                line=dict(color=color, width=2), marker=dict(color=color, size=7, symbol=symbols),
                customdata=np.stack([h["step"], h["n_seeds"]], axis=-1),
                hovertemplate=(f"{cond}<br>step %{{customdata[0]}}<br>{label} %{{x:.4g}}<br>{GOLD} %{{y:.4g}}"
                               "<br>seeds %{customdata[1]}<extra></extra>"),
            ), row=1, col=col)
            fig.update_xaxes(title_text=f"{label} (seed mean)", row=1, col=col)
    fig.update_yaxes(title_text=f"{GOLD} (seed mean)", row=1, col=1)
    fig.update_layout(
        template=template, height=440, margin=dict(l=10, r=10, t=90, b=40),
        title=dict(text="Over-optimisation: the verifier's (gold) reward against the learned (proxy) reward and the KL",
                   subtitle=dict(text="per arm, the seed means at each logged step, joined in step order (open "
                                 "marker: the first step); gold falling while the proxy rises is the proxy exploited")),
    )
    return fig
