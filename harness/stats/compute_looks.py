"""Looks over compute: alpha spent across points of the training budget, the stop rule, and a
vectorised simulation of a whole design (the calibration tests and the savings benchmark use it).

A study with compute looks reads every arm at fractions t_1 < ... < t_K = 1 of its budget, on
the same seeds each time. An arm is stopped at an interim look when it is decided worse than its
reference (the control, or the arm best at the look) by more than a pre-registered catch-up
allowance; every other verdict waits for the budget.

Why not the joint recursion of :mod:`.sequential`: its boundaries need the looks' estimates to be
one quantity measured with growing information (independent increments, Corr(Z_j, Z_k) =
sqrt(I_j / I_k)). Here the seeds are the same at every look and the quantity changes: the
difference at 25% of the budget is another estimand than the one at the budget, and a seed's
reading early is correlated with its reading later by however its curve runs (nothing the design
knows). So each look gets its own share of alpha by the named Lan-DeMets function on the compute
fraction, ``alpha_k = alpha(t_k) - alpha(t_{k-1})``, and each look's interval is the ordinary one
at level ``1 - alpha_k`` (divided by the family for Bonferroni). By the union bound (Bonferroni
over the looks, valid under any dependence) the probability that any look's interval misses its
own true difference is at most ``sum alpha_k = alpha``. That is conservative where the looks are
strongly correlated, and it holds whatever the curves do, which the recursion would not.

The stop rule is one-sided: an arm stops at look k < K when the upper end of its interval for
``arm - reference`` (oriented so that positive is better) lies below ``-catch_up``. An arm that
trails its reference at the look by no more than ``catch_up`` (a curve that may still cross) is
then stopped with probability at most ``alpha_k / 2`` per look (the interval's upper tail), so at
most ``stop_rate`` over the interim looks. A stopped arm's verdict, "worse", is a claim about the
budget only under that allowance. The last look spends what is left, ``alpha - alpha(t_{K-1})``,
on every verdict (better, worse, equivalent, inconclusive), as a fixed design would.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ._util import check_alpha
from .compare import welch_test
from .sequential import SPENDING, spent
from .verdict import WORSE, label_of

#: the kinds of score the simulation draws: per-seed normal, heavy-tailed (t with 3 df) or the
#: mean over prompts of 0/1 scores (the seed's success probability drawn around the true mean)
NOISES = ("normal", "t3", "binary")
#: what an arm is stopped against: the control, or the arm best at the look
REFERENCES = ("control", "best")


def check_fractions(at: Sequence[float]) -> np.ndarray:
    """The looks' compute fractions: rising strictly, each in (0, 1], the last exactly 1."""
    t = np.asarray(at, dtype=float)
    if t.ndim != 1 or t.size < 2 or not np.all(np.isfinite(t)):
        raise ValueError(f"compute looks need at least two finite fractions (a look and the budget); got {list(at)}")
    if t[0] <= 0 or np.any(np.diff(t) <= 0) or t[-1] != 1.0:
        raise ValueError(f"compute fractions must rise strictly from above 0 to exactly 1; got {t.tolist()}")
    return t


def look_alphas(at: Sequence[float], alpha: float, spending: str = "obrien_fleming") -> np.ndarray:
    """Each look's share of the two-sided alpha: ``alpha(t_k) - alpha(t_{k-1})`` of the named
    spending function on the compute fractions (``stats.sequential.spent``); they sum to alpha,
    the last being what the interim looks left."""
    alpha = check_alpha(alpha)
    if spending not in SPENDING:
        raise ValueError(f"unknown spending function {spending!r}; choose one of {', '.join(SPENDING)}")
    t = check_fractions(at)
    cumulative = spent(spending, t, alpha)
    cumulative[-1] = alpha  # spent(1) is alpha up to rounding: the last look takes exactly what is left
    return np.diff(np.concatenate([[0.0], cumulative]))


def stop_rate(at: Sequence[float], alpha: float, spending: str = "obrien_fleming", family: int = 1) -> float:
    """The most an arm that trails its reference by no more than the catch-up allowance at every
    interim look is stopped: the upper tails of the interim looks' intervals, ``sum_{k<K} alpha_k
    / (2 family)``."""
    return float(look_alphas(at, alpha, spending)[:-1].sum() / (2.0 * max(1, int(family))))


def stops(ci_high, catch_up: float):
    """The stop rule on intervals of ``arm - reference`` oriented so that positive is better:
    the whole interval trails by more than ``catch_up`` (vectorised)."""
    if not catch_up >= 0 or not math.isfinite(catch_up):
        raise ValueError(f"catch_up must be a finite number >= 0; got {catch_up}")
    return np.asarray(ci_high, dtype=float) < -catch_up


def pairs_family(conditions: int) -> int:
    """The comparisons an ``against: best`` look guards: every pair of the conditions (the best
    is chosen by the data, so any pair may be the one read)."""
    return conditions * (conditions - 1) // 2


# ----------------------------------------------------------------------------- simulation


@dataclass(frozen=True)
class Design:
    """A compute-look design as the simulation reads it (direction: more is better)."""

    at: tuple[float, ...]
    alpha: float = 0.05
    spending: str = "obrien_fleming"
    catch_up: float = 0.0
    against: str = "control"
    min_effect: float | None = None

    def __post_init__(self):
        look_alphas(self.at, self.alpha, self.spending)
        stops(0.0, self.catch_up)
        if self.against not in REFERENCES:
            raise ValueError(f"against must be one of {', '.join(REFERENCES)}; got {self.against!r}")


