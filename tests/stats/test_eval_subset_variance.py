"""Cochran's stratified variance of a subset read (``harness.stats.eval_subset``): a hand-worked
example, and the coverage of the full set's mean difference by the widened interval."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from harness.stats.eval_subset import subset_variance, widen


def test_hand_worked_example():
    # stratum 0: N=6, sampled [1, 3] (mean 2, s^2 2); stratum 1: N=14, sampled [0, 3, 6] (mean 3, s^2 9)
    # W = 0.3, 0.7: mean 0.3*2 + 0.7*3 = 2.7
    # v = 0.09 * (1 - 2/6) * 2/2 + 0.49 * (1 - 3/14) * 9/3 = 0.06 + 1.155 = 1.215
    # g = 6*4/2 = 12, 14*11/3 = 51.333..; n_e = (12*2 + 51.333*9)^2 / (12^2*4/1 + 51.333^2*81/2) = 2.20131
    got = subset_variance([1, 0, 3, 3, 6], [0, 1, 0, 1, 1], {0: 6, 1: 14})
    assert got.mean == pytest.approx(2.7)
    assert got.variance == pytest.approx(1.215)
    assert got.df == pytest.approx(486**2 / (576 + (154 / 3) ** 2 * 81 / 2))
    assert (got.n_subset, got.n_full) == (5, 20)
    # widened: se 0.5 on 10 df -> sqrt(0.25 + 1.215), df 1.465^2 / (0.0625/10 + 1.215^2/n_e)
    se, df = widen(0.5, 10.0, got)
    assert se == pytest.approx(math.sqrt(1.465))
    assert df == pytest.approx(1.465**2 / (0.0625 / 10 + 1.215**2 / got.df))


def test_a_stratum_read_whole_adds_nothing():
    got = subset_variance([1.0, 2.0, 5.0], [0, 0, 1], {0: 2, 1: 1})
    assert (got.variance, got.df) == (0.0, math.inf)
    assert got.mean == pytest.approx(2 / 3 * 1.5 + 1 / 3 * 5.0)
    assert widen(0.3, 4.0, got) == (0.3, 4.0)


@pytest.mark.parametrize(
    ("values", "strata", "sizes", "why"),
    [
        ([1.0, 2.0], [0, 0], {0: 1}, "2 sampled prompts of 1"),
        ([1.0, 2.0], [0, 1], {0: 5, 1: 5}, "1 sampled prompt of 5"),
        ([1.0, 2.0], [0, 2], {0: 5, 1: 5}, r"strata \[2\] have no size"),
        ([1.0, 2.0], [0, 0], {0: 5, 1: 5}, "stratum 1: 0 sampled prompts"),
    ],
)
def test_bad_designs_are_refused(values, strata, sizes, why):
    with pytest.raises(ValueError, match=why):
        subset_variance(values, strata, sizes)


def _coverage(widened: bool, replicates: int = 2000, level: float = 0.9) -> float:
    """How often the level interval of a paired comparison read on a fresh stratified subset
    (non-proportional: 5 of each stratum) covers the full set's mean difference."""
    rng = np.random.default_rng(7)
    sizes = {0: 20, 1: 30, 2: 30, 3: 40}
    label = np.repeat(list(sizes), list(sizes.values()))
    delta = 0.1 * label + rng.normal(0.0, 0.3, len(label))  # the true per-prompt difference
    target = delta.mean()
    weights = np.array([sizes[h] / len(label) for h in sizes])
    seeds, per_stratum = 5, 5
    hits = 0
    for _ in range(replicates):
        picked = np.concatenate([rng.choice(np.flatnonzero(label == h), per_stratum, replace=False) for h in sizes])
        # seed x prompt paired differences on the subset: the truth, a seed effect and residual noise
        d = delta[picked] + rng.normal(0.0, 0.05, (seeds, 1)) + rng.normal(0.0, 0.3, (seeds, len(picked)))
        per_seed = (d.reshape(seeds, len(sizes), per_stratum).mean(axis=2) * weights).sum(axis=1)
        diff, se, df = per_seed.mean(), per_seed.std(ddof=1) / math.sqrt(seeds), seeds - 1.0
        if widened:
            added = subset_variance(d.mean(axis=0), label[picked], sizes)
            assert added.mean == pytest.approx(diff)
            se, df = widen(se, df, added)
        half = sps.t.ppf(0.5 + level / 2, df) * se
        hits += abs(diff - target) <= half
    return hits / replicates


def test_widened_interval_covers_the_full_set_mean_difference():
    level, replicates = 0.9, 1500
    mc_se = math.sqrt(level * (1 - level) / replicates)
    assert _coverage(True, replicates, level) >= level - 3 * mc_se
    # the seeds' interval alone is about the subset's prompts, not the full set's: it under-covers
    assert _coverage(False, replicates, level) < level - 3 * mc_se
