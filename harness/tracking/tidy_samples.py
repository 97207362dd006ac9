"""One row per sample: a tidy table's sampled answers made the per-prompt rows a verdict reads.

A table with a ``sample`` column (or whose repeated rows per prompt the user declared samples)
holds one row per scored answer. Each prompt of each run becomes one row:

* for a mean metric (the table's own, e.g. ``eval/accuracy``): the mean of the prompt's k
  scores, with ``samples`` = k and ``sample_var`` = their variance (ddof=1; 0 with one sample),
  so the within-prompt sampling noise enters every interval as a study's sampled evaluation does;
* for ``pass@k`` / ``pass^k`` (``eval/pass@4``): the unbiased estimator of Chen et al. (2021) /
  Yao et al. (2024) from the prompt's n answers and c correct (``harness.stats.pass_at_k``), with
  ``samples`` = n and no within-prompt variance (it is not an average of separable draws). The
  scores must be 0/1 and every prompt needs n >= k answers in every run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.errors import ConfigError
from harness.stats.pass_at_k import pass_at_k, pass_hat_k

#: ``pass@4`` / ``pass^4``: the leaf of a pass-rate metric's name
PASS_LEAF = re.compile(r"pass(?P<kind>[@^])(?P<k>[1-9][0-9]*)")
#: the columns that name one prompt of one run
PROMPT_KEYS = ("arm", "seed", "benchmark", "prompt_id")


@dataclass(frozen=True)
class SampleCounts:
    """How many answers per prompt a per-sample table held (the report says it)."""

    least: int
    most: int
    prompts: int  # prompt rows (run x benchmark x prompt) they were counted over

    def line(self) -> str:
        each = f"{self.least}" if self.least == self.most else f"{self.least} to {self.most}"
        return f"{each} samples per prompt ({self.prompts} prompt rows, one per run and prompt)"


def pass_leaf(metric: str) -> re.Match[str] | None:
    """The ``pass@k`` / ``pass^k`` match of ``metric``'s last part, or None for a mean metric."""
    return PASS_LEAF.fullmatch(metric.rsplit("/", 1)[-1])


def number_repeats(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with a ``sample`` column numbering each prompt's repeated rows 0, 1, ... in file
    order (the user said that repeated rows are samples)."""
    keys = [c for c in PROMPT_KEYS if c in table]
    return table.assign(sample=table.groupby(keys, sort=False).cumcount())


def sample_counts(table: pd.DataFrame) -> SampleCounts:
    keys = [c for c in PROMPT_KEYS if c in table]
    sizes = table.groupby(keys, sort=False).size()
    return SampleCounts(least=int(sizes.min()), most=int(sizes.max()), prompts=len(sizes))


def per_prompt(table: pd.DataFrame, metric: str, where: str) -> pd.DataFrame:
    """One row per run and prompt of the checked per-sample ``table`` (``sample`` column), as
    ``metric`` scores it (see the module's docstring): columns ``arm, seed, [benchmark,]
    prompt_id, value, samples`` and, for a mean metric, ``sample_var``."""
    keys = [c for c in PROMPT_KEYS if c in table]
    groups = table.groupby(keys, sort=False)["value"]
    matched = pass_leaf(metric)
    if matched is None:
        out = groups.agg(value="mean", samples="size", sample_var=lambda v: float(v.var(ddof=1)) if len(v) > 1 else 0.0)
        return out.reset_index()
    k = int(matched["k"])
    values = table["value"].to_numpy(dtype=float)
    if not np.isin(values, (0.0, 1.0)).all():
        bad = table.loc[~np.isin(values, (0.0, 1.0)), "value"].iloc[0]
        raise ConfigError(
            f"{where}: {metric} needs 0/1 scores (an answer correct or not), but a value is {bad:g}; "
            "judge the mean instead, or give the correctness field with --score"
        )
    counts = groups.agg(n="size", c="sum").reset_index()
    short = counts[counts["n"] < k]
    if len(short):
        row = short.iloc[0]
        held = ", ".join(f"{c} {row[c]}" for c in keys)
        raise ConfigError(
            f"{where}: {metric} needs at least {k} samples of every prompt, but {held} has {int(row['n'])} "
            f"({len(short)} prompt rows short); ask for a smaller k"
        )
    estimate = pass_at_k if matched["kind"] == "@" else pass_hat_k
    n, c = counts["n"].to_numpy(), counts["c"].to_numpy()
    value = np.atleast_1d(estimate(n, c, k)).astype(float)
    return counts[keys].assign(value=value, samples=n.astype("int64"))
