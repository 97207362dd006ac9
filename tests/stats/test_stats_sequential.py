"""Group-sequential boundaries: published values, and the error they spend, by simulation."""

import numpy as np
import pytest
from scipy import special

from harness.stats import Difference, decide
from harness.stats.sequential import Look, efficacy_bounds, look_odds, spent

FIVE_LOOKS = [0.2, 0.4, 0.6, 0.8, 1.0]


def test_obrien_fleming_bounds_match_ldbounds():
    # ldbounds::ldBounds(t = seq(0.2, 1, 0.2), iuse = 1, alpha = 0.05, sides = 2)$upper.bounds
    published = [4.8769, 3.3569, 2.6803, 2.2898, 2.0310]
    assert efficacy_bounds(FIVE_LOOKS, 0.05) == pytest.approx(published, abs=2e-4)


def test_pocock_bounds_match_ldbounds():
    # ldbounds::ldBounds(t = seq(0.2, 1, 0.2), iuse = 2, alpha = 0.05, sides = 2)$upper.bounds
    published = [2.4380, 2.4268, 2.4101, 2.3966, 2.3859]
    assert efficacy_bounds(FIVE_LOOKS, 0.05, "pocock") == pytest.approx(published, abs=2e-4)


def test_one_look_is_the_fixed_design():
    assert efficacy_bounds([1.0], 0.05) == pytest.approx([1.959964], abs=1e-6)
    assert efficacy_bounds([1.0], 0.01, "pocock") == pytest.approx([2.575829], abs=1e-6)


@pytest.mark.parametrize("spending", ["obrien_fleming", "pocock"])
def test_spending_reaches_alpha_at_the_end(spending):
    cumulative = spent(spending, FIVE_LOOKS, 0.05)
    assert np.all(np.diff(cumulative) > 0)
    assert cumulative[-1] == pytest.approx(0.05)


@pytest.mark.parametrize("spending", ["obrien_fleming", "pocock"])
def test_unequal_looks_spend_alpha_by_simulation(spending):
    # looks at 3, 5, 8, 12 and 20 seeds: the Brownian motion of a difference of seed means
    seeds = np.array([3, 5, 8, 12, 20])
    bounds = efficacy_bounds(seeds / seeds[-1], 0.05, spending)
    rng = np.random.default_rng(7)
    reps = 100_000
    sums = rng.standard_normal((reps, seeds[-1])).cumsum(axis=1)[:, seeds - 1]
    z = sums / np.sqrt(seeds)
    crossed = (np.abs(z) >= bounds).any(axis=1)
    mc_se = np.sqrt(0.05 * 0.95 / reps)
    assert abs(crossed.mean() - 0.05) < 3 * mc_se
    # and each look spends what the function says, to MC error
    first = np.argmax(np.abs(z) >= bounds, axis=1)
    per_look = np.array([np.mean(crossed & (first == k)) for k in range(len(seeds))])
    expected = np.diff(np.concatenate([[0.0], spent(spending, seeds / seeds[-1], 0.05)]))
    assert np.all(np.abs(per_look - expected) < 3 * np.sqrt(expected / reps) + 1e-4)


def test_look_odds_match_simulation_with_a_margin():
    seeds = np.array([4, 8, 16, 32])
    variances = 2.0 / seeds  # difference of two means of unit-variance seeds
    bounds = efficacy_bounds(variances[-1] / variances, 0.05, "pocock")
    margin, delta = 1.0, 0.3
    odds = look_odds(bounds, variances, delta, margin=margin)
    rng = np.random.default_rng(3)
    reps = 100_000
    diffs = rng.normal(delta, np.sqrt(2.0), (reps, seeds[-1])).cumsum(axis=1)[:, seeds - 1] / seeds
    half = bounds * np.sqrt(variances)
    above, equivalent = diffs - half > 0, np.abs(diffs) + half < margin
    below = diffs + half < 0
    stop = above | below | equivalent
    first = np.where(stop.any(axis=1), np.argmax(stop, axis=1), -1)
    for k in range(len(seeds)):
        at_k = first == k
        for simulated, computed in ((above, odds.above), (equivalent, odds.equivalent), (below, odds.below)):
            p = np.mean(at_k & simulated[:, k])
            assert abs(p - computed[k]) < 4 * np.sqrt(max(p, 1e-4) / reps) + 1e-4
    assert odds.undecided == pytest.approx(np.mean(first == -1), abs=4e-3)
    assert odds.stopped.sum() + odds.undecided == pytest.approx(1.0, abs=1e-6)


