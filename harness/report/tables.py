"""Turn the analysis frames into display tables (strings), shared by the HTML, Markdown and
terminal writers so that every output shows the same numbers formatted the same way."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from harness.decide.analysis import Analysis
from harness.decide.comparisons import SEEDS_SEARCH_LIMIT
from harness.decide.overoptimisation import last_step_table

DASH = "—"


@dataclass
class Section:
    key: str
    title: str
    table: pd.DataFrame  # all cells are strings
    caption: str = ""
    notes: list[str] = field(default_factory=list)  # shown as a list under the table


def jsonable(x: Any) -> Any:
    """A report value as plain JSON (what ``--json`` prints): frames become lists of rows, numpy
    scalars Python ones, and a NaN, an infinity or a missing value ``None``."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, pd.DataFrame):
        return jsonable(x.to_dict(orient="records"))
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return None if not math.isfinite(float(x)) else float(x)
    if x is None or isinstance(x, (str, int)):
        return x
    if x is pd.NA or x is pd.NaT:
        return None
    return str(x)


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


def _level(level) -> str:
    return f"{float(level) * 100:.4g}%" if level is not None and np.isfinite(level) else DASH


def verdict_display(analysis: Analysis) -> pd.DataFrame:
    rows = []
    for _, r in analysis.verdicts.iterrows():
        n = f"{int(r['n'])} pairs" if r["paired"] else f"{int(r['n'])} vs {int(r['n_control'])}"
        label = r["verdict"] + (" (real but smaller than min_effect)" if r["smaller_than_min_effect"] else "")
        rows.append(
            {
                "condition": r["condition"],
                "control": r["control"],
                "seeds": n,
                "failed": f"{int(r['failed'])} / {int(r['failed_control'])}",
                "mean": fmt(r["mean"]),
                "control mean": fmt(r["mean_control"]),
                "difference": fmt(r["diff"]),
                "interval": _ci(r["ci_low"], r["ci_high"]),
                "level": _level(r["ci_level"]),
                "test": r["test"] if isinstance(r["test"], str) else DASH,
                "p (adjusted)": fmt_p(r["p_adjusted"]),
                "Hedges g": fmt(r["hedges_g"], 3),
                "verdict": label,
                "seeds to decide (true difference 0)": fmt_seeds(r["seeds_needed_null"]),
                "seeds to decide (true difference = planning effect)": fmt_seeds(r["seeds_needed_effect"]),
            }
        )
    return pd.DataFrame(rows)


#: the compact verdict table's columns, taken from the full one (seeds to decide: both figures in one cell)
COMPACT_VERDICT_COLUMNS = ("condition", "difference", "interval", "verdict")
SEEDS_TO_DECIDE = "seeds to decide (0 / effect)"


def compact_verdict_display(full: pd.DataFrame) -> pd.DataFrame:
    """The verdict table a reader needs first, five columns wide, cut from ``verdict_display``
    (same cells): condition, difference, interval, verdict, and the seeds to decide at a true
    difference of 0 and of the planning effect."""
    if full.empty:
        return pd.DataFrame(columns=[*COMPACT_VERDICT_COLUMNS, SEEDS_TO_DECIDE])
    null = full["seeds to decide (true difference 0)"]
    effect = full["seeds to decide (true difference = planning effect)"]
    return full[list(COMPACT_VERDICT_COLUMNS)].assign(
        **{SEEDS_TO_DECIDE: [DASH if (n, e) == (DASH, DASH) else f"{n} / {e}" for n, e in zip(null, effect)]}
    )


def verdict_notes(analysis: Analysis) -> list[str]:
    return [
        f"{r['condition']} vs {r['control']}: {r['reason']}" for _, r in analysis.verdicts.iterrows() if r["reason"]
    ]


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
        rows.append(
            {
                "comparison": f"{r['condition']} vs {r['control']}",
                "check": r["check"],
                "p": fmt_p(r["p_value"]),
                "smallest attainable p": fmt_p(r["min_attainable_p"]),
                "result": result,
            }
        )
    return pd.DataFrame(rows)


def conditions_display(analysis: Analysis) -> pd.DataFrame:
    pct = _pct(analysis.header["alpha"])
    return pd.DataFrame(
        [
            {
                "condition": r["condition"],
                "completed seeds": fmt(r["n"]),
                "mean": fmt(r["mean"]),
                f"{pct} CI (t)": _ci(r["ci_low"], r["ci_high"]),
            }
            for _, r in analysis.conditions.iterrows()
        ]
    )


