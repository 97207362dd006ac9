"""Coverage of the binary interval on 0/1 data with few discordant prompts, by simulation.

Monte Carlo tolerance: with R replicates a true coverage of 0.95 is estimated with sd
sqrt(0.95 * 0.05 / R) (0.0017 at R = 16,000; 0.0040 at R = 3,000); a cell passes at 0.95 minus
3 sd. The several-seed scenarios exclude replicates the seed x prompt analysis cannot test (no
variance at all: no prompt differs), which a verdict marks untestable.
"""

import numpy as np
import pytest
from scipy import special

from harness.stats.binary_paired import binary_interval_vectorised, effective_counts
from harness.stats.crossed import seed_prompt_se

LEVEL = 0.95


def _tolerance(reps: int) -> float:
    return 3 * np.sqrt(LEVEL * (1 - LEVEL) / reps)


@pytest.mark.parametrize("prompts", [30, 40])
@pytest.mark.slow
def test_one_seed_coverage_with_one_to_six_discordant_prompts(prompts):
    """A 2 x 2 table of prompts: expected discordant prompts 1-6, all or most one way or balanced,
    at several concordant rates."""
    rng = np.random.default_rng(11)
    reps = 16_000
    worst = 1.0
    for discordant in (1, 2, 3, 4, 5, 6):
        q = discordant / prompts
        for arm_share in (0.5, 0.75, 1.0):
            for both in (0.05, 0.3, 0.6):
                p10, p01 = q * arm_share, q * (1 - arm_share)
                x = rng.multinomial(prompts, [both, p10, p01, 1 - both - p10 - p01], size=reps)
                low, high, _ = binary_interval_vectorised(x[:, 0], x[:, 1], x[:, 2], x[:, 3], LEVEL)
                cover = float(np.mean((low <= p10 - p01) & (p10 - p01 <= high)))
                worst = min(worst, cover)
                assert cover >= LEVEL - _tolerance(reps), (discordant, arm_share, both, cover)
    assert worst < 0.999  # not trivially wide everywhere


def _hierarchical(rng, reps, seeds, prompts, share, beta, seed_sd):
    """Logit of a prompt's pass probability: a prompt effect (a share of moderate prompts, the rest
    solved or failed by both arms), the arm's effect ``beta`` and a training-seed effect."""
    moderate = rng.random((reps, 1, prompts)) < share
    extreme = np.where(rng.random((reps, 1, prompts)) < 0.5, -7.0, 7.0)
    v = np.where(moderate, rng.normal(0.0, 1.0, (reps, 1, prompts)), extreme)
    arm = rng.random((reps, seeds, prompts)) < special.expit(v + beta + rng.normal(0, seed_sd, (reps, seeds, 1)))
    control = rng.random((reps, seeds, prompts)) < special.expit(v + rng.normal(0, seed_sd, (reps, seeds, 1)))
    return arm.astype(float), control.astype(float)


def _true_difference(rng, share, beta, seed_sd, draws=1_000_000):
    v = np.where(rng.random(draws) < share, rng.normal(0, 1, draws), np.where(rng.random(draws) < 0.5, -7.0, 7.0))
    arm = special.expit(v + beta + rng.normal(0, seed_sd, draws))
    return float(np.mean(arm - special.expit(v + rng.normal(0, seed_sd, draws))))


def _union_coverage(arm, control, truth, paired):
    diff, se, df, _, _ = seed_prompt_se(arm, control, paired=paired)
    ok = np.isfinite(se) & (se > 0)
    half = special.stdtrit(df, 0.5 + LEVEL / 2) * se
    *cells, _ = effective_counts(arm, control, paired=paired, variance=se**2)
    b_low, b_high, _ = binary_interval_vectorised(*cells, LEVEL)
    low, high = np.minimum(diff - half, b_low), np.maximum(diff + half, b_high)
    union = float(np.mean(((low <= truth) & (truth <= high))[ok]))
    t = float(np.mean(((diff - half <= truth) & (truth <= diff + half))[ok]))
    return union, t, int(ok.sum())


@pytest.mark.parametrize("paired", [True, False])
def test_several_seeds_coverage_on_hierarchical_binary_data(paired):
    """2-3 seeds, 30-40 prompts, 2-7 discordant prompts on average (10-20% of prompts not solved
    or failed by both arms)."""
    rng = np.random.default_rng(7)
    reps = 3_000
    for prompts in (30, 40):
        for seeds in (2, 3):
            for share, beta in ((0.1, 0.0), (0.1, 1.5), (0.2, 1.0)):
                truth = _true_difference(rng, share, beta, 0.5)
                arm, control = _hierarchical(rng, reps, seeds, prompts, share, beta, 0.5)
                union, t, n_ok = _union_coverage(arm, control, truth, paired)
                assert union >= LEVEL - _tolerance(n_ok), (prompts, seeds, share, beta, union)
                assert union >= t


def test_a_rare_kind_of_prompt_is_covered_at_least_as_often_as_by_t():
    """Known limit: when the effect sits on a rare kind of prompt (15% of prompts, a large effect)
    and 5 seeds pool many cells, a sample with few such prompts under-states the difference; the
    union then covers about 92%, the t interval about 91% (measured at R = 3,000)."""
    rng = np.random.default_rng(9)
    truth = _true_difference(rng, 0.15, 3.0, 0.5)
    arm, control = _hierarchical(rng, 3_000, 5, 30, 0.15, 3.0, 0.5)
    union, t, _ = _union_coverage(arm, control, truth, True)
    assert union >= t and union > 0.9
