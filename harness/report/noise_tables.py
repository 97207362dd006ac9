"""The noise tables: each condition's noise floor, the noise split by source and what more budget
buys, of the primary metric and, for a study with held-out benchmarks, of each benchmark (one
table each with a ``benchmark`` column, so that no table of one metric reads as the suite's)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.decide.analysis import Analysis
from harness.report.cells import DASH, Section, fmt, fmt_ci, fmt_level, fmt_p, fmt_pct, fmt_seeds


def noise_table_display(nf: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    pct = fmt_pct(alpha)
    return pd.DataFrame(
        [
            {
                "condition": r["condition"],
                "seeds": fmt(r["n"]),
                "failed": fmt(r["failed"]),
                "mean": fmt(r["mean"]),
                "sd of trial means": fmt(r["std"]),
                f"{pct} CI of that sd": fmt_ci(r["std_ci_low"], r["std_ci_high"]),
                "CI method": r["std_ci_method"] if isinstance(r["std_ci_method"], str) else DASH,
                "normality p (Shapiro-Wilk)": fmt_p(r["normality_p"]),
                "sem": fmt(r["sem"]),
                "seeds to decide": fmt_seeds(r["seeds_needed"]),
                "note": r["note"] if isinstance(r["note"], str) else "",
            }
            for _, r in nf.iterrows()
        ]
    )


def components_table_display(components: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "source": r["source"],
                "variance": fmt(r["variance"]),
                "sd (component)": fmt(r["sd"]),
                "share": f"{r['share']:.1%}" if np.isfinite(r["share"]) else DASH,
                "note": r["note"],
            }
            for _, r in components.iterrows()
        ]
    )


def components_display(analysis: Analysis) -> pd.DataFrame:
    return components_table_display(analysis.components)


def budget_table_display(budget: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "design": r["option"],
                "seeds per arm": fmt(r["seeds"]),
                "eval prompts": fmt(r["prompts"]),
                "eval samples": fmt(r["samples"]),
                "predicted SE of a difference": fmt(r["se_diff"]),
            }
            for _, r in budget.iterrows()
        ]
    )


def by_benchmark(frame: pd.DataFrame, display) -> pd.DataFrame:
    """``display`` of each benchmark's rows of ``frame``, stacked, with the benchmark first."""
    parts = [
        display(rows.drop(columns="benchmark")).assign(benchmark=name).pipe(lambda d: d[["benchmark", *d.columns[:-1]]])
        for name, rows in frame.groupby("benchmark", sort=False)
    ]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _one_run(components: pd.DataFrame) -> bool:
    """Whether the components come from one training run per arm (the seed part unknown)."""
    seed_row = components[components["source"] == "seed"]["variance"]
    return bool(len(seed_row)) and bool(np.isnan(seed_row.astype(float)).all())


def _components_caption(of: str, one_run: bool) -> str:
    return f"Variance of one prompt's {of} in one trial, split by source " + (
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
    )


def _budget_caption(one_run: bool) -> str:
    return (
        "Predicted standard error of an eval-only difference of two arms with the components above, "
        "at the design as run and with twice the eval prompts or samples (more seeds: unknown, the "
        "training seed's part is not measured)."
        if one_run
        else "Predicted standard error of a typical arm-vs-control difference of this study (the median "
        "of each variance component over its seed x prompt comparisons, paired where the seeds are "
        "matched; without those, two unpaired arms with the components above) at the design as "
        "run and with one more unit of each budget."
    )


def _noise_floor_caption(level: str) -> str:
    return (
        "The sd of trial means of each condition: how much its trials' results scatter across seeds, "
        "the training seed's noise and the eval prompts' sampling noise together (the training-seed sd "
        "(component) under 'Noise by source' is the first alone, so expected to be smaller). With its interval "
        "(Bonett's from 5 seeds, which does not assume normal scores; below that chi-square, which "
        f"does), a normality diagnostic, and the seeds per arm at which two arms of this sd are decided {level}."
    )


def _primary_only(analysis: Analysis, title: str) -> str:
    """With benchmarks, the primary metric's noise tables say they are its alone."""
    if analysis.benchmarks is None:
        return ""
    return f" The primary metric's ({analysis.header['primary_metric']}) only; each benchmark's: '{title}'."


def noise_source_sections(analysis: Analysis) -> list[Section]:
    """The noise split by source and what more budget buys, of the primary metric and then of each
    benchmark, worded for one run per arm where the training seed's part is unknown."""
    out = []
    if len(analysis.components):
        one_run = _one_run(analysis.components)
        out += [
            Section(
                "components",
                "Noise by source",
                components_display(analysis),
                _components_caption(analysis.header["primary_metric"], one_run)
                + _primary_only(analysis, "Noise by source, by benchmark"),
            ),
            Section(
                "budget",
                "What more budget buys",
                budget_table_display(analysis.budget),
                _budget_caption(one_run) + _primary_only(analysis, "What more budget buys, by benchmark"),
            ),
        ]
    b = analysis.benchmarks
    if b is not None and len(b.components):
        one_run = _one_run(b.components)
        out += [
            Section(
                "components-benchmarks",
                "Noise by source, by benchmark",
                by_benchmark(b.components, components_table_display),
                _components_caption("benchmark metric (each benchmark's own, on its own prompts)", one_run),
            ),
            Section(
                "budget-benchmarks",
                "What more budget buys, by benchmark",
                by_benchmark(b.budget, budget_table_display),
                _budget_caption(one_run).replace("the components above", "that benchmark's components above")
                + " Each benchmark on its own metric and prompts.",
            ),
        ]
    return out


def noise_floor_sections(analysis: Analysis) -> list[Section]:
    """Each condition's noise floor on the primary metric and, with benchmarks, on each benchmark."""
    alpha = analysis.header["alpha"]
    out = [
        Section(
            "noise",
            "Noise floor",
            noise_table_display(analysis.noise_floor, alpha),
            _noise_floor_caption("at the verdicts' level and planning effect")
            + _primary_only(analysis, "Noise floor by benchmark"),
        )
    ]
    b = analysis.benchmarks
    if b is not None and len(b.noise_floor):
        out.append(
            Section(
                "noise-benchmarks",
                "Noise floor by benchmark",
                by_benchmark(b.noise_floor, lambda nf: noise_table_display(nf, alpha)),
                _noise_floor_caption(
                    f"at the benchmark verdicts' level ({fmt_level(b.level)}) and the benchmark's planning effect"
                )
                + " Each benchmark on its own metric.",
            )
        )
    return out


__all__ = [
    "budget_table_display",
    "by_benchmark",
    "components_display",
    "components_table_display",
    "noise_floor_sections",
    "noise_source_sections",
    "noise_table_display",
]