def noise_display(analysis: Analysis) -> pd.DataFrame:
    return noise_table_display(analysis.noise_floor, analysis.header["alpha"])


def noise_table_display(nf: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    pct = _pct(alpha)
    return pd.DataFrame(
        [
            {
                "condition": r["condition"],
                "seeds": fmt(r["n"]),
                "failed": fmt(r["failed"]),
                "mean": fmt(r["mean"]),
                "sd of trial means": fmt(r["std"]),
                f"{pct} CI of that sd": _ci(r["std_ci_low"], r["std_ci_high"]),
                "CI method": r["std_ci_method"] if isinstance(r["std_ci_method"], str) else DASH,
                "normality p (Shapiro-Wilk)": fmt_p(r["normality_p"]),
                "sem": fmt(r["sem"]),
                "seeds to decide": fmt_seeds(r["seeds_needed"]),
                "note": r["note"] if isinstance(r["note"], str) else "",
            }
            for _, r in nf.iterrows()
        ]
    )


def components_display(analysis: Analysis) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "source": r["source"],
                "variance": fmt(r["variance"]),
                "sd (component)": fmt(r["sd"]),
                "share": f"{r['share']:.1%}" if np.isfinite(r["share"]) else DASH,
                "note": r["note"],
            }
            for _, r in analysis.components.iterrows()
        ]
    )


def budget_display(analysis: Analysis) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "design": r["option"],
                "seeds per arm": fmt(r["seeds"]),
                "eval prompts": fmt(r["prompts"]),
                "eval samples": fmt(r["samples"]),
                "predicted SE of a difference": fmt(r["se_diff"]),
            }
            for _, r in analysis.budget.iterrows()
        ]
    )


def cost_display(analysis: Analysis) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "condition": r["condition"],
                "trials": fmt(r["trials"]),
                "completed": fmt(r["completed"]),
                "failed": fmt(r["failed"]),
                "running": fmt(r["running"]),
                "waiting": fmt(r["waiting"]),
                "wall time (s)": fmt(r["wall_time_s"]),
                "wall time per completed trial (s)": fmt(r["wall_time_s_per_completed"]),
                "tokens": fmt(r["tokens"]),
            }
            for _, r in analysis.cost.iterrows()
        ]
    )


def _strings(df: pd.DataFrame) -> pd.DataFrame:
    return df.astype(object).map(fmt) if len(df) else df.astype(object)


def _label_notes(labels: set[str]) -> str:
    """What the eval-only and untested labels mean, said only when a verdict carries one."""
    notes = []
    if any(str(label).endswith("(eval-only)") for label in labels):
        notes.append(
            " '(eval-only)': a side has one training run, so the interval is over the eval prompts (and "
            "eval samples) of these checkpoints; the training seed's noise is unknown, so the verdict is "
            "conditional on these checkpoints and says nothing about another training run of the arm."
        )
    if "untested" in labels:
        notes.append(
            " Untested: the comparison cannot be tested at all (the note below says why); it is not in the family."
        )
    return "".join(notes)


def _verdict_caption(h: dict, labels: set[str] = frozenset()) -> str:
    family = (
        "Bonferroni over the pre-registered comparisons that could be tested, so all verdicts hold "
        f"together with probability at least {1 - h['alpha']:.0%}"
        if h["correction"] == "bonferroni"
        else "each comparison alone (correction: none): the verdicts do not hold together"
    )
    margin = (
        f"equivalent: it lies inside +-{fmt(h['min_effect'])} (min_effect)"
        if h["min_effect"] is not None
        else "equivalence cannot be concluded: the study names no min_effect"
    )
    effect = (
        f"min_effect ({fmt(h['min_effect'])})"
        if h["min_effect"] is not None
        else f"one sd of trial means ({fmt(h['planning_effect'])})"
        if h.get("planning_effect")
        else "the planning effect"
    )
    level = (
        "the repeated confidence interval of the look that decided it (or of its latest look; alpha "
        "spent across the looks, so stopping at any look keeps the error rates)"
        if h.get("sequential")
        else f"at level {_level(h['ci_level'])}"
    )
    return (
        f"Each condition against its control on {h['primary_metric']} ({h['direction']}). The interval is "
        f"the one the verdict reads, {level} ({family}). Better / worse: it excludes "
        f"0 on that side; {margin}; otherwise inconclusive. 'seeds to decide (0 / effect)': seeds per arm at "
        f"which this design reaches a verdict with 80% probability for a true difference of 0 / of {effect}, "
        "from the measured variance (prospective, never from the observed difference)." + _label_notes(labels)
    )


