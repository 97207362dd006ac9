"""Looks over compute: each look's alpha against hand-worked numbers, the stop rule, and the
design's calibration by simulation (Monte Carlo SE stated at each check)."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from harness.stats.compute_looks import (
    Design,
    draw_scores,
    look_alphas,
    monte_carlo_se,
    pairs_family,
    simulate,
    stop_rate,
    stops,
)

AT = (0.25, 0.5, 1.0)


def test_obrien_fleming_alphas_by_hand():
    # each side spends 2 (1 - Phi(z_{1 - alpha/4} / sqrt(t))) of alpha / 2: z_{0.9875} = 2.2414
    z = sps.norm.ppf(1 - 0.05 / 4)
    by_hand = [4 * sps.norm.sf(z / math.sqrt(t)) for t in AT]
    assert by_hand[0] == pytest.approx(1.4734e-5, rel=1e-3)  # 4 x 3.68e-6
    assert by_hand[1] == pytest.approx(3.0506e-3, rel=1e-3)  # 4 x sf(3.170)
    got = look_alphas(AT, 0.05, "obrien_fleming")
    assert got == pytest.approx([by_hand[0], by_hand[1] - by_hand[0], 0.05 - by_hand[1]], rel=1e-6)
    assert got.sum() == pytest.approx(0.05, abs=1e-15)


def test_pocock_alphas_by_hand():
    # alpha log(1 + (e - 1) t): 0.05 ln 1.42957 = 0.017869, 0.05 ln 1.85914 = 0.031006
    got = look_alphas(AT, 0.05, "pocock")
    assert got == pytest.approx([0.017869, 0.031006 - 0.017869, 0.05 - 0.031006], abs=2e-6)
    assert stop_rate(AT, 0.05, "pocock", family=2) == pytest.approx(0.031006 / 4, abs=1e-6)


@pytest.mark.parametrize("at", [(1.0,), (0.5, 0.25, 1.0), (0.5, 0.9), (0.0, 1.0)])
def test_bad_fractions_are_refused(at):
    with pytest.raises(ValueError, match="compute"):
        look_alphas(at, 0.05)


def test_the_stop_rule_reads_the_upper_end_against_the_allowance():
    assert stops([-0.11, -0.1, -0.09, 0.2], 0.1).tolist() == [True, False, False, False]
    assert stops([-0.01], 0.0).tolist() == [True]
    with pytest.raises(ValueError, match="catch_up"):
        stops([0.0], -1.0)
    assert pairs_family(4) == 6


def _run(means, noise, spending="obrien_fleming", catch_up=0.0, against="control", reps=6000, seeds=8, sd=1.0):
    rng = np.random.default_rng(11)
    scores = draw_scores(rng, np.asarray(means, dtype=float), seeds=seeds, reps=reps, noise=noise, sd=sd)
    return simulate(Design(AT, spending=spending, catch_up=catch_up, against=against, min_effect=0.5), scores)


@pytest.mark.parametrize("noise, sd, base", [("normal", 1.0, 0.0), ("t3", 1.0, 0.0), ("binary", 0.08, 0.5)])
@pytest.mark.parametrize("spending", ["obrien_fleming", "pocock"])
def test_arms_equal_to_the_control_are_called_neither_worse_nor_better_above_alpha(noise, sd, base, spending):
    reps = 6000
    out = _run(np.full((4, 3), base), noise, spending, reps=reps, sd=sd)
    for label in ("worse", "better"):
        rate = out.rate(label)  # any of the three arms: the family's error on that side
        assert rate <= 0.05 / 2 + 3 * monte_carlo_se(0.025, reps), (label, rate)


def test_a_truly_worse_arm_is_stopped_early_and_called_worse():
    out = _run([[0, 0, 0], [-2.0, -2.0, -2.0]], "normal", "pocock", reps=4000)
    assert out.stopped_rate(0) > 0.8 and out.rate("worse", 0) > 0.9
    assert out.compute.mean() < 0.85  # a stop frees a quarter or half of the arm's budget


@pytest.mark.parametrize("spending", ["obrien_fleming", "pocock"])
def test_a_better_arm_that_trails_within_the_allowance_is_stopped_at_most_at_the_stated_rate(spending):
    reps = 10_000
    # worse early by exactly the allowance (the worst case it covers), better at the budget
    out = _run([[0, 0, 0], [-0.3, -0.3, 0.8]], "normal", spending, catch_up=0.3, reps=reps)
    bound = stop_rate(AT, 0.05, spending, family=1)
    assert out.stopped_rate(0) <= bound + 3 * monte_carlo_se(bound, reps)


def test_beyond_the_allowance_a_crossing_arm_can_be_stopped_often():
    # the honest limit: trailing by 3 sd early, an arm that ends better is lost under Pocock
    out = _run([[0, 0, 0], [-3.0, -3.0, 0.8]], "normal", "pocock", catch_up=0.3, reps=2000)
    assert out.stopped_rate(0) > 0.5


def test_against_best_guards_every_pair():
    reps = 6000
    out = _run(np.zeros((4, 3)), "normal", "pocock", against="best", reps=reps)
    assert out.rate("worse") <= 0.025 + 3 * monte_carlo_se(0.025, reps)
