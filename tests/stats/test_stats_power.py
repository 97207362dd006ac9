"""Power and sample size: textbook values, internal consistency, the seed document's numbers."""

import math

import numpy as np
import pytest
from scipy import stats

from harness.stats import (
    minimal_detectable_effect,
    noise_floor,
    power_paired,
    power_two_sample,
    seeds_needed,
    seeds_needed_paired,
)


@pytest.mark.parametrize("d, n", [(1.0, 17), (0.8, 26), (0.5, 64)])
def test_seeds_needed_matches_cohen_tables(d, n):
    # Cohen (1988) / G*Power, two-sided t at alpha .05 and power .8: 17, 26, 64 per group.
    assert seeds_needed(d, 1.0) == n
    assert seeds_needed(d, 1.0, method="noncentral_t") == n
    assert seeds_needed(10 * d, 10.0) == n  # scale-free


def test_noncentral_t_method_equals_students_formula_by_hand():
    # equal sds and n: Welch df computed from the true sds is 2n - 2, ncp = d / sqrt(2 / n)
    n, d = 17, 1.0
    df, ncp = 2 * n - 2, d / math.sqrt(2 / n)
    crit = stats.t.ppf(0.975, df)
    expected = stats.nct.sf(crit, df, ncp) + stats.nct.cdf(-crit, df, ncp)
    assert power_two_sample(d, n, 1.0, method="noncentral_t") == pytest.approx(expected, abs=1e-12)
    assert expected == pytest.approx(0.807, abs=0.001)  # G*Power: actual power 0.807 at n = 17


def test_seeds_needed_is_the_smallest_n_reaching_the_power():
    for effect, sd_a, sd_b in [(1.0, 1.0, 1.0), (2.0, 1.0, 1.0), (1.0, 0.5, 1.5), (0.3, 0.2, 0.4)]:
        n = seeds_needed(effect, sd_a, sd_b)
        assert power_two_sample(effect, n, sd_a, sd_b) >= 0.8
        if n > 2:
            assert power_two_sample(effect, n - 1, sd_a, sd_b) < 0.8


def test_welch_power_is_below_noncentral_t_at_three_seeds():
    # Estimating the Welch df costs power at 3 seeds per arm: 22.4% rather than 29.3%
    # (both numbers confirmed by simulation in test_stats_calibration.py).
    assert power_two_sample(1.5, 3, 1.0) == pytest.approx(0.2241, abs=5e-4)
    assert power_two_sample(1.5, 3, 1.0, method="noncentral_t") == pytest.approx(0.2932, abs=5e-4)
    # ... and the two agree once there are many seeds
    for n in (50, 100, 101, 400):
        d = 2.8 / math.sqrt(n / 2)
        assert power_two_sample(d, n, 1.0) == pytest.approx(
            power_two_sample(d, n, 1.0, method="noncentral_t"), abs=2e-4
        )


def test_welch_power_with_one_constant_arm_is_one_sample_t_power():
    # If one arm has zero sd, Welch's statistic is a one-sample t on the other arm (df n - 1).
    assert power_two_sample(1.0, 5, 0.0, 1.0) == pytest.approx(power_paired(1.0, 5, 1.0), abs=2e-4)
    assert power_two_sample(1.0, 5, 1.0, 0.0) == pytest.approx(power_paired(1.0, 5, 1.0), abs=2e-4)


def test_power_at_zero_effect_is_the_size_of_the_test():
    assert power_two_sample(0.0, 30, 1.0) == pytest.approx(0.05, abs=0.002)
    assert power_paired(0.0, 8, 1.0) == pytest.approx(0.05, abs=1e-12)
    # Welch's test is conservative with equal variances at 3 seeds: size 3.5%, not 5%
    assert power_two_sample(0.0, 3, 1.0) == pytest.approx(0.0351, abs=5e-4)


