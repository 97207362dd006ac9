"""Variance components of a metric scored per held-out prompt: the noise floor split by source.

Every arm's trials form a ``[seeds, prompts]`` table on the same prompts (the model of
``crossed``). Method-of-moments (ANOVA) estimates, each truncated at 0:

* residual (seed x prompt + eval sampling): the pooled two-way residual mean square of the arms;
* **training seed**: per arm ``var(trial means) - residual / P``, pooled over arms;
* **arm x prompt**: the arm x prompt residual of the per-prompt arm means minus
  ``residual / n`` (n: harmonic mean of the arms' seeds); needs two arms;
* **prompt**: the variance over prompts of the all-arm prompt means minus what the two terms
  above put there;
* **eval sampling**: the within-prompt variance of one sampled completion over k samples,
  ``sample_var / k``, where ``sample_var`` is the mean of the cells' sample variances (ddof=1)
  of their k rewards: unbiased for the sampling variance of a cell mean, and *not* capped at
  the residual (a cap makes it biased low, 84-97% of its true value at realistic sizes, the
  rest showing up as spurious seed x prompt variance); the rest of the residual is **seed x
  prompt**, truncated at 0 (the constraint belongs to it: it is the difference of two
  estimates). Greedy scores have no sampling term.
* **k = 1 sampled evaluations**: one sample per cell cannot tell eval sampling from seed x
  prompt, for any reward, 0/1 included (a cell's draw is Bernoulli(pi) whether pi varies with
  the seed x prompt interaction or not: a mixture of Bernoullis is a Bernoulli, so p(1 - p) of
  a prompt's mean over seeds holds both). Rather than pretend the sampling part is 0, the
  residual is reported as one component, **seed x prompt + eval sampling**
  (``separable=False``), and more eval samples can shrink at most all of it.

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
#: the residual's label when one sample per cell cannot split it (sampled evaluation at k = 1)
COMBINED = "seed x prompt + eval sampling"


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
    separable: bool = True  # False: a sampled evaluation at k = 1, seed_x_prompt holds both parts

    def by_source(self) -> dict[str, float]:
        if not self.separable:
            return dict(zip(SOURCES[:3] + (COMBINED,), (self.seed, self.prompt, self.arm_x_prompt, self.seed_x_prompt)))
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
    tables: Mapping[str, np.ndarray], *, sample_var: float | None = None, samples: int = 1, sampled: bool | None = None
) -> Components:
    """Components from each arm's ``[seeds, prompts]`` table (at least one arm with 2 seeds,
    2 prompts; every table on the same prompts). ``sample_var`` is the mean within-prompt
    variance of one eval sample over ``samples`` (k) samples per cell; ``sampled``: the scores
    are means of sampled completions (False: greedy, no sampling term; None: sampled when
    ``sample_var`` is given). A sampled evaluation at
    k = 1 (or without ``sample_var``) cannot be split: ``separable`` is False."""
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
    sampled = sample_var is not None if sampled is None else sampled
    separable = not sampled or (sample_var is not None and samples > 1)
    sampling = float(sample_var) / samples if sampled and separable else 0.0
    return Components(
        seed=seed,
        prompt=prompt,
        arm_x_prompt=arm_x_prompt,
        seed_x_prompt=max(0.0, residual - sampling),
        eval_sampling=sampling,
        n_prompts=P,
        samples=samples,
        seeds=n_h,
        arms=k,
        separable=separable,
    )
