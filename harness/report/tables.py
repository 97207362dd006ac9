"""Turn the analysis frames into display tables (strings), shared by the HTML, Markdown and
terminal writers so that every output shows the same numbers formatted the same way."""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.decide.analysis import Analysis
from harness.decide.overoptimisation import last_step_table
from harness.report.benchmark_tables import benchmark_sections
from harness.report.cells import DASH, Section, fmt, fmt_ci, fmt_level, fmt_p, fmt_pct, fmt_seeds, verdict_label
from harness.report.noise_tables import noise_floor_sections, noise_source_sections
from harness.report.scaling_tables import scaling_caption, scaling_display, scaling_notes


def verdict_display(analysis: Analysis) -> pd.DataFrame:
    rows = []
    for _, r in analysis.verdicts.iterrows():
        n = f"{int(r['n'])} pairs" if r["paired"] else f"{int(r['n'])} vs {int(r['n_control'])}"
        label = verdict_label(r)
        rows.append(
            {
                "condition": r["condition"],
                "control": r["control"],
                "seeds": n,
                "failed": f"{int(r['failed'])} / {int(r['failed_control'])}",
                "mean": fmt(r["mean"]),
                "control mean": fmt(r["mean_control"]),
                "difference": fmt(r["diff"]),
                "interval": fmt_ci(r["ci_low"], r["ci_high"]),
                "level": fmt_level(r["ci_level"]),
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
    pct = fmt_pct(analysis.header["alpha"])
    return pd.DataFrame(
        [
            {
                "condition": r["condition"],
                "completed seeds": fmt(r["n"]),
                "mean": fmt(r["mean"]),
                f"{pct} CI (t)": fmt_ci(r["ci_low"], r["ci_high"]),
            }
            for _, r in analysis.conditions.iterrows()
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


def _level_words(h: dict) -> str:
    """The verdicts' interval level, in words: one level, or a sequential study's looks' own."""
    if h.get("compute_looks"):
        return (
            "the interval of the look that decided it: a stopped arm's at its look's share of alpha (an arm "
            "called by a forecast: the forecast's interval at the budget, at half of that share), the "
            "others' at the budget with the alpha the earlier looks left (Bonferroni over the looks, so "
            "stopping an arm at a look keeps the error rates)"
        )
    if h.get("sequential"):
        return (
            "the repeated confidence interval of the look that decided it (or of its latest look; alpha "
            "spent across the looks, so stopping at any look keeps the error rates)"
        )
    return f"at level {fmt_level(h['ci_level'])}"


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
    level = _level_words(h)
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


def sections(analysis: Analysis, *, include_trials: bool = True) -> list[Section]:
    """The report's tables in page order."""
    out = [*_verdict_sections(analysis), *benchmark_sections(analysis)]
    if len(analysis.looks):
        out.append(_looks_section(analysis))
    if len(analysis.calibration):
        out.append(_calibration_section(analysis))
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
    out += noise_source_sections(analysis)
    out += _condition_sections(analysis)
    if len(analysis.pending):
        out.append(Section("pending", "Trials still running or waiting", _strings(analysis.pending), ""))
    if len(analysis.overoptimisation):
        out.append(_overoptimisation_section(analysis))
    if analysis.scaling is not None:
        out.append(
            Section(
                "scaling",
                "Ceilings and efficiency (fitted compute curves)",
                scaling_display(analysis),
                scaling_caption(analysis),
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


def _verdict_sections(analysis: Analysis) -> list[Section]:
    """The verdicts: the short table with its caption and notes, then the same rows with every column."""
    h = analysis.header
    full = verdict_display(analysis)
    return [
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
            f"interval and its level ({_level_words(h)}, as above), the test, its adjusted p, Hedges g, and the "
            "seeds to decide at each true difference.",
        ),
    ]


def _looks_section(analysis: Analysis) -> Section:
    """A sequential study's looks: each comparison at every look it was tested at; a compute-look
    study's: each arm at every point of the budget it was read at."""
    if analysis.header.get("compute_looks"):
        return Section(
            "looks",
            "Looks over compute",
            _strings(analysis.looks),
            "Each arm at every look it was read at: the fraction of the budget and the point on its axis, "
            "the seeds read, the difference from its reference and its interval (level: that look's share "
            "of alpha, from the spending function at the compute fraction, Bonferroni over the comparisons), "
            "and what the look decided (stop: the arm trailed by more than the catch-up allowance and trained "
            "no further; go on; budget: the final reading with the alpha the earlier looks left). With forecasts "
            "on, a look's second row for an arm is its forecast: the difference predicted at the budget from the "
            "curves up to the look, with its interval (the look's other half of alpha); called (forecast): that "
            "interval decided the comparison and the arm trained no further, so its verdict is a forecast, not "
            "a reading at the budget; go on (forecast): it did not.",
        )
    return Section(
        "looks",
        "Looks",
        _strings(analysis.looks),
        "Each comparison at every look it was tested at: the seeds per arm the look had, the "
        "estimate and its repeated interval (level: that look's, from the spending function "
        "at alpha / m), and what the look decided (stop: the verdict; continue: the next "
        "look's seeds were bought).",
    )


def _calibration_section(analysis: Analysis) -> Section:
    """The A/A tripwire and the placebo arms, read like the verdicts but outside their family."""
    return Section(
        "calibration",
        "Calibration checks",
        _strings(analysis.calibration),
        "Read like the verdicts, at the same level, but outside their family. A/A tripwire: "
        "the control again on other seeds; better or worse means the verdicts above are not "
        "to be trusted. Placebo: each arm against the control trained on shuffled rewards "
        "(no signal); a gain over it is not format or length drift.",
    )


def _condition_sections(analysis: Analysis) -> list[Section]:
    """Per condition: its means, its noise floor and cost, and the trials that failed."""
    return [
        Section(
            "conditions",
            "Condition means",
            conditions_display(analysis),
            f"Each condition's mean of {analysis.header['primary_metric']} over its completed seeds, with its "
            f"t interval at {fmt_pct(analysis.header['alpha'])} (each condition alone, not the verdicts' "
            "level; one seed: no interval).",
        ),
        *noise_floor_sections(analysis),
        Section("cost", "Cost", cost_display(analysis), "Wall time and tokens summed over trials."),
        Section(
            "failed",
            "Failed trials",
            _strings(analysis.failed),
            "Failed trials with their reasons (the verdict table counts them per arm).",
        ),
    ]


def _overoptimisation_section(analysis: Analysis) -> Section:
    """Proxy, gold and KL at the last step, for arms trained on a learned reward model."""
    return Section(
        "overoptimisation",
        "Over-optimisation: proxy, gold and KL at the last step",
        overoptimisation_display(analysis),
        "Trained on a learned reward model: per arm, at its last logged step, the seed means of "
        "the proxy (train/reward_proxy, the reward model's training reward), the gold score "
        "(train/reward_gold, the verifier's on the same samples) and the KL to the reference "
        "(train/kl_ref). A proxy well above its start with gold flat or falling is the proxy "
        "exploited (Gao et al. 2023); the figure shows the path there.",
    )
