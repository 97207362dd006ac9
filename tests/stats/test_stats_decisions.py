"""Calibration of the verdicts: better / worse / equivalent error rates, interval coverage, the
planned power, and the seed-sd intervals, by simulation.

Every rate p estimated from R independent replicates has Monte Carlo standard error
SE = sqrt(p (1 - p) / R), stated next to each R; an error rate passes at <= alpha + 3 SE, a
coverage or power at 3 SE from its target. Every generator has a fixed seed. The simulations run
the production cores on whole arrays of replicates (leading axes): ``welch_test`` for trial
means, ``seed_prompt_se`` for seed x prompt tables, the verdict's interval at
``interval_level(alpha, m)`` and ``label_of`` on it, exactly as ``decide`` does.

Hierarchical data are seed x prompt tables from the crossed model of ``crossed``:
``y[a, s, p] = mu[a] + u[a, s] + v[p] + w[a, p] + e[a, s, p]`` (seed, prompt, arm x prompt,
residual), with continuous scores, or 0/1 scores thresholding that latent (pass / fail on a
prompt). Arm 0 is the control; with 6 arms all share it (and the prompts).

Numbers are printed (``pytest -s``) so notes can quote them.
"""

import math

import numpy as np
import pytest
from scipy import special

from harness.stats import (
    PlanVariance,
    bonett_std_interval,
    chi_square_std_interval,
    decision_probability,
    interval_level,
    label_of,
    seed_prompt_se,
    seeds_to_decide,
    welch_test,
)

ALPHA = 0.05


def se(p: float, reps: int) -> float:
    return math.sqrt(p * (1 - p) / reps)


def interval(diff, s, df, level):
    half = special.stdtrit(df, 0.5 + level / 2.0) * s
    return diff - half, diff + half


def labels(diff, s, df, level, margin=None):
    return label_of(*interval(diff, s, df, level), margin=margin)[0]


# ---------------------------------------------------------------- data


def draw(dist: str, rng: np.random.Generator, shape) -> np.ndarray:
    """Per-seed scores (trial means): mean 0 only for "normal"; the null compares like with like."""
    if dist == "normal":
        return rng.normal(0.0, 1.0, shape)
    if dist == "lognormal":  # strongly right-skewed
        return rng.lognormal(0.0, 1.0, shape)
    if dist == "bimodal":  # a run either "takes off" (30%) or not
        return np.where(rng.random(shape) < 0.3, rng.normal(5.0, 1.0, shape), rng.normal(0.0, 1.0, shape))
    raise AssertionError(dist)


#: sds of the crossed model: continuous scores, and the latent behind the 0/1 scores
CONTINUOUS = dict(seed=0.3, prompt=0.5, arm_x_prompt=0.25, residual=1.0, threshold=None)
BINARY = dict(seed=0.3, prompt=1.0, arm_x_prompt=0.3, residual=0.7, threshold=0.5)
P_CONTINUOUS, P_BINARY = 32, 64


def latent_sd(c) -> float:
    return math.sqrt(c["seed"] ** 2 + c["prompt"] ** 2 + c["arm_x_prompt"] ** 2 + c["residual"] ** 2)


def expected_score(c, mu):
    """Mean score of an arm with latent mean mu over seeds and prompts (the estimand)."""
    mu = np.asarray(mu, dtype=float)
    if c["threshold"] is None:
        return mu
    return special.ndtr((mu - c["threshold"]) / latent_sd(c))


def latent_shift(c, diff: float) -> float:
    """The latent mean an arm needs for its expected score to exceed the control's (mu 0) by diff."""
    if c["threshold"] is None:
        return diff
    tau = latent_sd(c)
    return c["threshold"] + tau * float(special.ndtri(float(special.ndtr(-c["threshold"] / tau)) + diff))


