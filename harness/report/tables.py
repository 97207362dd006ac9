"""Turn the analysis frames into display tables (strings), shared by the HTML, Markdown and
terminal writers so that every output shows the same numbers formatted the same way."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from harness.report.analysis import SEEDS_SEARCH_LIMIT, Analysis

DASH = "—"


@dataclass
class Section:
    key: str
    title: str
    table: pd.DataFrame  # all cells are strings
    caption: str = ""
    notes: list[str] = field(default_factory=list)  # shown as a list under the table


def fmt(x, digits: int = 4) -> str:
    if x is None:
        return DASH
    if isinstance(x, str):  # a label (an arm may be called "nan"), never parsed as a number
        return x or DASH
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    try:
        xf = float(x)
    except (TypeError, ValueError):
        return str(x)
    if not np.isfinite(xf):
        return DASH
    if xf.is_integer() and abs(xf) < 1e15 and digits >= 4:
        return str(int(xf))
    return f"{xf:.{digits}g}"


def fmt_p(p) -> str:
    return fmt(p, 3)


def fmt_seeds(n) -> str:
    """Seeds per arm; past the planner's search limit, the limit itself ("> 10000")."""
    if n is not None and np.isfinite(n) and n > SEEDS_SEARCH_LIMIT:
        return f"> {SEEDS_SEARCH_LIMIT}"
    return fmt(n)


def _ci(lo, hi) -> str:
    if lo is None or hi is None or not (np.isfinite(lo) and np.isfinite(hi)):
        return DASH
    return f"[{fmt(lo)}, {fmt(hi)}]"


def _pct(alpha: float) -> str:
    return f"{int(round((1 - alpha) * 100))}%"


def verdict_display(analysis: Analysis) -> pd.DataFrame:
    h = analysis.header
    corr = "Holm" if h["correction"] == "holm" else "BH"
    rows = []
    for _, r in analysis.verdicts.iterrows():
        n = f"{int(r['n'])} pairs" if r["paired"] else f"{int(r['n'])} vs {int(r['n_control'])}"
        rows.append({
            "condition": r["condition"],
            "control": r["control"],
            "seeds": n,
            "mean": fmt(r["mean"]),
            "control mean": fmt(r["mean_control"]),
            "difference": fmt(r["diff"]),
            f"{_pct(h['alpha'])} CI": _ci(r["ci_low"], r["ci_high"]),
            "test": r["test"] if isinstance(r["test"], str) else DASH,
            "p": fmt_p(r["p_value"]),
            f"p ({corr})": fmt_p(r["p_adjusted"]),
            "Hedges g": fmt(r["hedges_g"], 3),
            "P(improvement)": fmt(r["prob_improvement"], 3),
            "pairing r": fmt(r["pair_correlation"], 3),
            "verdict": r["verdict"],
            "seeds needed": fmt_seeds(r["seeds_needed"]),
        })
    return pd.DataFrame(rows)


def verdict_notes(analysis: Analysis) -> list[str]:
    return [f"{r['condition']} vs {r['control']}: {r['reason']}"
            for _, r in analysis.verdicts.iterrows() if r["reason"]]


def robustness_display(analysis: Analysis) -> pd.DataFrame:
    alpha = analysis.header["alpha"]
    rows = []
    for _, r in analysis.robustness.iterrows():
        if not r["can_reject"]:
            result = r["note"]
        elif np.isfinite(r["p_value"]) and r["p_value"] <= alpha:
            result = f"rejects at alpha={alpha:g}"
        else:
            result = "does not reject"
        rows.append({
            "comparison": f"{r['condition']} vs {r['control']}",
            "check": r["check"],
            "p": fmt_p(r["p_value"]),
            "smallest attainable p": fmt_p(r["min_attainable_p"]),
            "result": result,
        })
    return pd.DataFrame(rows)


def conditions_display(analysis: Analysis) -> pd.DataFrame:
    pct = _pct(analysis.header["alpha"])
    return pd.DataFrame([
        {"condition": r["condition"], "completed seeds": fmt(r["n"]), "mean": fmt(r["mean"]),
         f"{pct} CI (t)": _ci(r["ci_low"], r["ci_high"])}
        for _, r in analysis.conditions.iterrows()
    ])


def noise_display(analysis: Analysis) -> pd.DataFrame:
    return noise_table_display(analysis.noise_floor, analysis.header["alpha"])


def noise_table_display(nf: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    pct = _pct(alpha)
    return pd.DataFrame([
        {"condition": r["condition"], "seeds": fmt(r["n"]), "mean": fmt(r["mean"]), "seed std": fmt(r["std"]),
         f"std {pct} CI": _ci(r["std_ci_low"], r["std_ci_high"]), "sem": fmt(r["sem"]),
         "MDE at these seeds": fmt(r["mde"]), "seeds for a 1-sd effect": fmt(r["seeds_for_1sd"]),
         "note": r["note"] if isinstance(r["note"], str) else ""}
        for _, r in nf.iterrows()
    ])


def cost_display(analysis: Analysis) -> pd.DataFrame:
    return pd.DataFrame([
        {"condition": r["condition"], "trials": fmt(r["trials"]), "completed": fmt(r["completed"]),
         "failed": fmt(r["failed"]), "running": fmt(r["running"]), "waiting": fmt(r["waiting"]),
         "wall time (s)": fmt(r["wall_time_s"]),
         "wall time per completed trial (s)": fmt(r["wall_time_s_per_completed"]),
         "tokens": fmt(r["tokens"])}
        for _, r in analysis.cost.iterrows()
    ])


def _strings(df: pd.DataFrame) -> pd.DataFrame:
    return df.astype(object).map(fmt) if len(df) else df.astype(object)


def sections(analysis: Analysis, *, include_trials: bool = True) -> list[Section]:
    """The report's tables in page order."""
    h = analysis.header
    corr = "Holm" if h["correction"] == "holm" else "Benjamini-Hochberg"
    out = [
        Section("verdicts", "Verdicts", verdict_display(analysis),
                f"Each condition against its control on {h['primary_metric']} ({h['direction']}). "
                f"p-values corrected with {corr} over the pre-registered comparisons that could be tested. "
                "Seed-matched pairs use the paired analysis (pairing r is the correlation between paired seeds). "
                "'seeds needed' is the seeds per arm to detect the observed difference at 80% power.",
                verdict_notes(analysis)),
        Section("robustness", "Robustness checks", robustness_display(analysis),
                "Other tests of the same comparison. A test whose smallest attainable p-value is above alpha "
                "at this number of seeds 'cannot reject' - that is not evidence of no effect."),
        Section("conditions", "Condition means", conditions_display(analysis), ""),
        Section("noise", "Noise floor", noise_display(analysis),
                "Seed-to-seed standard deviation of each condition, the minimal detectable difference (MDE) "
                "between two arms at the seeds run, and the seeds per arm needed to detect a 1-sd effect."),
        Section("cost", "Cost", cost_display(analysis), "Wall time and tokens summed over trials."),
        Section("failed", "Failed trials", _strings(analysis.failed),
                "Failed trials are left out of the statistics; each is listed with its reason."),
    ]
    if len(analysis.pending):
        out.append(Section("pending", "Trials still running or waiting", _strings(analysis.pending), ""))
    out.append(Section("config", "What differs between the arms", _strings(analysis.config_diff),
                       "Configuration keys whose values differ across conditions."))
    if include_trials:
        out.append(Section("trials", "All trials", _strings(analysis.trials), "Also written as results.csv."))
    return out
