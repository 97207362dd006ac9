"""decision_probability / seeds_to_decide / seeds_can_decide: closed forms and Monte Carlo.

Monte Carlo rates p from R replicates have SE sqrt(p (1 - p) / R); the tolerance is 3 SE plus the
quadrature error (~1e-3). Fixed seeds throughout.
"""

import math

import numpy as np
import pytest
from scipy import special

from harness.stats import (
    PlanVariance,
    decision_probability,
    label_of,
    paired_test,
    power_paired,
    power_two_sample,
    seed_prompt_se,
    seeds_can_decide,
    seeds_to_decide,
    welch_test,
)


def se(p: float, reps: int) -> float:
    return math.sqrt(p * (1 - p) / reps)


def trial_plan(seed: float, paired: bool) -> PlanVariance:
    return PlanVariance(seed=seed, prompt=0.0, residual=0.0, sampling=0.0, n_prompts=1, samples=1, paired=paired)


def decided(lo, hi, margin) -> np.ndarray:
    labels, _ = label_of(lo, hi, margin=margin)
    return labels != "inconclusive"


def interval(diff, s, df, level):
    half = special.stdtrit(df, 0.5 + level / 2) * s
    return diff - half, diff + half


@pytest.mark.parametrize("delta, n", [(0.0, 5), (0.5, 8), (1.0, 10), (2.0, 4)])
def test_without_margin_paired_plans_give_the_paired_t_power(delta, n):
    # paired: the estimate is normal and the variance chi-square with n - 1 df, exactly the model
    assert decision_probability(delta, trial_plan(1.0, True), n, level=0.95) == pytest.approx(
        power_paired(delta, n, 1.0), abs=2e-3
    )


@pytest.mark.parametrize("delta, n", [(1.5, 3), (1.0, 5), (1.0, 17), (0.5, 40)])
def test_unpaired_trial_means_plans_use_the_df_at_the_true_variances(delta, n):
    # The plan's df for two arms of equal sd is 2 (n - 1): the noncentral-t power. Welch's test
    # estimates its df (at most 2 (n - 1)), so the plan is optimistic at 3-5 seeds (29.3% vs
    # 22.4% at 3 seeds and 1.5 sd) and agrees from ~15 seeds on.
    dp = decision_probability(delta, trial_plan(2.0, False), n, level=0.95)
    assert dp == pytest.approx(power_two_sample(delta, n, 1.0, method="noncentral_t"), abs=2e-3)
    gap = dp - power_two_sample(delta, n, 1.0)
    assert gap > 0.05 if n == 3 else gap < (0.03 if n == 5 else 0.005)


def test_decision_probability_without_variance_or_df():
    assert decision_probability(0.3, trial_plan(0.0, False), 5, level=0.95) == 1.0
    # a margin makes a true difference of 0 decidable (equivalent); without one it is the size
    plan = trial_plan(1.0, True)
    assert decision_probability(0.0, plan, 10, level=0.95) == pytest.approx(0.05, abs=2e-3)
    assert decision_probability(0.0, plan, 10, level=0.95, margin=2.0) > 0.9


R = 20_000  # SE at p = 0.5: 0.0035


@pytest.mark.parametrize(
    "delta, n, margin", [(0.0, 5, 1.5), (1.0, 5, None), (0.5, 8, 1.0), (1.0, 3, 2.0), (1.0, 12, 1.0)]
)
def test_decision_probability_matches_monte_carlo_of_the_paired_analysis(delta, n, margin):
    rng = np.random.default_rng(10 * n + int(10 * delta))
    sd = 0.7
    t = paired_test(rng.normal(delta, sd, (R, n)), np.zeros((R, n)))
    mc = decided(t.ci_low, t.ci_high, margin).mean()
    dp = decision_probability(delta, trial_plan(sd**2, True), n, level=0.95, margin=margin)
    print(f"paired delta={delta} n={n} margin={margin}: decision_probability {dp:.4f}, Monte Carlo {mc:.4f}")
    assert abs(mc - dp) <= 3 * se(dp, R) + 1e-3


def test_decision_probability_matches_monte_carlo_of_welch_at_ten_seeds():
    rng = np.random.default_rng(3)
    n, delta, margin = 10, 0.8, 1.0
    t = welch_test(rng.normal(delta, 1.0, (R, n)), rng.normal(0.0, 1.0, (R, n)))
    mc = decided(t.ci_low, t.ci_high, margin).mean()
    dp = decision_probability(delta, trial_plan(2.0, False), n, level=0.95, margin=margin)
    print(f"welch delta={delta} n={n} margin={margin}: decision_probability {dp:.4f}, Monte Carlo {mc:.4f}")
    assert abs(mc - dp) <= 3 * se(dp, R) + 1e-3


R_SP = 8_000  # SE at p = 0.5: 0.0056