def draw_scores(
    rng: np.random.Generator,
    means: np.ndarray,
    *,
    seeds: int,
    reps: int,
    noise: str = "normal",
    sd: float = 1.0,
    correlation: float = 0.7,
    prompts: int = 64,
) -> np.ndarray:
    """Scores ``[reps, conditions, seeds, looks]`` of seeds whose true mean at each look is
    ``means[condition, look]`` (condition 0: the control). A seed's deviations at successive
    looks are correlated (``correlation`` between neighbours), as one run read along its curve.
    ``normal`` and ``t3`` add deviations of sd ``sd``; ``binary`` draws each seed's success
    probability with sd ``sd`` around the mean (clipped to [0.01, 0.99]) and scores the mean over
    ``prompts`` 0/1 answers."""
    if noise not in NOISES:
        raise ValueError(f"noise must be one of {', '.join(NOISES)}; got {noise!r}")
    means = np.asarray(means, dtype=float)
    conditions, looks = means.shape
    shape = (reps, conditions, seeds, looks)
    raw = rng.standard_normal(shape) if noise != "t3" else rng.standard_t(3, shape) / math.sqrt(3.0)
    walk = np.empty(shape)
    walk[..., 0] = raw[..., 0]
    keep = math.sqrt(1.0 - correlation * correlation)
    for k in range(1, looks):
        walk[..., k] = correlation * walk[..., k - 1] + keep * raw[..., k]
    if noise != "binary":
        return means[None, :, None, :] + sd * walk
    p = np.clip(means[None, :, None, :] + sd * walk, 0.01, 0.99)
    return rng.binomial(prompts, p) / prompts


@dataclass(frozen=True)
class Simulated:
    """What each simulated study did: per arm (the conditions after the control) the 0-based look
    it stopped at (-1: ran to the budget) and its verdict (a stopped arm's is "worse"), and the
    compute the study spent as a share of running every condition to the budget."""

    stopped: np.ndarray  # [reps, arms]
    labels: np.ndarray  # [reps, arms]
    compute: np.ndarray  # [reps]

    def rate(self, label: str, arm: int | None = None) -> float:
        """The share of studies giving ``label`` (to ``arm``; None: to any arm)."""
        hit = self.labels == label
        return float(hit[:, arm].mean() if arm is not None else hit.any(axis=1).mean())

    def stopped_rate(self, arm: int) -> float:
        return float((self.stopped[:, arm] >= 0).mean())


def _intervals(scores: np.ndarray, k: int, level_alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Welch intervals ``[reps, c, c]`` (low, high) of every condition minus every other at look ``k``."""
    at = scores[..., k]
    t = welch_test(at[:, :, None, :], at[:, None, :, :], alpha=level_alpha)
    return t.ci_low, t.ci_high


def simulate(design: Design, scores: np.ndarray) -> Simulated:
    """Run ``design`` on ``scores`` (``draw_scores``; Welch's t on the seed scores at each look, as
    the harness tests trial means of unpaired seeds): interim looks stop arms by the stop rule
    against the control or the best condition at the look (Bonferroni over the arms, or over every
    pair for ``best``); the control never stops; the last look labels every running arm against
    the control with the alpha left (Bonferroni over the arms)."""
    reps, conditions, seeds, looks = scores.shape
    if looks != len(design.at):
        raise ValueError(f"the scores have {looks} looks; the design {len(design.at)}")
    arms = conditions - 1
    alphas = look_alphas(design.at, design.alpha, design.spending)
    family = arms if design.against == "control" else pairs_family(conditions)
    running = np.ones((reps, conditions), dtype=bool)
    stopped = np.full((reps, arms), -1)
    rows = np.arange(reps)
    for k in range(looks - 1):
        if alphas[k] <= 0:
            continue
        _, high = _intervals(scores, k, alphas[k] / family)
        if design.against == "control":
            reference = np.zeros(reps, dtype=int)
        else:
            means = np.where(running, scores[..., k].mean(axis=-1), -np.inf)
            reference = means.argmax(axis=1)
        upper = high[rows, :, reference]  # [reps, c]: condition minus the reference
        stop = stops(upper, design.catch_up) & running
        stop[:, 0] = False  # the control runs to the budget: the final verdicts read it
        stopped[stop[:, 1:]] = k
        running &= ~stop
    low, high = _intervals(scores, looks - 1, alphas[-1] / max(1, arms))
    final, _ = label_of(low[:, 1:, 0], high[:, 1:, 0], margin=design.min_effect)
    labels = np.where(stopped >= 0, WORSE, final).astype(object)
    fractions = np.asarray(design.at)
    spent_share = np.where(stopped >= 0, fractions[np.maximum(stopped, 0)], 1.0)
    compute = (spent_share.sum(axis=1) + 1.0) / conditions
    return Simulated(stopped, labels, compute)


def monte_carlo_se(rate: float, reps: int) -> float:
    """The Monte Carlo standard error of a simulated rate."""
    return math.sqrt(max(rate * (1.0 - rate), 0.0) / reps)
