"""The fitted compute curves' display table: A, B and C_mid with their intervals, the ceiling and
efficiency verdicts, and the notes (why no verdict, each extrapolation check)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.decide.analysis import Analysis
from harness.report.cells import DASH, fmt, fmt_ci, fmt_level


def _estimate(point, low, high) -> str:
    return DASH if point is None or not np.isfinite(point) else f"{fmt(point)} {fmt_ci(low, high)}"


def scaling_display(analysis: Analysis) -> pd.DataFrame:
    """Per condition: A, B and C_mid with their intervals, the fit's state, and its two verdicts
    against the control (the difference or ratio, its interval and the label; or why none)."""
    s = analysis.scaling
    verdicts = {r["condition"]: r for r in s.verdicts.to_dict(orient="records")}
    rows = []
    for p in s.parameters.to_dict(orient="records"):
        v = verdicts.get(p["condition"])
        fit = "identified" if p["identified"] else p["reason"] or "not identified"
        if p["identified"] and p["reason"]:
            fit += f" ({p['reason']})"
        row = {
            "condition": p["condition"],
            "seeds": fmt(p["seeds"]),
            "A (ceiling)": _estimate(p["A"], p["A_low"], p["A_high"]),
            "B": _estimate(p["B"], p["B_low"], p["B_high"]),
            "C_mid": _estimate(p["C_mid"], p["C_mid_low"], p["C_mid_high"]),
            "fit": fit,
            "ceiling vs control": DASH,
            "efficiency vs control (C_mid ratio)": DASH,
        }
        if v is not None:
            for key, point in (("ceiling", "ceiling_diff"), ("efficiency", "efficiency_ratio")):
                column = "ceiling vs control" if key == "ceiling" else "efficiency vs control (C_mid ratio)"
                if v[f"{key}_reason"]:
                    row[column] = v[f"{key}_verdict"]
                else:
                    interval = f"{fmt_level(v[f'{key}_level'])} {fmt_ci(v[f'{key}_low'], v[f'{key}_high'])}"
                    row[column] = f"{v[f'{key}_verdict']}: {fmt(v[point])} {interval}"
        rows.append(row)
    return pd.DataFrame(rows)


def scaling_notes(analysis: Analysis) -> list[str]:
    """Why a comparison has no verdict, and each condition's extrapolation check in one line."""
    s = analysis.scaling
    notes = list(s.notes)
    for v in s.verdicts.to_dict(orient="records"):
        for key in ("ceiling", "efficiency"):
            if v[f"{key}_reason"]:
                notes.append(f"{v['condition']} vs {v['control']}, {key}: no verdict, {v[f'{key}_reason']}.")
    for e in s.extrapolation.to_dict(orient="records"):
        head = f"Extrapolation, {e['condition']}: fitted on {s.axis} up to {fmt(e['c_split'])}"
        if e["within"] is None or (isinstance(e["within"], float) and np.isnan(e["within"])):
            notes.append(f"{head}; no check: {e['reason']}.")
            continue
        verdict = "within the noise band" if e["within"] else "outside the noise band"
        caveat = "" if e["first_half_identified"] else f" (the first half's fit is not identified: {e['reason']})"
        notes.append(
            f"{head}, the {fmt(e['points_checked'])} points past it predicted with RMSE {fmt(e['rmse'])} "
            f"(largest error {fmt(e['max_abs_error'])}) against a band of +-{fmt(e['band'])} around the seeds' "
            f"mean (its seed SE {fmt(e['noise_se'])}): {verdict}{caveat}."
        )
    return notes


def scaling_caption(analysis: Analysis) -> str:
    s, h = analysis.scaling, analysis.header
    margin = (
        f"equivalent inside +-{fmt(h['min_effect'])} (min_effect)"
        if h["min_effect"] is not None
        else "no equivalence without min_effect"
    )
    tests = sorted(set(s.verdicts["test"]))
    resampled = f"; the verdicts': {', '.join(tests)}" if tests else ""
    return (
        f"{s.metric} against {s.axis}, fitted per condition with R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) "
        "(ScaleRL, Khatri et al. 2025; R0: the start evaluation's mean). A is the ceiling, C_mid the compute "
        f"at half the gain, B the steepness; intervals at {fmt_level(s.level)} by a seed jackknife (t, n - 1 df; "
        "B and C_mid on the log scale), with a grouped prompt jackknife added where every evaluation recorded "
        f"per-prompt scores (Satterthwaite df){resampled}. Ceiling: A minus the control's A, read like the "
        f"verdicts above ({margin}). Efficiency: the C_mid ratio to the control; below 1 reaches half its gain "
        "with less compute. More or less efficient when its interval excludes 1, equally efficient inside "
        f"[1/{fmt(s.efficiency_margin)}, {fmt(s.efficiency_margin)}]. Each kind of verdict is one family "
        "(Bonferroni over the comparisons). A fit that did not converge or whose ceiling and midpoint the data do "
        "not determine gets no verdict."
    )