def overoptimisation_display(analysis: Analysis) -> pd.DataFrame:
    last = last_step_table(analysis.overoptimisation)
    return pd.DataFrame(
        {
            "condition": last["condition"],
            "step": [fmt(int(s)) for s in last["step"]],
            "proxy": [fmt(v) for v in last["proxy"]],
            "gold": [fmt(v) for v in last["gold"]],
            "KL": [fmt(v) for v in last["kl"]],
            "seeds": [fmt(int(s)) for s in last["seeds"]],
        },
        columns=["condition", "step", "proxy", "gold", "KL", "seeds"],
    )


def _verdict_cell(r) -> str:
    """``+0.058 [0.044, 0.073] better``: a verdict row in one cell."""
    label = r["verdict"] + (" (smaller than min_effect)" if r["smaller_than_min_effect"] else "")
    return f"{fmt(r['diff'])} {_ci(r['ci_low'], r['ci_high'])} {label}"


def benchmark_verdicts_display(analysis: Analysis) -> pd.DataFrame:
    """Benchmarks (rows) x comparisons (columns): each cell the difference, its interval and
    the verdict; the last row the overall verdict on the mean over benchmarks."""
    b = analysis.benchmarks
    columns = [f"{c} vs {k}" for c, k in zip(b.overall["condition"], b.overall["control"])]
    rows = []
    for bench in b.benchmarks:
        v = b.verdicts[b.verdicts["benchmark"] == bench["name"]]
        margin = v["min_effect"].iloc[0] if len(v) else None
        rows.append(
            {
                "benchmark": bench["name"],
                "metric": bench["metric"],
                "min_effect": fmt(margin),
                **{col: _verdict_cell(r) for col, (_, r) in zip(columns, v.iterrows())},
            }
        )
    rows.append(
        {
            "benchmark": "overall (mean of the differences)",
            "metric": "—",
            "min_effect": fmt(analysis.header["min_effect"]),
            **{col: _verdict_cell(r) for col, (_, r) in zip(columns, b.overall.iterrows())},
        }
    )
    return pd.DataFrame(rows, columns=["benchmark", "metric", "min_effect", *columns])


def benchmark_overall_display(analysis: Analysis) -> pd.DataFrame:
    """Per comparison: the overall verdict, and beside it rliable's IQM of each side and the
    probability of improvement, with their bootstrap intervals."""
    b = analysis.benchmarks
    aggregates = b.aggregates.set_index("condition")

    def iqm(cond: str) -> str:
        if cond not in aggregates.index:
            return DASH
        a = aggregates.loc[cond]
        return f"{fmt(a['iqm'])} {_ci(a['iqm_low'], a['iqm_high'])}"

    rows = []
    for _, r in b.overall.iterrows():
        poi = aggregates.loc[r["condition"]] if r["condition"] in aggregates.index else None
        poi_text = (
            DASH
            if poi is None
            else f"{fmt(poi['prob_improvement'], 3)} {_ci(poi['prob_improvement_low'], poi['prob_improvement_high'])}"
        )
        rows.append(
            {
                "condition": r["condition"],
                "control": r["control"],
                "mean difference": fmt(r["diff"]),
                "interval": _ci(r["ci_low"], r["ci_high"]),
                "level": _level(r["ci_level"]),
                "verdict": r["verdict"] + (" (smaller than min_effect)" if r["smaller_than_min_effect"] else ""),
                "IQM": iqm(r["condition"]),
                "control IQM": iqm(r["control"]),
                "P(improvement)": poi_text,
            }
        )
    return pd.DataFrame(rows)


def _benchmark_caption(analysis: Analysis) -> str:
    b, h = analysis.benchmarks, analysis.header
    return (
        f"Each comparison on each held-out benchmark, with the study's primary test and the benchmark's "
        f"min_effect (else the study's). Intervals at {_level(b.level)}: Bonferroni over the "
        f"{b.family_size} testable comparisons x benchmarks, so all these verdicts hold together with "
        f"probability at least {1 - h['alpha']:.0%}. The last row is the pre-registered overall verdict: the "
        "mean of the benchmark differences, the benchmarks taken as fixed (each seed's scores averaged over "
        f"the benchmarks, then the same paired test, plus each benchmark's arm x prompt term), at "
        f"{_level(b.overall_level)} over the comparisons, against the study's min_effect."
    )


