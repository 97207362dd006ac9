"""Variance components of a metric scored per held-out prompt: the noise floor split by source.

Every arm's trials form a ``[seeds, prompts]`` table on the same prompts (the model of
``crossed``). Method-of-moments (ANOVA) estimates, each truncated at 0:

* residual (seed x prompt + eval sampling): the pooled two-way residual mean square of the arms;
* **training seed**: per arm ``var(trial means) - residual / P``, pooled over arms;
* **arm x prompt**: the arm x prompt residual of the per-prompt arm means minus
  ``residual / n`` (n: harmonic mean of the arms' seeds); needs two arms;
* **prompt**: the variance over prompts of the all-arm prompt means minus what the two terms
  above put there;
* **eval sampling**: the within-prompt variance of one sampled completion over k samples
  (``sample_var / k``, 0 for greedy scores); the rest of the residual is **seed x prompt**.

The prompt effect is shared by every arm and cancels in a difference; arm x prompt does not.
``as_plan`` turns the components into the ``PlanVariance`` of a generic arm-vs-control
difference, for the budget questions (one more seed, twice the prompts, twice the samples).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ._util import JsonMixin
from .crossed import PlanVariance, two_way

SOURCES = ("seed", "prompt", "arm x prompt", "seed x prompt", "eval sampling")


@dataclass(frozen=True)
class Components(JsonMixin):
    """Variance of one prompt's score in one trial, by source (see the module docstring)."""

    seed: float
    prompt: float
    arm_x_prompt: float
    seed_x_prompt: float
    eval_sampling: float
    n_prompts: int
    samples: int
    seeds: float  # harmonic mean of the arms' seed counts
    arms: int

    def by_source(self) -> dict[str, float]:
        return dict(zip(SOURCES, (self.seed, self.prompt, self.arm_x_prompt, self.seed_x_prompt, self.eval_sampling)))

    def as_plan(self, *, paired: bool = False) -> PlanVariance:
        """The variance model of an arm-vs-control difference between two arms with these
        components (unpaired: both arms' seed and cell terms add)."""
        return PlanVariance(
            seed=2 * self.seed,
            prompt=2 * self.arm_x_prompt,
            residual=2 * self.seed_x_prompt,
            sampling=2 * self.eval_sampling,
            n_prompts=self.n_prompts,
            samples=self.samples,
            paired=paired,
        )

    def trial_sd(self) -> float:
        """Seed-to-seed sd of one trial's mean score over the prompts (what trial means see)."""
        return math.sqrt(self.seed + (self.seed_x_prompt + self.eval_sampling) / self.n_prompts)


def variance_components(
    tables: Mapping[str, np.ndarray], *, sample_var: float | None = None, samples: int = 1
) -> Components:
    """Components from each arm's ``[seeds, prompts]`` table (at least one arm with 2 seeds,
    2 prompts; every table on the same prompts). ``sample_var`` is the mean within-prompt
    variance of one eval sample (None or with ``samples == 1`` greedy: no sampling term)."""
    arrays = [np.asarray(t, dtype=float) for t in tables.values()]
    arrays = [t for t in arrays if t.ndim == 2 and t.shape[0] >= 2]
    if not arrays:
        raise ValueError("variance components need an arm with at least 2 seeds")
    P = arrays[0].shape[1]
    if P < 2 or any(t.shape[1] != P for t in arrays):
        raise ValueError("variance components need the same 2 or more prompts in every arm")
    if not all(np.all(np.isfinite(t)) for t in arrays):
        raise ValueError("score tables contain non-finite values")
    parts = [two_way(t) for t in arrays]
    dofs = np.array([(t.shape[0] - 1) * (P - 1) for t in arrays], dtype=float)
    residual = float(np.dot(dofs, [ms for _, _, ms in parts]) / dofs.sum())
    seed_w = np.array([t.shape[0] - 1 for t in arrays], dtype=float)
    seed = max(0.0, float(np.dot(seed_w, [rows.var(ddof=1) - residual / P for rows, _, _ in parts]) / seed_w.sum()))
    n_h = len(arrays) / sum(1.0 / t.shape[0] for t in arrays)
    means = np.stack([cols for _, cols, _ in parts])  # [arms, prompts]
    k = len(arrays)
    arm_x_prompt = 0.0
    if k >= 2:
        _, _, ms_ap = two_way(means)
        arm_x_prompt = max(0.0, float(ms_ap) - residual / n_h)
    prompt = max(0.0, float(means.mean(axis=0).var(ddof=1)) - arm_x_prompt / k - residual / (k * n_h))
    sampling = 0.0 if sample_var is None or samples <= 1 else min(residual, float(sample_var) / samples)
    return Components(
        seed=seed,
        prompt=prompt,
        arm_x_prompt=arm_x_prompt,
        seed_x_prompt=residual - sampling,
        eval_sampling=sampling,
        n_prompts=P,
        samples=samples,
        seeds=n_h,
        arms=k,
    )
