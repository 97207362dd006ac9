"""Two arms scored 0/1 on the same prompts: an interval that keeps its level when few prompts change.

On a 0/1 metric (greedy accuracy) most prompts score the same for both arms, and the difference
rests on the few *discordant* prompts, the ones one arm solves and the other does not. The t
interval of the seed x prompt analysis (``crossed``) is right when many prompts change, but with
2-6 discordant prompts of 30 it is far too narrow: 4 prompts all flipping one way give a t p of
0.043 where McNemar's exact test, which asks only "are 4 of 4 flips one way by chance?", gives
0.125. The normal reference is the fault, not the standard error.

What we use, and why:

* **One seed per arm** (a 2 x 2 table of prompts): Newcombe's (1998) method 11 interval for a
  paired difference of proportions (continuity-corrected Wilson limits of each arm's proportion,
  combined with the phi correlation of the pairs), *and* McNemar's exact conditional test: the
  interval is widened to reach 0 whenever the exact test does not reject. We tried method 10
  (the same without continuity correction, which Fagerland, Lydersen and Laake 2013 recommend
  for larger tables) first: at 30-40 prompts with 1-6 discordant prompts mostly one way it
  covers only 88-94%, and it excludes 0 at 4 of 30 prompts flipping one way (exact p 0.125).
  Method 11 covers >= 95% on that whole grid; it still excludes 0 at 5 of 30 (exact p 0.0625),
  which the exact test corrects. The combined interval excludes 0 exactly when both reject,
  so the p-value is the larger of the two (``PairedCounts.p_value``) and interval and p-value
  always agree. This is the eval-only test of 0/1 scores (``EVAL_ONLY_BINARY_TEST``: one
  training run per side, so the prompts are the only pairs); it has an interval even when no
  prompt changes, where the t interval has none.
* **Several seeds per arm**: the 0/1 cells are not independent pairs (a prompt that flips for
  one seed tends to flip for all, and a seed shifts all its prompts), so the counts pooled over
  seeds are divided by a Rao-Scott (1992) design effect, the variance of the difference that
  the seed x prompt analysis estimates over the variance those counts would have as independent
  pairs (at least 1): a prompt that flips for every seed counts about once. The interval of
  the verdict is the union of the seed x prompt t interval and the binary interval on these
  effective counts, and its p-value the larger of the two: the t interval carries the
  training-seed variance with its small-seed df, the binary one the discreteness of few flips,
  and neither can make the other narrower. We chose the union over a score interval with a
  cluster correction alone because at 2-4 seeds the design effect is itself noisy, and the t
  term guards against under-estimating it; the price is a slightly wider interval when many
  prompts change, where the two nearly coincide.

Simulation (tests/stats/test_binary_paired_calibration.py) checks coverage at or above the
nominal level at 30-40 prompts with 1-6 discordant prompts, at one seed and on hierarchical
binary data (seed effect on the logit, prompt effects) with 2-3 seeds. Known limit: when the
effect sits on a rare kind of prompt (15% of prompts) and 5 seeds pool many cells, a sample
with few such prompts under-states the difference, and the union covers ~92% (the t interval
~91%); counting each prompt once whatever the seeds would fix that but doubles the interval
where seed x prompt noise is large (100 prompts, 10 seeds), so we did not.

Functions are vectorised over leading axes (simulations).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from ._util import JsonMixin

#: the name a verdict row gives the test
BINARY_TEST = "seed_prompt_binary"
#: the test of one run per side (``eval_only``): the binary interval of the prompts' 2 x 2 table alone
EVAL_ONLY_BINARY_TEST = "eval_only_binary"


def is_binary(*tables) -> bool:
    """Every value of every table is 0 or 1 (and there is at least one value)."""
    arrays = [np.asarray(t, dtype=float) for t in tables]
    return all(a.size for a in arrays) and all(bool(np.all((a == 0) | (a == 1))) for a in arrays)


def mcnemar_exact_p(arm_only, control_only):
    """Two-sided exact McNemar p-value, ``min(1, 2 P(X <= min(b, c)))`` with X ~ Bin(b + c, 1/2),
    as statsmodels' ``mcnemar(exact=True)``; real (effective) counts use the regularised incomplete
    beta, the continuous extension of the binomial tail. 1 when there are no discordant pairs."""
    b = np.asarray(arm_only, dtype=float)
    c = np.asarray(control_only, dtype=float)
    low = np.minimum(b, c)
    m = b + c
    with np.errstate(invalid="ignore", divide="ignore"):
        tail = special.betainc(np.maximum(m - low, 1e-300), low + 1.0, 0.5)  # P(X <= low)
    p = np.where(m > 0, np.minimum(1.0, 2.0 * tail), 1.0)
    return float(p) if p.ndim == 0 else p


def _wilson_cc(x, n, z):
    """Continuity-corrected Wilson limits of x / n (Newcombe 1998, single-proportion method 4)."""
    p = x / n
    low = (2 * n * p + z * z - 1 - z * np.sqrt(np.maximum(z * z - 2 - 1 / n + 4 * p * (n * (1 - p) + 1), 0.0))) / (
        2 * (n + z * z)
    )
    high = (2 * n * p + z * z + 1 + z * np.sqrt(np.maximum(z * z + 2 - 1 / n + 4 * p * (n * (1 - p) - 1), 0.0))) / (
        2 * (n + z * z)
    )
    return np.where(p <= 0, 0.0, np.maximum(low, 0.0)), np.where(p >= 1, 1.0, np.minimum(high, 1.0))


def newcombe_interval(both, arm_only, control_only, neither, z):
    """Newcombe's (1998) method 11 limits of p_arm - p_control from a paired 2 x 2 table at
    normal quantile ``z``: continuity-corrected Wilson limits of each proportion, combined with
    the phi correlation (its numerator ad - bc shrunk by n / 2 towards 0 when positive).
    Vectorised; real (effective) counts allowed."""
    a, b, c, d = (np.asarray(x, dtype=float) for x in (both, arm_only, control_only, neither))
    n = a + b + c + d
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = _wilson_cc(a + b, n, z)
    l2, u2 = _wilson_cc(a + c, n, z)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    cross = np.where(cross > 0, np.maximum(cross - n / 2.0, 0.0), cross)
    with np.errstate(invalid="ignore", divide="ignore"):
        phi = np.where(margins > 0, cross / np.sqrt(np.where(margins > 0, margins, 1.0)), 0.0)
    diff = p1 - p2
    low = diff - np.sqrt(np.maximum((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2, 0.0))
    high = diff + np.sqrt(np.maximum((p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2, 0.0))
    return low, high


def newcombe_p(both, arm_only, control_only, neither):
    """The smallest alpha at which Newcombe's interval (level 1 - alpha) excludes 0: its limit on
    the side of 0 grows with z, so this is found by bisection on z (vectorised)."""
    a, b, c, d = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (both, arm_only, control_only, neither)))
    sign = np.sign(b - c)
    lo, hi = np.zeros(a.shape), np.full(a.shape, 40.0)
    for _ in range(60):
        z = 0.5 * (lo + hi)
        low, high = newcombe_interval(a, b, c, d, z)
        excludes = np.where(sign > 0, low > 0, high < 0)
        lo, hi = np.where(excludes, z, lo), np.where(excludes, hi, z)
    p = np.where(sign == 0, 1.0, 2.0 * special.ndtr(-0.5 * (lo + hi)))
    return float(p) if p.ndim == 0 else p


@dataclass(frozen=True)
class PairedCounts(JsonMixin):
    """A paired 2 x 2 table of 0/1 scores, arm against control (pairs: prompts, or seed x prompt
    cells divided by ``design_effect``): ``both`` 1 in both, ``arm_only`` 1 only in the arm,
    ``control_only`` 1 only in the control, ``neither``."""

    both: float
    arm_only: float
    control_only: float
    neither: float
    design_effect: float = 1.0

    @property
    def n(self) -> float:
        return self.both + self.arm_only + self.control_only + self.neither

    @property
    def diff(self) -> float:
        return (self.arm_only - self.control_only) / self.n

    def p_value(self) -> float:
        """The larger of McNemar's exact p and Newcombe's: below alpha exactly when
        ``interval(1 - alpha)`` excludes 0."""
        t = (self.both, self.arm_only, self.control_only, self.neither)
        return max(mcnemar_exact_p(self.arm_only, self.control_only), newcombe_p(*t))

    def interval(self, level: float) -> tuple[float, float]:
        """Newcombe's interval at ``level``, reaching to 0 where McNemar's exact test does not reject."""
        z = float(special.ndtri(0.5 + level / 2.0))
        low, high = (float(x) for x in newcombe_interval(self.both, self.arm_only, self.control_only, self.neither, z))
        if mcnemar_exact_p(self.arm_only, self.control_only) >= 1.0 - level:
            low, high = min(low, 0.0), max(high, 0.0)
        return low, high


def pooled_counts(arm, control, *, paired: bool):
    """``(both, arm_only, control_only, neither, pairs)`` of two 0/1 tables ``[..., seeds, P]``
    on the same prompts, summed over seeds and prompts. Paired: cell by cell (same seeds).
    Unpaired: each prompt's counts averaged over every pairing of an arm seed with a control
    seed, scaled to ``min(n_arm, n_control)`` pairs per prompt."""
    a = np.asarray(arm, dtype=float)
    c = np.asarray(control, dtype=float)
    if paired:
        cells = (a * c, a * (1 - c), (1 - a) * c, (1 - a) * (1 - c))
        counts = [x.sum(axis=(-2, -1)) for x in cells]
        pairs = a.shape[-2] * a.shape[-1]
    else:
        pa, pc = a.mean(axis=-2), c.mean(axis=-2)
        per = min(a.shape[-2], c.shape[-2])
        cells = (pa * pc, pa * (1 - pc), (1 - pa) * pc, (1 - pa) * (1 - pc))
        counts = [per * x.sum(axis=-1) for x in cells]
        pairs = per * a.shape[-1]
    return (*counts, pairs)


def design_effect(arm_only, control_only, pairs, variance):
    """Rao-Scott design effect: ``variance`` (of the difference, from the seed x prompt analysis)
    over the multinomial variance of (arm_only - control_only) / pairs for independent pairs; at least 1."""
    b = np.asarray(arm_only, dtype=float) / pairs
    c = np.asarray(control_only, dtype=float) / pairs
    iid = (b + c - (b - c) ** 2) / pairs
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(iid > 0, np.maximum(1.0, np.asarray(variance, dtype=float) / np.where(iid > 0, iid, 1.0)), 1.0)


def effective_counts(arm, control, *, paired: bool, variance) -> tuple[np.ndarray, ...]:
    """Pooled counts divided by the design effect at the difference's ``variance`` (vectorised):
    ``(both, arm_only, control_only, neither, design_effect)``."""
    *counts, pairs = pooled_counts(arm, control, paired=paired)
    deff = design_effect(counts[1], counts[2], pairs, variance)
    return (*(x / deff for x in counts), deff)


def union_interval(t_low, t_high, t_p, counts: PairedCounts | None, level: float):
    """The interval and p-value a verdict reads: the t interval alone, or its union with the
    binary interval of ``counts`` at ``level`` (and the larger p-value)."""
    if counts is None:
        return t_low, t_high, t_p
    low, high = counts.interval(level)
    return min(t_low, low), max(t_high, high), max(t_p, counts.p_value())


def binary_interval_vectorised(both, arm_only, control_only, neither, level: float):
    """``PairedCounts.interval`` and ``p_value`` over arrays of counts (simulations)."""
    z = float(special.ndtri(0.5 + level / 2.0))
    low, high = newcombe_interval(both, arm_only, control_only, neither, z)
    exact = mcnemar_exact_p(arm_only, control_only)
    keep = np.asarray(exact) >= 1.0 - level
    low, high = np.where(keep, np.minimum(low, 0.0), low), np.where(keep, np.maximum(high, 0.0), high)
    p = np.maximum(exact, newcombe_p(both, arm_only, control_only, neither))
    return low, high, p