def benchmark_sections(analysis: Analysis) -> list[Section]:
    """The held-out benchmarks' tables (none without benchmarks)."""
    b = analysis.benchmarks
    if b is None:
        return []
    reasons = [
        f"{r['benchmark']}: {r['condition']} vs {r['control']}: {r['reason']}"
        for _, r in pd.concat(
            [b.verdicts.assign(benchmark=b.verdicts["benchmark"]), b.overall.assign(benchmark="overall")]
        ).iterrows()
        if not np.isfinite(r["p_value"])  # untested: the reason says why
    ]
    pct = _pct(analysis.header["alpha"])
    return [
        Section(
            "benchmarks",
            "Verdicts by benchmark",
            benchmark_verdicts_display(analysis),
            _benchmark_caption(analysis),
            [*b.notes, *reasons],
        ),
        Section(
            "benchmarks-overall",
            "Overall verdicts and aggregates across benchmarks",
            benchmark_overall_display(analysis),
            "The overall verdict (as in the last row above) beside rliable's descriptive aggregates over each "
            "condition's seeds x benchmarks scores: the interquartile mean (IQM) and the probability that a seed "
            f"of the arm beats a seed of the control on a benchmark, averaged over benchmarks, each with its {pct} "
            "stratified bootstrap interval (seeds resampled within each benchmark; too narrow to decide on at a "
            "few seeds: the verdicts read the t intervals).",
        ),
    ]


def _estimate(point, low, high) -> str:
    return DASH if point is None or not np.isfinite(point) else f"{fmt(point)} {_ci(low, high)}"


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
                    interval = f"{_level(v[f'{key}_level'])} {_ci(v[f'{key}_low'], v[f'{key}_high'])}"
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


def _scaling_caption(analysis: Analysis) -> str:
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
        f"at half the gain, B the steepness; intervals at {_level(s.level)} by a seed jackknife (t, n - 1 df; "
        "B and C_mid on the log scale), with a grouped prompt jackknife added where every evaluation recorded "
        f"per-prompt scores (Satterthwaite df){resampled}. Ceiling: A minus the control's A, read like the "
        f"verdicts above ({margin}). Efficiency: the C_mid ratio to the control; below 1 reaches half its gain "
        "with less compute. More or less efficient when its interval excludes 1, equally efficient inside "
        f"[1/{fmt(s.efficiency_margin)}, {fmt(s.efficiency_margin)}]. Each kind of verdict is one family "
        "(Bonferroni over the comparisons). A fit that did not converge or whose ceiling and midpoint the data do "
        "not determine gets no verdict."
    )