def tables(c, rng, R, n, P, mu, *, paired_rho=0.0):
    """``[R, arms + 1, n, P]`` score tables, arm 0 the control, latent means ``mu`` per arm.
    ``paired_rho``: correlation of the seed effects of arm and control on the same seed."""
    mu = np.asarray(mu, dtype=float)
    k = mu.size
    u = rng.normal(0, c["seed"], (R, k, n, 1))
    if paired_rho:  # the arms' seed effects correlate with the control's on the same seed
        u[:, 1:] = math.sqrt(paired_rho) * u[:, :1] + math.sqrt(1 - paired_rho) * u[:, 1:]
    y = rng.normal(0, c["residual"], (R, k, n, P))
    y += u
    y += rng.normal(0, c["prompt"], (R, 1, 1, P))
    y += rng.normal(0, c["arm_x_prompt"], (R, k, 1, P))
    y += mu[None, :, None, None]
    if c["threshold"] is not None:
        y = (y > c["threshold"]).astype(float)
    return y


def true_plan(c, P: int) -> PlanVariance:
    """The variance model of an unpaired arm-vs-control difference at the TRUE components
    (continuous scores: the crossed model's own sds)."""
    assert c["threshold"] is None
    return PlanVariance(
        seed=2 * c["seed"] ** 2,
        prompt=2 * c["arm_x_prompt"] ** 2,
        residual=2 * c["residual"] ** 2,
        sampling=0.0,
        n_prompts=P,
        samples=1,
        paired=False,
    )


def seed_prompt_runs(c, rng, R, n, P, mu, *, chunk=2000, paired=False, paired_rho=0.0):
    """``(diff, se, df, se_trial_means)`` of every arm against the control, ``[R, arms]`` each,
    simulated ``chunk`` replicates at a time (memory)."""
    out = []
    for start in range(0, R, chunk):
        y = tables(c, rng, min(chunk, R - start), n, P, mu, paired_rho=paired_rho)
        if paired:
            d, s, df, st, _ = seed_prompt_se(y[:, 1:], np.broadcast_to(y[:, :1], y[:, 1:].shape), paired=True)
        else:
            d, s, df, st, _ = seed_prompt_se(y[:, 1:], y[:, :1], paired=False)
        trial = welch_test(y[:, 1:].mean(-1), y[:, :1].mean(-1))  # the trial-means df beside it
        out.append((d, s, df, st, trial.df))
    return [np.concatenate(parts) for parts in zip(*out)]


# ---------------------------------------------------------------- better / worse at a true 0

R_TM = 20_000  # trial means, SE at 0.05: 0.0015


@pytest.mark.parametrize("arms", [1, 6])
@pytest.mark.parametrize("n", [3, 5, 10])
@pytest.mark.parametrize("dist", ["normal", "lognormal", "bimodal"])
def test_family_wise_better_or_worse_rate_at_zero_trial_means(dist, n, arms):
    rng = np.random.default_rng(1000 + 10 * n + arms + len(dist))
    level = interval_level(ALPHA, arms)
    control = draw(dist, rng, (R_TM, 1, n))
    t = welch_test(draw(dist, rng, (R_TM, arms, n)), control, alpha=1 - level)
    lab, _ = label_of(t.ci_low, t.ci_high, margin=None)
    fwer = np.isin(lab, ("better", "worse")).any(axis=1).mean()
    print(f"trial means {dist} n={n} arms={arms}: family-wise better/worse rate {fwer:.4f} (SE {se(ALPHA, R_TM):.4f})")
    assert fwer <= ALPHA + 3 * se(ALPHA, R_TM), fwer


R_SP1, R_SP6 = 10_000, 5_000  # seed x prompt; SE at 0.05: 0.0022 and 0.0031


@pytest.mark.parametrize("arms", [1, 6])
@pytest.mark.parametrize("n", [3, 5, 10])
@pytest.mark.parametrize("kind", ["continuous", "binary"])
def test_family_wise_better_or_worse_rate_at_zero_seed_prompt(kind, n, arms):
    c, P = (CONTINUOUS, P_CONTINUOUS) if kind == "continuous" else (BINARY, P_BINARY)
    R = R_SP1 if arms == 1 else R_SP6
    rng = np.random.default_rng(2000 + 10 * n + arms + len(kind))
    d, s, df, _, _ = seed_prompt_runs(c, rng, R, n, P, np.zeros(arms + 1))
    fwer = np.isin(labels(d, s, df, interval_level(ALPHA, arms)), ("better", "worse")).any(axis=1).mean()
    print(
        f"seed x prompt {kind} P={P} n={n} arms={arms}: family-wise better/worse rate {fwer:.4f} "
        f"(SE {se(ALPHA, R):.4f})"
    )
    assert fwer <= ALPHA + 3 * se(ALPHA, R), fwer


