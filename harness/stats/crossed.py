"""Seed x prompt: the difference of two arms scored on the same held-out prompts.

Each arm's trials are rows of a table ``y[seed, prompt]`` (one score per held-out prompt); every
arm sees the same prompts, in the same order. The model behind the estimator is the crossed
random-effects model

    y[a, s, p] = mu[a] + u[a, s] + v[p] + w[a, p] + e[a, s, p]

with a training-seed effect ``u``, a prompt effect ``v`` (shared by the arms, so it cancels in a
difference), an arm x prompt interaction ``w`` (it does not cancel: an arm may be better on some
prompts than on others), and a residual ``e`` (seed x prompt interaction plus eval sampling).

The variance of the difference of arm means is

    V = sigma_u^2 (1/n_a + 1/n_c) + 2 sigma_w^2 / P + sigma_e^2 (1/n_a + 1/n_c) / P.

A Welch (or paired) t over the trial means estimates every term but ``2 sigma_w^2 / P``: it
treats the prompts as fixed and under-covers when the arm x prompt term is large. The estimator
here is the balanced two-way ANOVA (method of moments) one, the same as Cameron, Gelbach and
Miller's two-way cluster variance ("clustered by seed + clustered by prompt - the intersection"):

    V_hat = V_trial_means + max(0, (S2_prompt - MS_res_a / n_a - MS_res_c / n_c) / P)

where ``S2_prompt`` is the variance over prompts of the per-prompt difference of arm means and
``MS_res`` the two-way residual mean square of an arm's table (with seed-matched arms the table of
paired differences gives one residual). It is unbiased for V (before the truncation at 0, which
makes it conservative), and reduces to the trial-means analysis when the interaction is absent.
Its degrees of freedom are Satterthwaite's. We use this rather than a two-way cluster bootstrap
because a bootstrap over 3-10 seeds is far too narrow (tests/stats/test_stats_calibration.py);
the t reference with Satterthwaite df keeps the small-seed calibration of Welch's test.

Functions are vectorised: leading axes are independent replicates (simulations).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._util import JsonMixin
from .binary_paired import BINARY_TEST, EVAL_ONLY_BINARY_TEST, PairedCounts, effective_counts


@dataclass(frozen=True)
class Difference(JsonMixin):
    """An arm-minus-control difference of means with the standard error and df its interval uses.

    ``test`` names the analysis ("seed_prompt", "seed_prompt_binary", "paired_t", "welch_t", "yuen");
    ``binary`` holds the effective 0/1 counts whose interval a verdict joins to the t interval
    (``binary_paired``; None unless the test is "seed_prompt_binary"), or, for "eval_only_binary",
    the prompts' 2 x 2 table whose interval a verdict reads alone; ``se_trial_means``
    is the trial-means standard error of the same difference (the robustness view); ``plan``
    holds the variance components that predict the standard error at other budgets (None when
    they cannot be estimated). ``reason`` is "" unless the difference cannot be tested.
    """

    diff: float
    se: float
    df: float
    test: str
    n_arm: int
    n_control: int
    paired: bool
    n_prompts: int = 0
    se_trial_means: float = math.nan
    plan: PlanVariance | None = None
    reason: str = ""
    binary: PairedCounts | None = None

    @property
    def testable(self) -> bool:
        if self.reason:
            return False
        if self.test == EVAL_ONLY_BINARY_TEST:  # its interval is the binary one alone: one even when no prompt changes
            return self.binary is not None
        return math.isfinite(self.se) and self.se > 0 and math.isfinite(self.df)


@dataclass(frozen=True)
class PlanVariance(JsonMixin):
    """Variance components of one arm-vs-control difference, per unit of budget.

    ``V(n, P, k) = seed / n + prompt / P + (residual + sampling * samples / k) / (n P)`` for n
    seeds per arm, P prompts and k eval samples per prompt, where ``samples`` is the k the data
    were scored with. ``seed`` is the seed-level variance of the difference (both arms, or the
    paired differences), ``prompt`` the arm x prompt term (2 sigma_w^2), ``residual`` the
    seed x prompt interaction and ``sampling`` the eval-sampling part of the cell variance.
    ``paired``: the seeds of the two arms are matched.
    """

    seed: float
    prompt: float
    residual: float
    sampling: float
    n_prompts: int
    samples: int
    paired: bool

    def _budget(self, n, prompts: int | None, samples: int | None):
        """``(n, P, cell)``: seeds as an array, prompts, and the cell variance at k samples."""
        k = self.samples if samples is None else samples
        cell = self.residual + self.sampling * self.samples / k
        return np.asarray(n, dtype=float), self.n_prompts if prompts is None else prompts, cell

    def variance(self, n, prompts: int | None = None, samples: int | None = None):
        """Predicted variance of the difference at ``n`` seeds per arm (array or scalar)."""
        n, P, cell = self._budget(n, prompts, samples)
        return self.seed / n + self.prompt / P + cell / (n * P)

    def df(self, n, prompts: int | None = None, samples: int | None = None):
        """Satterthwaite df of the seed x prompt estimator at this budget (see ``seed_prompt_se``)."""
        n, P, cell = self._budget(n, prompts, samples)
        rows = (self.seed + cell / P) / n
        rows_dof = (n - 1) if self.paired else 2 * (n - 1)  # unpaired: two arms' row terms
        if P < 2:
            return rows_dof
        cols = (self.prompt + cell / n) / P
        res = cell / (n * P)
        res_dof = (1 if self.paired else 2) * (n - 1) * (P - 1)  # unpaired: two arms' residual terms
        total = rows + cols - res
        with np.errstate(divide="ignore", invalid="ignore"):
            return total**2 / (rows**2 / rows_dof + cols**2 / (P - 1) + res**2 / res_dof)


def two_way(table: np.ndarray):
    """Row means, column means and the two-way residual mean square of ``table[..., n, P]``."""
    n, P = table.shape[-2], table.shape[-1]
    rows = table.mean(axis=-1)
    cols = table.mean(axis=-2)
    grand = rows.mean(axis=-1)
    resid = table - rows[..., :, None] - cols[..., None, :] + grand[..., None, None]
    dof = (n - 1) * (P - 1)
    ms = (resid**2).sum(axis=(-2, -1)) / dof if dof > 0 else np.full(np.shape(grand), np.nan)
    return rows, cols, ms


def _var(x: np.ndarray) -> np.ndarray:
    return x.var(axis=-1, ddof=1)


def seed_prompt_se(arm, control, *, paired: bool, sample_var=None, samples: int = 1):
    """``(diff, se, df, se_trial_means, components)`` of mean(arm) - mean(control), vectorised.

    ``arm`` is ``[..., n_a, P]`` and ``control`` ``[..., n_c, P]`` with the same prompts on the
    last axis (``paired``: same seeds on the row axis too, n_a == n_c). ``sample_var`` is the
    mean within-cell variance of one eval sample (both arms pooled, a scalar or ``[...]``), used
    only to split the residual into seed x prompt and eval sampling for planning.
    ``components`` is a dict of arrays: seed, prompt, residual, sampling (see ``PlanVariance``).
    """
    a = np.asarray(arm, dtype=float)
    c = np.asarray(control, dtype=float)
    n_a, n_c, P = a.shape[-2], c.shape[-2], a.shape[-1]
    if c.shape[-1] != P:
        raise ValueError(f"arm and control must be scored on the same prompts; got {P} and {c.shape[-1]}")
    if P < 2:
        raise ValueError(f"the seed x prompt analysis needs at least 2 prompts; got {P}")
    if paired:
        if n_a != n_c:
            raise ValueError(f"paired needs the same seeds in both arms; got {n_a} and {n_c}")
        rows, cols, ms = two_way(a - c)
        diff = rows.mean(axis=-1)
        row_terms = [(_var(rows) / n_a, n_a - 1)]
        res_terms = [(ms / n_a, (n_a - 1) * (P - 1))]
        seed_var = _var(rows) - ms / P
        residual = ms
    else:
        rows_a, cols_a, ms_a = two_way(a)
        rows_c, cols_c, ms_c = two_way(c)
        diff = rows_a.mean(axis=-1) - rows_c.mean(axis=-1)
        cols = cols_a - cols_c
        row_terms = [(_var(rows_a) / n_a, n_a - 1), (_var(rows_c) / n_c, n_c - 1)]
        res_terms = [(ms_a / n_a, (n_a - 1) * (P - 1)), (ms_c / n_c, (n_c - 1) * (P - 1))]
        seed_var = (_var(rows_a) - ms_a / P) + (_var(rows_c) - ms_c / P)
        residual = ms_a + ms_c
    with np.errstate(divide="ignore", invalid="ignore"):
        v_rows = sum(t for t, _ in row_terms)
        den_rows = sum(t**2 / d for t, d in row_terms)
        se_trial = np.sqrt(v_rows)
        v_cols = _var(cols) / P
        v_res = sum(t for t, _ in res_terms) / P
        prompt_part = v_cols - v_res
        extra = prompt_part > 0
        v = v_rows + np.where(extra, prompt_part, 0.0)
        den = den_rows + np.where(extra, v_cols**2 / (P - 1) + sum((t / P) ** 2 / d for t, d in res_terms), 0.0)
        # Satterthwaite's df of a sum with a difference in it (the arm x prompt part, v_cols - v_res)
        # collapses below 1 when that part is small beside noisy mean squares (0/1 scores, seeds not
        # matched): an interval wider than the metric's range. The part only adds variance to the
        # trial-means terms, so the df is floored at theirs: Welch's lower bound, min(n - 1).
        df = np.maximum(v**2 / den, min(d for _, d in row_terms))
    prompt = np.maximum(prompt_part, 0.0) * P
    return diff, np.sqrt(v), df, se_trial, _components(np.maximum(seed_var, 0.0), prompt, residual, sample_var, samples)


def _components(seed, prompt, residual, sample_var, samples: int) -> dict[str, np.ndarray]:
    """Split the cell residual into seed x prompt and eval sampling (``sample_var / k`` per arm,
    unbiased: not capped at the residual; the seed x prompt rest is truncated at 0, see ``components``)."""
    residual = np.asarray(residual, dtype=float)
    if sample_var is None or samples < 1:
        sampling = np.zeros_like(residual)
    else:
        sampling = np.broadcast_to(2.0 * np.asarray(sample_var, dtype=float) / samples, residual.shape).copy()
    return {
        "seed": np.asarray(seed, dtype=float),
        "prompt": np.asarray(prompt, dtype=float),
        "residual": np.maximum(residual - sampling, 0.0),
        "sampling": sampling,
    }


def seed_prompt_difference(
    arm, control, *, paired: bool, sample_var: float | None = None, samples: int = 1, binary: bool = False
) -> Difference:
    """The seed x prompt difference of two arms' ``[seeds, prompts]`` score tables. ``binary``
    (0/1 tables): the test is "seed_prompt_binary", the t interval joined by the binary interval
    of the pooled counts (``binary_paired``)."""
    a = np.asarray(arm, dtype=float)
    c = np.asarray(control, dtype=float)
    if a.ndim != 2 or c.ndim != 2:
        raise ValueError(f"score tables must be [seeds, prompts]; got shapes {a.shape} and {c.shape}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(c))):
        raise ValueError("score tables contain non-finite values; drop or score failed trials first")
    n_a, n_c, P = a.shape[0], c.shape[0], a.shape[1]
    test = BINARY_TEST if binary else "seed_prompt"
    if min(n_a, n_c) < 2:
        return Difference(
            float(a.mean() - c.mean()),
            math.nan,
            math.nan,
            test,
            n_a,
            n_c,
            paired,
            P,
            reason=f"need at least 2 seeds per arm; got {n_a} (arm) and {n_c} (control)",
        )
    diff, se, df, se_trial, comp = seed_prompt_se(a, c, paired=paired, sample_var=sample_var, samples=samples)
    se, df = float(se), float(df)
    reason = "" if se > 0 and math.isfinite(df) else "zero variance across seeds and prompts: no interval"
    plan = PlanVariance(
        seed=float(comp["seed"]),
        prompt=float(comp["prompt"]),
        residual=float(comp["residual"]),
        sampling=float(comp["sampling"]),
        n_prompts=P,
        samples=samples,
        paired=paired,
    )
    counts = None
    if binary and not reason:
        *cells, deff = (float(x) for x in effective_counts(a, c, paired=paired, variance=se**2))
        counts = PairedCounts(*cells, design_effect=deff)
    return Difference(float(diff), se, df, test, n_a, n_c, paired, P, float(se_trial), plan, reason, counts)
