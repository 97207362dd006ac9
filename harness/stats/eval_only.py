"""Eval-only difference: an arm with one training run, compared on the held-out prompts alone.

With one training run on a side, the training seed's variance cannot be estimated, so no
interval can say what another seed's run would give. What the records still support is a
comparison **conditional on these checkpoints**: do these two models differ on the population of
prompts the eval set was drawn from (and, with sampled evaluation, on fresh eval samples)?

Per prompt p the difference ``d_p = mean_s arm[s, p] - mean_s control[s, p]`` (the mean over a
side's runs, normally one); the estimate is ``mean_p d_p`` with standard error ``sd_p(d_p) /
sqrt(P)`` and ``P - 1`` degrees of freedom: the paired t interval over prompts, which is the
question-clustered standard error of a paired difference (Miller 2024, "Adding error bars to
evals") with a t reference for small P.

Eval sampling is already inside it. With k sampled completions per prompt, each side's
per-prompt score carries the sampling variance ``sigma2_p / k`` of its mean, independent across
prompts, so ``E[var_p(d_p)] = tau^2 + mean_p(sigma2_arm,p / (k n_arm) + sigma2_control,p /
(k n_control))`` where ``tau^2`` is the spread of the checkpoints' true per-prompt differences:
the interval covers prompt sampling and eval sampling together, and adding the recorded sampling
variance on top would count it twice. The recorded within-prompt variances (``sample_var``, the
mean over prompts of each prompt's ddof=1 variance of its k rewards, unbiased for
``mean_p sigma2_p``) split the total into its two parts (:func:`one_run_components`, and
:class:`EvalOnlySplit` for a difference), which predict the standard error at other numbers of
prompts or samples. Greedy scores have no sampling part.

**0/1 scores of one run per side** (greedy accuracy, or one sampled completion per prompt) are
a paired 2 x 2 table of prompts, and there the t interval is too narrow when few prompts change
(AIME, 30 questions: 4 or 5 flipping one way give a t p of 0.043 / 0.023, McNemar's exact p
0.125 / 0.0625). Such a comparison uses the binary method of ``binary_paired`` instead
(``eval_only_binary``: Newcombe's method 11 interval, reaching 0 wherever McNemar's exact test
does not reject; calibrated by simulation at 30-40 prompts with 1-6 discordant), which has an
interval even when no prompt changes. A side with several runs has per-prompt means that are
not 0/1, and keeps the t.

The training-seed part is not in any of this: a verdict read from this interval is about these
checkpoints, and the report labels it so (``(eval-only)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._util import JsonMixin
from .binary_paired import EVAL_ONLY_BINARY_TEST, PairedCounts, is_binary
from .crossed import Difference, two_way

#: the ``Difference.test`` of an eval-only comparison (the paired t over prompts)
EVAL_ONLY_TEST = "eval_only"
#: the overall eval-only difference across benchmarks (:func:`eval_only_mean`)
EVAL_ONLY_MEAN_TEST = "eval_only_benchmarks_mean"
#: every eval-only test: the t over prompts, the binary test of one run per side on 0/1 scores, their mean
EVAL_ONLY_TESTS = (EVAL_ONLY_TEST, EVAL_ONLY_BINARY_TEST, EVAL_ONLY_MEAN_TEST)


@dataclass(frozen=True)
class EvalOnlySplit(JsonMixin):
    """The variance of one prompt's difference ``d_p``, by source, at ``samples`` eval samples:
    ``prompt`` (the checkpoints' true per-prompt differences, tau^2) and ``sampling`` (the eval
    samples' part, 0 for greedy scores). ``se(P, k)`` predicts the SE of the mean difference."""

    prompt: float
    sampling: float
    n_prompts: int
    samples: int

    def se(self, prompts: int | None = None, samples: int | None = None) -> float:
        P = self.n_prompts if prompts is None else prompts
        k = self.samples if samples is None else samples
        return math.sqrt((self.prompt + self.sampling * self.samples / k) / P)


def _tables(arm, control) -> tuple[np.ndarray, np.ndarray]:
    a = np.atleast_2d(np.asarray(arm, dtype=float))
    c = np.atleast_2d(np.asarray(control, dtype=float))
    if a.ndim != 2 or c.ndim != 2 or a.shape[1] != c.shape[1]:
        raise ValueError(
            f"score tables must be [runs, prompts] on the same prompts; got shapes {a.shape} and {c.shape}"
        )
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(c))):
        raise ValueError("score tables contain non-finite values; drop or score failed trials first")
    return a, c


def prompt_differences(arm, control) -> np.ndarray:
    """``d_p``: the per-prompt difference of the two sides' mean scores (over their runs)."""
    a, c = _tables(arm, control)
    return a.mean(axis=0) - c.mean(axis=0)


def prompt_counts(arm, control) -> PairedCounts:
    """The paired 2 x 2 table of prompts of two 0/1 score rows ``[P]`` (one run per side)."""
    a = np.asarray(arm, dtype=float).ravel()
    c = np.asarray(control, dtype=float).ravel()
    return PairedCounts(
        float(np.sum(a * c)), float(np.sum(a * (1 - c))), float(np.sum((1 - a) * c)), float(np.sum((1 - a) * (1 - c)))
    )