def seed_prompt_runs(delta, n, P, sd_w, margin, level):
    """Monte Carlo decision rates of the seed x prompt analysis on crossed normal data (seed sd
    0.3, shared prompt sd 0.5, arm x prompt sd ``sd_w``, residual sd 1, two unpaired arms): with
    the estimator's own Satterthwaite df, and with the plan's df at the true variances; and
    ``decision_probability`` at the true components."""
    rng = np.random.default_rng(n * P)
    sd_u, sd_e = 0.3, 1.0
    shape = (R_SP, 2, n, P)
    y = (
        rng.normal(0, sd_u, shape[:3] + (1,))
        + rng.normal(0, sd_w, (R_SP, 2, 1, P))
        + rng.normal(0, 0.5, (R_SP, 1, 1, P))
        + rng.normal(0, sd_e, shape)
    )
    d, s, df, _, _ = seed_prompt_se(y[:, 1] + delta, y[:, 0], paired=False)
    plan = PlanVariance(
        seed=2 * sd_u**2, prompt=2 * sd_w**2, residual=2 * sd_e**2, sampling=0.0, n_prompts=P, samples=1, paired=False
    )
    mc = decided(*interval(d, s, df, level), margin).mean()
    mc_plan_df = decided(*interval(d, s, np.full_like(df, float(plan.df(n))), level), margin).mean()
    dp = decision_probability(delta, plan, n, level=level, margin=margin)
    print(
        f"seed_prompt delta={delta} n={n} P={P} sd_w={sd_w} margin={margin} level={level:.4f}: "
        f"decision_probability {dp:.4f}, Monte Carlo {mc:.4f} (with the plan's df {mc_plan_df:.4f})"
    )
    return dp, mc, mc_plan_df


@pytest.mark.parametrize(
    "delta, n, P, sd_w, margin, level",
    [
        (0.3, 12, 64, 0.3, 0.3, 0.95),
        (0.4, 10, 128, 0.2, 0.4, 0.99),
    ],
)
def test_decision_probability_matches_monte_carlo_of_the_seed_prompt_analysis(delta, n, P, sd_w, margin, level):
    dp, mc, mc_plan_df = seed_prompt_runs(delta, n, P, sd_w, margin, level)
    assert abs(mc - dp) <= 3 * se(dp, R_SP) + 1e-3
    assert abs(mc_plan_df - dp) <= 3 * se(dp, R_SP) + 1e-3


@pytest.mark.parametrize(
    "delta, n, P, sd_w, margin, level",
    [
        (0.5, 6, 64, 0.2, None, 1 - 0.05 / 6),
        (0.0, 8, 32, 0.1, 0.5, 0.95),
    ],
)
def test_decision_probability_is_slightly_optimistic_at_few_seeds(delta, n, P, sd_w, margin, level):
    # A known limitation, bounded here: the plan reads the t quantile at the df of the TRUE
    # variances, while the estimator's Satterthwaite df is estimated and biased low (and the
    # truncated prompt term adds a little variance), so at 6-8 seeds the real decision rate is
    # 1-3 points below the plan's (observed 0.332 vs 0.308 at 6 seeds and the 6-arm Bonferroni
    # level; 0.559 vs 0.542 at 8 seeds). With the plan's df the simulation matches the plan: the
    # normal / scaled chi-square model itself is right.
    dp, mc, mc_plan_df = seed_prompt_runs(delta, n, P, sd_w, margin, level)
    assert abs(mc_plan_df - dp) <= 3 * se(dp, R_SP) + 0.015  # (the truncation's share: ~0.01 at 8 seeds)
    assert 0 < dp - mc <= 0.04


@pytest.mark.parametrize("delta, margin", [(0.5, None), (0.5, 0.5), (0.0, 0.4), (1.0, 2.0)])
def test_seeds_to_decide_is_the_smallest_n_reaching_the_power(delta, margin):
    plan = PlanVariance(seed=0.2, prompt=0.01, residual=1.0, sampling=0.0, n_prompts=64, samples=1, paired=False)
    n = seeds_to_decide(delta, plan, level=0.99, margin=margin)
    assert n is not None
    assert decision_probability(delta, plan, n, level=0.99, margin=margin) >= 0.8
    if n > 2:
        assert decision_probability(delta, plan, n - 1, level=0.99, margin=margin) < 0.8
    assert seeds_to_decide(delta, plan, level=0.99, margin=margin, power=0.9) >= n


def test_arm_x_prompt_variance_can_make_seeds_useless():
    # the arm x prompt term 0.5 / P does not shrink with seeds: with 8 prompts its sd alone is 0.25
    plan = PlanVariance(seed=0.1, prompt=0.5, residual=1.0, sampling=0.0, n_prompts=8, samples=1, paired=False)
    assert seeds_to_decide(0.2, plan, level=0.95) is None
    assert not seeds_can_decide(0.2, plan, level=0.95)
    # more prompts help: 256 of them make 0.2 decidable
    assert decision_probability(0.2, plan, 200, level=0.95, prompts=256) > 0.8
    assert seeds_can_decide(2.0, plan, level=0.95)
    assert seeds_to_decide(0.0, plan, level=0.95) is None  # no margin: 0 is never decided
    far = trial_plan(1.0, False)
    assert seeds_to_decide(0.05, far, level=0.95, max_n=50) is None and seeds_can_decide(0.05, far, level=0.95)
