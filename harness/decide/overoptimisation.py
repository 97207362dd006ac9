"""Over-optimisation of a learned reward, measured (Gao, Schulman & Hilton 2023).

A study trained on a learned reward model logs, per step, the proxy (``train/reward_proxy``: the
training reward, from the model) beside the gold score (``train/reward_gold``: the verifier's on
the same samples). An arm exploiting the proxy shows gold that flattens or falls while the proxy
keeps rising, and, against the KL to the reference (``train/kl_ref``), where along the drift it
starts. Per condition this takes the seed mean of each at every step (``stats.curve_band``) over
completed trials; the report's figure (``harness.report.figures.overoptimisation_plot``) draws
gold against proxy and gold against KL, the points joined in step order. A report of a study
that logged no proxy and gold has no such section.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness import stats
from harness.decide.frames import completed, conditions_of

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
        wide = {
            metric: (
                mine[mine["metric"] == metric]
                .pivot_table(index="trial_id", columns="step", values="value", aggfunc="last")
                .reindex(index=trials, columns=steps)
                .to_numpy(dtype=float)
            )
            for metric in (PROXY, GOLD, KL)
        }
        row = {
            "condition": cond,
            "step": steps,
            **{
                name: np.asarray(stats.curve_band(wide[metric])[0], dtype=float)
                for metric, name in ((PROXY, "proxy"), (GOLD, "gold"), (KL, "kl"))
            },
            "n_seeds": (np.isfinite(wide[PROXY]) & np.isfinite(wide[GOLD])).sum(axis=0),
        }
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
            rows.append(
                {
                    "condition": cond,
                    "step": int(last["step"]),
                    "proxy": last["proxy"],
                    "gold": last["gold"],
                    "kl": last["kl"],
                    "seeds": int(last["n_seeds"]),
                }
            )
    return pd.DataFrame(rows, columns=["condition", "step", "proxy", "gold", "kl", "seeds"])