# ---------------------------------------------------------------- equivalent at a true min_effect
# The margin is set so that the design can conclude equivalence at a true 0 about half the time:
# (the verdict's t quantile + 1) standard errors of the difference (from a pilot run). At a true
# difference of exactly +-margin "equivalent" is then wrong, and must be rare: the interval's
# upper end falls below the margin with probability alpha / (2 m) per arm.


def equivalence_margin(sd: float, df: float, level: float) -> float:
    return (float(special.stdtrit(df, 0.5 + level / 2)) + 1.0) * sd


@pytest.mark.parametrize("arms", [1, 6])
@pytest.mark.parametrize("n", [5, 10])
def test_equivalent_rate_at_a_true_difference_of_min_effect_trial_means(n, arms):
    # every arm's true difference is exactly +-min_effect (signs alternate over the arms)
    rng = np.random.default_rng(3000 + n + arms)
    level = interval_level(ALPHA, arms)
    margin = equivalence_margin(math.sqrt(2 / n), 2 * (n - 1), level)
    true = margin * np.where(np.arange(arms) % 2 == 0, 1.0, -1.0)
    arm, control = rng.normal(size=(R_TM, arms, n)), rng.normal(size=(R_TM, 1, n))
    t = welch_test(arm + true[:, None], control, alpha=1 - level)
    lab, _ = label_of(t.ci_low, t.ci_high, margin=margin)
    rate = (lab == "equivalent").any(axis=1).mean()
    t0 = welch_test(arm, control, alpha=1 - level)
    at_zero = (label_of(t0.ci_low, t0.ci_high, margin=margin)[0] == "equivalent").mean()
    print(
        f"trial means normal n={n} arms={arms} margin={margin:.3f}: family-wise equivalent at |true diff| = "
        f"min_effect {rate:.4f} (SE {se(ALPHA, R_TM):.4f}); equivalent at a true 0: {at_zero:.3f}"
    )
    assert at_zero > 0.2  # the margin is one this design can conclude equivalence within
    assert rate <= ALPHA + 3 * se(ALPHA, R_TM), rate


@pytest.mark.parametrize("arms", [1, 6])
@pytest.mark.parametrize("n", [5, 10])
@pytest.mark.parametrize("kind", ["continuous", "binary"])
def test_equivalent_rate_at_a_true_difference_of_min_effect_seed_prompt(kind, n, arms):
    c, P = (CONTINUOUS, P_CONTINUOUS) if kind == "continuous" else (BINARY, P_BINARY)
    R = R_SP1 if arms == 1 else R_SP6
    level = interval_level(ALPHA, arms)
    d0, _, df0, _, _ = seed_prompt_runs(c, np.random.default_rng(99), 2000, n, P, np.zeros(2))  # pilot
    margin = equivalence_margin(float(d0.std()), float(np.median(df0)), level)
    if kind == "binary":
        margin = min(margin, 0.3)  # (stays a difference of pass rates the latent shift can produce)
    rng = np.random.default_rng(4000 + n + arms + len(kind))
    signs = np.where(np.arange(arms) % 2 == 0, 1.0, -1.0)
    mu = np.r_[0.0, [latent_shift(c, margin * sg) for sg in signs]]
    true = expected_score(c, mu[1:]) - expected_score(c, 0.0)
    np.testing.assert_allclose(np.abs(true), margin, rtol=1e-10)
    d, s, df, _, _ = seed_prompt_runs(c, rng, R, n, P, mu)
    lab = labels(d, s, df, level, margin=margin)
    rate = (lab == "equivalent").any(axis=1).mean()
    # the same estimates moved to a true 0 (se and df do not depend on the location)
    at_zero = (labels(d - true, s, df, level, margin=margin) == "equivalent").mean()
    print(
        f"seed x prompt {kind} n={n} arms={arms} margin={margin:.3f}: family-wise equivalent at |true diff| = "
        f"min_effect {rate:.4f} (SE {se(ALPHA, R):.4f}); equivalent at a true 0: {at_zero:.3f}"
    )
    assert at_zero > 0.2
    assert rate <= ALPHA + 3 * se(ALPHA, R), rate