def sections(analysis: Analysis, *, include_trials: bool = True) -> list[Section]:
    """The report's tables in page order."""
    h = analysis.header
    full = verdict_display(analysis)
    out = [
        Section(
            "verdicts",
            "Verdicts",
            compact_verdict_display(full),
            _verdict_caption(h, set(analysis.verdicts["verdict"])),
            verdict_notes(analysis),
        ),
        Section(
            "verdicts-full",
            "Verdicts in full",
            full,
            "The same comparisons with every column: seeds and failed trials of each side, both means, the "
            "interval's level, the test, its adjusted p, Hedges g, and the seeds to decide at each true "
            "difference.",
        ),
    ]
    out += benchmark_sections(analysis)
    if len(analysis.looks):
        out.append(
            Section(
                "looks",
                "Looks",
                _strings(analysis.looks),
                "Each comparison at every look it was tested at: the seeds per arm the look had, the "
                "estimate and its repeated interval (level: that look's, from the spending function "
                "at alpha / m), and what the look decided (stop: the verdict; continue: the next "
                "look's seeds were bought).",
            )
        )
    if len(analysis.calibration):
        out.append(
            Section(
                "calibration",
                "Calibration checks",
                _strings(analysis.calibration),
                "Read like the verdicts, at the same level, but outside their family. A/A tripwire: "
                "the control again on other seeds; better or worse means the verdicts above are not "
                "to be trusted. Placebo: each arm against the control trained on shuffled rewards "
                "(no signal); a gain over it is not format or length drift.",
            )
        )
    out += [
        Section(
            "robustness",
            "Robustness checks",
            robustness_display(analysis),
            "Other tests of the same comparison (unadjusted p), none identical to the verdict's test at "
            "these seeds. A test whose smallest attainable p-value is above alpha 'cannot reject' - that "
            "is not evidence of no effect.",
        ),
    ]
    if len(analysis.components):
        seed_row = analysis.components[analysis.components["source"] == "seed"]["variance"]
        one_run = bool(len(seed_row)) and bool(np.isnan(seed_row.astype(float)).all())  # the seed part unknown
        out += [
            Section(
                "components",
                "Noise by source",
                components_display(analysis),
                f"Variance of one prompt's {h['primary_metric']} in one trial, split by source "
                + (
                    "as far as one training run per arm allows (method of moments on the arms x prompts table, "
                    "each truncated at 0; eval sampling from the recorded sample variances). The training seed's "
                    "part is unknown; the shares are of the parts that can be told apart."
                    if one_run
                    else "(method of moments on the seed x prompt tables, each truncated at 0). Three spreads are "
                    "kept apart: run-to-run (the seed row, the training-seed sd (component)), prompt-to-prompt "
                    "(prompt, arm x prompt) and sample-to-sample within a prompt (eval sampling: the variance of one "
                    "sampled answer divided by the k averaged, from each prompt's own k samples; verl's std@k is the "
                    "sd of one sample within a prompt, averaged over prompts: a spread, not the uncertainty of a "
                    "run's score). With one sample per prompt it cannot be told from seed x prompt and the two are "
                    "shown together."
                ),
            ),
            Section(
                "budget",
                "What more budget buys",
                budget_display(analysis),
                (
                    "Predicted standard error of an eval-only difference of two arms with the components above, "
                    "at the design as run and with twice the eval prompts or samples (more seeds: unknown, the "
                    "training seed's part is not measured)."
                    if one_run
                    else "Predicted standard error of a typical arm-vs-control difference of this study (the median "
                    "of each variance component over its seed x prompt comparisons, paired where the seeds are "
                    "matched; without those, two unpaired arms with the components above) at the design as "
                    "run and with one more unit of each budget."
                ),
            ),
        ]
    out += [
        Section("conditions", "Condition means", conditions_display(analysis), ""),
        Section(
            "noise",
            "Noise floor",
            noise_display(analysis),
            "The sd of trial means of each condition: how much its trials' results scatter across seeds, "
            "the training seed's noise and the eval prompts' sampling noise together (the training-seed sd "
            "(component) under 'Noise by source' is the first alone, so expected to be smaller). With its interval "
            "(Bonett's from 5 seeds, which does not assume normal scores; below that chi-square, which "
            "does), a normality diagnostic, and the seeds per arm at which two arms of this sd are decided "
            "at the verdicts' level and planning effect.",
        ),
        Section("cost", "Cost", cost_display(analysis), "Wall time and tokens summed over trials."),
        Section(
            "failed",
            "Failed trials",
            _strings(analysis.failed),
            "Failed trials with their reasons (the verdict table counts them per arm).",
        ),
    ]
    if len(analysis.pending):
        out.append(Section("pending", "Trials still running or waiting", _strings(analysis.pending), ""))
    if len(analysis.overoptimisation):
        out.append(
            Section(
                "overoptimisation",
                "Over-optimisation: proxy, gold and KL at the last step",
                overoptimisation_display(analysis),
                "Trained on a learned reward model: per arm, at its last logged step, the seed means of "
                "the proxy (train/reward_proxy, the reward model's training reward), the gold score "
                "(train/reward_gold, the verifier's on the same samples) and the KL to the reference "
                "(train/kl_ref). A proxy well above its start with gold flat or falling is the proxy "
                "exploited (Gao et al. 2023); the figure shows the path there.",
            )
        )
    if analysis.scaling is not None:
        out.append(
            Section(
                "scaling",
                "Ceilings and efficiency (fitted compute curves)",
                scaling_display(analysis),
                _scaling_caption(analysis),
                scaling_notes(analysis),
            )
        )
    out.append(
        Section(
            "config",
            "What differs between the arms",
            _strings(analysis.config_diff),
            "Configuration keys whose values differ across conditions.",
        )
    )
    if include_trials:
        out.append(Section("trials", "All trials", _strings(analysis.trials), "Also written as results.csv."))
    return out