def test_no_margin_means_no_equivalence():
    odds = look_odds(efficacy_bounds([0.5, 1.0], 0.05), [2.0, 1.0], 0.0)
    assert np.all(odds.equivalent == 0)
    assert odds.above.sum() + odds.below.sum() == pytest.approx(0.05, abs=1e-6)


@pytest.mark.parametrize("fractions", [[], [0.5, 0.4, 1.0], [0.0, 1.0], [0.5, 1.2], [0.5, float("nan"), 1.0]])
def test_bad_fractions_are_refused(fractions):
    with pytest.raises(ValueError, match="information fractions"):
        efficacy_bounds(fractions, 0.05)


def test_unknown_spending_is_refused():
    with pytest.raises(ValueError, match="unknown spending function 'haybittle'"):
        efficacy_bounds([1.0], 0.05, "haybittle")


def test_variances_must_fall():
    with pytest.raises(ValueError, match="decreasing"):
        look_odds([3.0, 2.0], [1.0, 2.0], 0.0)


def _difference(diff, se=0.1, df=20.0, n=5):
    return Difference(diff=diff, se=se, df=df, test="welch_t", n_arm=n, n_control=n, paired=False)


@pytest.mark.parametrize("diff", [0.05, 0.3, 0.45, 0.6, -0.6])
def test_a_look_verdict_reads_the_repeated_interval(diff):
    look = Look((3, 5), 20)
    [verdict] = decide([_difference(diff)], alpha=0.05, min_effect=0.2, looks=[look])
    z = look.bound(0.05)
    assert verdict.ci_level == pytest.approx(2 * special.ndtr(z) - 1)
    half = special.stdtrit(20.0, special.ndtr(z)) * 0.1
    assert (verdict.ci_low, verdict.ci_high) == pytest.approx((diff - half, diff + half))
    excludes_zero = verdict.ci_low > 0 or verdict.ci_high < 0
    assert (verdict.p_adjusted < 0.05) == excludes_zero
    assert verdict.label == ("better" if diff - half > 0 else "worse" if diff + half < 0 else "inconclusive")
    assert "repeated interval (look 2)" in verdict.reason
    assert verdict.seeds_needed_effect is None  # an interim look plans nothing


def test_the_repeated_interval_is_wider_than_the_fixed_one_and_bonferroni_applies():
    diffs = [_difference(0.5), _difference(0.1)]
    fixed = decide(diffs, alpha=0.05)
    looks = [Look((3, 5, 8, 12, 20), 20)] * 2
    final = decide(diffs, alpha=0.05, looks=looks)
    assert final[0].ci_level > fixed[0].ci_level > 0.95  # both at alpha / 2, the look's stricter
    assert final[0].p_adjusted == pytest.approx(
        min(1.0, 2 * looks[0].repeated_p(-special.ndtri(final[0].p_value / 2))), rel=1e-9
    )
    assert final[0].seeds_needed_effect is None or final[0].seeds_needed_effect > 0


def test_looks_must_match_the_differences():
    with pytest.raises(ValueError, match="2 looks for 1 differences"):
        decide([_difference(0.1)], looks=[Look((3,), 10)] * 2)


@pytest.mark.parametrize("seeds", [(), (5, 3), (0, 3)])
def test_a_look_needs_rising_seeds(seeds):
    with pytest.raises(ValueError, match="rise strictly"):
        Look(seeds, 10)


def test_expected_trials_match_a_simulation():
    from harness.stats.sequential import expected_trials

    looks, arms, margin = [4, 8, 12, 16, 20], 3, 1.0
    for delta in (0.0, 1.0):
        plan = expected_trials(looks, arms=arms, delta=delta, margin=margin, sd=1.0, followers=1)
        rng = np.random.default_rng(9)
        reps = 20_000
        n = np.array(looks)
        diffs = rng.normal(delta, 1.0, (reps, arms, n[-1])) - rng.normal(0.0, 1.0, (reps, 1, n[-1]))
        means = diffs.cumsum(axis=2)[..., n - 1] / n
        half = efficacy_bounds(n / n[-1], 0.05 / arms) * np.sqrt(2.0 / n)
        stop = (means - half > 0) | (means + half < 0) | ((np.abs(means) + half) < margin)
        first = np.where(stop.any(axis=2), np.argmax(stop, axis=2), len(looks) - 1)
        seeds = n[first]
        simulated = seeds.sum(axis=1) + 2 * seeds.max(axis=1)  # the control and one follower
        assert plan.maximum == 20 * (arms + 2)
        # independence of the arms is an approximation for the control's share (they share it)
        assert plan.mean == pytest.approx(simulated.mean(), rel=0.03)
    with pytest.raises(ValueError, match="seed sd"):
        expected_trials(looks, arms=1, delta=0.0, margin=None, sd=0.0)