# ---------------------------------------------------------------- coverage

R_COV = 10_000  # SE at 0.95: 0.0022


@pytest.mark.parametrize("n", [3, 5, 10])
def test_simultaneous_coverage_of_six_seed_prompt_intervals(n):
    # six arms with different true effects against one control: all six Bonferroni intervals
    # cover at once with probability >= 1 - alpha (the guarantee; Bonferroni is conservative)
    rng = np.random.default_rng(5000 + n)
    mu = np.r_[0.0, np.linspace(-0.3, 0.6, 6)]
    d, s, df, _, _ = seed_prompt_runs(CONTINUOUS, rng, R_SP6, n, P_CONTINUOUS, mu)
    lo, hi = interval(d, s, df, interval_level(ALPHA, 6))
    true = mu[1:]
    cov = ((lo <= true) & (true <= hi)).all(axis=1).mean()
    print(f"simultaneous coverage, 6 arms, n={n}: {cov:.4f} (nominal >= 0.95, SE {se(0.95, R_SP6):.4f})")
    # (above 0.95 by design: Bonferroni, a shared control, and the conservative estimated df at
    # 3 seeds; the single interval's coverage is checked to 3 SE below)
    assert cov >= 0.95 - 3 * se(0.95, R_SP6), cov


def test_simultaneous_coverage_of_six_intervals_on_binary_scores():
    rng = np.random.default_rng(5100)
    mu = np.r_[0.0, np.linspace(-0.2, 0.4, 6)]
    d, s, df, _, _ = seed_prompt_runs(BINARY, rng, R_SP6, 5, P_BINARY, mu)
    lo, hi = interval(d, s, df, interval_level(ALPHA, 6))
    true = expected_score(BINARY, mu[1:]) - expected_score(BINARY, 0.0)
    cov = ((lo <= true) & (true <= hi)).all(axis=1).mean()
    print(f"simultaneous coverage, 6 arms, binary P={P_BINARY}, n=5: {cov:.4f} (SE {se(0.95, R_SP6):.4f})")
    assert cov >= 0.95 - 3 * se(0.95, R_SP6), cov


#: a large arm x prompt component: with 64 prompts its 2 sd_w^2 / P is 35% of the variance of the
#: difference at 3 seeds, 64% at 10
LARGE_W = dict(seed=0.2, prompt=0.5, arm_x_prompt=0.8, residual=1.0, threshold=None)


@pytest.mark.parametrize("n, paired", [(3, False), (5, False), (10, False), (5, True)])
def test_seed_prompt_interval_covers_where_the_trial_means_interval_does_not(n, paired):
    rng = np.random.default_rng(6000 + n + paired)
    true = 0.2
    d, s, df, st, df_trial = seed_prompt_runs(
        LARGE_W, rng, R_COV, n, 64, [0.0, true], paired=paired, paired_rho=0.7 if paired else 0.0
    )
    lo, hi = interval(d, s, df, 0.95)
    cov = ((lo <= true) & (true <= hi)).mean()
    if paired:  # the paired t on trial means: df n - 1
        df_trial = np.full_like(df, n - 1.0)
    lo_t, hi_t = interval(d, st, df_trial, 0.95)
    cov_t = ((lo_t <= true) & (true <= hi_t)).mean()
    print(
        f"n={n} {'paired' if paired else 'unpaired'}, P=64, sd_w={LARGE_W['arm_x_prompt']}: "
        f"trial-means coverage {cov_t:.4f} vs seed_prompt {cov:.4f} (nominal 0.95, SE {se(0.95, R_COV):.4f})"
    )
    assert abs(cov - 0.95) <= 3 * se(0.95, R_COV), cov
    assert cov_t < 0.95 - 3 * se(0.95, R_COV), cov_t


# ---------------------------------------------------------------- planted effect: planned power

R_PLAN = 10_000  # SE at 0.8: 0.0040