def eval_only_difference(arm, control) -> Difference:
    """The eval-only difference of ``arm`` ``[n_arm, P]`` and ``control`` ``[n_control, P]``
    score tables on the same prompts: mean per-prompt difference, SE over prompts, ``P - 1`` df.
    One 0/1 row per side: the test is ``eval_only_binary`` and the verdict's interval the binary
    one of the prompts' 2 x 2 table (``binary``); the SE stays the t's, for reference.
    Untestable (``reason``) with fewer than 2 prompts, or (not 0/1) no spread over prompts."""
    a, c = _tables(arm, control)
    d = a.mean(axis=0) - c.mean(axis=0)
    P = d.size
    diff = float(d.mean()) if P else math.nan
    binary = a.shape[0] == 1 and c.shape[0] == 1 and is_binary(a, c)
    test = EVAL_ONLY_BINARY_TEST if binary else EVAL_ONLY_TEST
    base = dict(test=test, n_arm=a.shape[0], n_control=c.shape[0], paired=True, n_prompts=P)
    if P < 2:
        return Difference(
            diff, math.nan, math.nan, reason=f"an eval-only interval needs at least 2 prompts; got {P}", **base
        )
    se = float(d.std(ddof=1) / math.sqrt(P))
    if binary:
        return Difference(diff, se, float(P - 1), binary=prompt_counts(a, c), **base)
    reason = "" if se > 0 else "the two sides score the same difference on every prompt: no interval"
    return Difference(diff, se, float(P - 1), reason=reason, **base)


def eval_only_mean(differences) -> Difference:
    """The overall eval-only difference across benchmarks: the mean of the benchmarks' eval-only
    differences, the benchmarks fixed and their prompts independent, so its variance is
    ``sum_b se_b^2 / B^2``, with the Welch-Satterthwaite df of the benchmarks' ``P_b - 1``. A
    0/1 benchmark enters with its t standard error over prompts (its verdict reads the binary
    interval): the sum is a t over all the benchmarks' prompts, right when together they have
    many discordant prompts; with a few, read the benchmarks' own verdicts. Untestable when a
    benchmark is, or when no benchmark has any spread."""
    diffs = list(differences)
    base = dict(
        test=EVAL_ONLY_MEAN_TEST,
        n_arm=min((d.n_arm for d in diffs), default=0),
        n_control=min((d.n_control for d in diffs), default=0),
        paired=True,
        n_prompts=sum(d.n_prompts for d in diffs),
    )
    diff = float(np.mean([d.diff for d in diffs])) if diffs else math.nan
    untested = [d for d in diffs if not d.testable]
    if not diffs or untested:
        why = f"a benchmark's difference cannot be tested ({untested[0].reason})" if diffs else "no benchmarks"
        return Difference(diff, math.nan, math.nan, reason=why, **base)
    var = np.array([d.se**2 for d in diffs]) / len(diffs) ** 2
    dfs = np.array([d.df for d in diffs])
    if not var.sum() > 0:
        return Difference(diff, 0.0, math.nan, reason="no benchmark's difference varies over its prompts", **base)
    on = var > 0
    df = float(var.sum() ** 2 / np.sum(var[on] ** 2 / dfs[on]))
    return Difference(diff, float(math.sqrt(var.sum())), df, **base)


@dataclass(frozen=True)
class OneRunComponents(JsonMixin):
    """What one training run per arm can split of a prompt score's variance: ``prompt`` (the
    prompt's difficulty, shared by the arms), ``arm_x_prompt`` (what does not cancel between arms;
    with one run it holds the seed x prompt interaction too, which needs a second run to tell
    apart) and ``eval_sampling`` (one score's sampling variance, ``sample_var / k``). The training
    seed's part is unknown."""

    prompt: float
    arm_x_prompt: float
    eval_sampling: float
    n_prompts: int
    samples: int
    arms: int

    def difference_split(self) -> EvalOnlySplit:
        """The variance of a typical two-arm per-prompt difference, by source."""
        return EvalOnlySplit(2 * self.arm_x_prompt, 2 * self.eval_sampling, self.n_prompts, self.samples)


def one_run_components(rows, *, sample_var: float | None = None, samples: int = 1) -> OneRunComponents:
    """Components from ``rows[arm, prompt]``, each arm's scores (the mean over its runs; at least
    2 arms and 2 prompts), by the two-way ANOVA of ``crossed.two_way``: the residual mean square
    is arm x prompt plus eval sampling, the prompt means' variance less ``residual / arms`` the
    prompt part (each truncated at 0). ``sample_var``: mean within-prompt variance of one eval
    sample (None: greedy scores, no sampling part)."""
    table = np.asarray(rows, dtype=float)
    if table.ndim != 2 or table.shape[0] < 2 or table.shape[1] < 2:
        raise ValueError(f"one-run components need [arms, prompts] with at least 2 of each; got {table.shape}")
    _, cols, ms = two_way(table)
    sampling = float(sample_var) / samples if sample_var is not None and samples >= 1 else 0.0
    sampling = min(sampling, float(ms))
    return OneRunComponents(
        prompt=max(0.0, float(cols.var(ddof=1)) - float(ms) / table.shape[0]),
        arm_x_prompt=float(ms) - sampling,
        eval_sampling=sampling,
        n_prompts=table.shape[1],
        samples=samples,
        arms=table.shape[0],
    )