def test_paired_power_and_seeds_by_hand():
    n, d, sd = 10, 1.0, 1.0
    crit = stats.t.ppf(0.975, n - 1)
    ncp = d * math.sqrt(n) / sd
    assert power_paired(d, n, sd) == pytest.approx(stats.nct.sf(crit, 9, ncp) + stats.nct.cdf(-crit, 9, ncp))
    n = seeds_needed_paired(1.0, 1.0)
    assert n == 10  # one-sample t, d = 1: 10 pairs (G*Power)
    assert power_paired(1.0, n - 1, 1.0) < 0.8 <= power_paired(1.0, n, 1.0)


def test_unreachable_returns_max_n_plus_one():
    assert seeds_needed(0.0, 1.0) == 10_001
    assert seeds_needed(0.01, 1.0, max_n=500) == 501
    assert seeds_needed_paired(0.0, 1.0, max_n=50) == 51
    assert seeds_needed(0.0281, 1.0, max_n=20_000) < 20_001  # reachable with a larger cap


def test_extreme_ratios_do_not_overflow():
    assert seeds_needed(1e-300, 1.0) == 10_001
    assert seeds_needed(1e-3, 1e-300) == 2


def test_deterministic_effects_need_two_seeds():
    assert seeds_needed(1.0, 0.0) == 2
    assert seeds_needed(100.0, 1.0) == 2


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(effect=1.0, sd_a=-1.0),
        dict(effect=1.0, sd_a=1.0, alpha=1.5),
        dict(effect=1.0, sd_a=1.0, power=1.0),
        dict(effect=1.0, sd_a=1.0, power=0.04),
        dict(effect=math.nan, sd_a=1.0),
        dict(effect=1.0, sd_a=1.0, max_n=1),
        dict(effect=1.0, sd_a=1.0, method="z"),
    ],
)
def test_seeds_needed_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        seeds_needed(**kwargs)


def test_unknown_method_lists_valid_ones():
    with pytest.raises(ValueError, match="welch, noncentral_t"):
        minimal_detectable_effect(5, 1.0, method="bogus")


def test_power_needs_two_seeds():
    with pytest.raises(ValueError, match="at least 2"):
        power_two_sample(1.0, 1, 1.0)


def test_minimal_detectable_effect_inverts_power():
    for n in (2, 3, 5, 17, 60):
        mde = minimal_detectable_effect(n, 1.0)
        assert power_two_sample(mde, n, 1.0) == pytest.approx(0.8, abs=1e-6)
    assert minimal_detectable_effect(17, 1.0) < 1.0 < minimal_detectable_effect(16, 1.0)  # n=17 is the first with d=1
    assert minimal_detectable_effect(10, 2.5) == pytest.approx(2.5 * minimal_detectable_effect(10, 1.0))
    assert minimal_detectable_effect(1, 1.0) == math.inf
    assert minimal_detectable_effect(5, 0.0) == 0.0


def test_seed_document_numbers():
    # Seed document "RL for LLMs - from softmax to GRPO": a 0/1 reward with J = 0.2 has variance
    # J(1-J) = 0.16, sd 0.4; the standard error shrinks as 1/sqrt(n) in the number of seeds, so
    # "halving the uncertainty costs four times the runs".
    scores = np.array([1, 0, 0, 0, 0] * 4, dtype=float)  # 20 seeds, J = 0.2
    nf = noise_floor(scores)
    assert nf.mean == pytest.approx(0.2)
    assert nf.std * math.sqrt((nf.n - 1) / nf.n) == pytest.approx(0.4)  # population sd
    assert nf.sem == pytest.approx(nf.std / math.sqrt(20))
    # With many seeds four times the runs halves the detectable effect ...
    assert minimal_detectable_effect(400, 0.4) / minimal_detectable_effect(100, 0.4) == pytest.approx(0.5, abs=0.002)
    # ... but at 3 seeds it buys more than that, because the t quantile with 2-4 df is so wide.
    assert minimal_detectable_effect(12, 0.4) / minimal_detectable_effect(3, 0.4) < 0.4