@pytest.mark.parametrize(
    "arms, min_effect, P", [(1, 0.3, 32), (6, 0.4, 32), (1, 0.25, 64), (1, 0.7, 32), (6, 0.9, 32), (1, 0.9, 32)]
)
def test_planted_min_effect_is_decided_with_the_planned_power(arms, min_effect, P):
    # n from seeds_to_decide at the TRUE components and the verdict's level; every arm carries a
    # true difference of min_effect; the decision rate (better, equivalent or worse) of each arm
    # must reach 0.8 within MC error.
    level = interval_level(ALPHA, arms)
    plan = true_plan(CONTINUOUS, P)
    n = seeds_to_decide(min_effect, plan, level=level, margin=min_effect)
    planned = decision_probability(min_effect, plan, n, level=level, margin=min_effect)
    R = R_PLAN if arms == 1 else R_SP6
    rng = np.random.default_rng(7000 + arms + P)
    d, s, df, _, _ = seed_prompt_runs(CONTINUOUS, rng, R, n, P, np.r_[0.0, np.full(arms, min_effect)], chunk=1000)
    rate = (labels(d, s, df, level, margin=min_effect) != "inconclusive").mean(axis=0)
    print(
        f"planted min_effect={min_effect} arms={arms} P={P}: n={n} seeds per arm, planned "
        f"{planned:.4f}, decision rate per arm {np.round(rate, 4).tolist()} (SE {se(0.8, R):.4f})"
    )
    assert planned >= 0.8
    assert rate.min() >= 0.8 - 3 * se(0.8, R), rate
    # and the plan is not wastefully conservative: one seed fewer is planned below 0.8
    assert decision_probability(min_effect, plan, n - 1, level=level, margin=min_effect) < 0.8


# ---------------------------------------------------------------- the seed-sd intervals

R_SD = 40_000  # SE at 0.95: 0.0011

SD_DISTS = {  # (draw, true sd)
    "normal": (lambda rng, shape: rng.normal(0.0, 1.0, shape), 1.0),
    "lognormal": (lambda rng, shape: rng.lognormal(0.0, 1.0, shape), math.sqrt((math.e - 1) * math.e)),
    "t3": (lambda rng, shape: rng.standard_t(3, shape), math.sqrt(3.0)),
    "bimodal": (
        lambda rng, shape: np.where(rng.random(shape) < 0.3, rng.normal(5.0, 1.0, shape), rng.normal(0.0, 1.0, shape)),
        math.sqrt(1 + 0.3 * 0.7 * 25),
    ),
}


def sd_coverages(dist: str, n: int) -> tuple[float, float]:
    sample, sigma = SD_DISTS[dist]
    x = sample(np.random.default_rng(8000 + n + len(dist)), (R_SD, n))
    lo, hi = bonett_std_interval(x)
    bonett = float(((lo <= sigma) & (sigma <= hi)).mean())
    lo, hi = chi_square_std_interval(x.std(axis=1, ddof=1), n)
    chi2 = float(((lo <= sigma) & (sigma <= hi)).mean())
    print(
        f"sd interval coverage {dist} n={n}: Bonett {bonett:.4f}, chi-square {chi2:.4f} "
        f"(nominal 0.95, SE {se(0.95, R_SD):.4f})"
    )
    return bonett, chi2


@pytest.mark.parametrize("n", [5, 10, 20])
def test_bonett_on_normal_scores_is_never_far_below_nominal(n):
    bonett, chi2 = sd_coverages("normal", n)
    assert abs(chi2 - 0.95) <= 3 * se(0.95, R_SD)  # the chi-square interval is exact here
    # not at the nominal level on normal scores (observed 99.3% at 5 seeds, where the kurtosis is
    # taken about the median; 96.0% at 10; 94.4% at 20, approaching 95% only slowly): conservative
    # at few seeds, at most a point below nominal from 20 on
    assert 0.94 <= bonett <= 0.995, bonett


@pytest.mark.parametrize("n", [5, 10, 20])
@pytest.mark.parametrize("dist", ["lognormal", "t3", "bimodal"])
def test_bonett_is_closer_to_nominal_than_chi_square_on_non_normal_scores(dist, n):
    bonett, chi2 = sd_coverages(dist, n)
    assert abs(bonett - 0.95) < abs(chi2 - 0.95), (bonett, chi2)
