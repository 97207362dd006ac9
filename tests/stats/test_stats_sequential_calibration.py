"""Calibration of sequential verdicts: error rates under optional stopping, and power, by simulation.

A sequential design looks at 3, 5, 8, 12 and 20 seeds per arm. At each look every undecided arm
gets the repeated confidence interval of its look (``Look``: the t interval with the tail of the
Lan-DeMets bound at alpha / m), read by ``label_of`` exactly as ``decide`` reads it; an arm whose
interval is decided stops there with that verdict, the others (and the control) go on. Each rate
p from R replicates has Monte Carlo SE sqrt(p (1 - p) / R), stated by each R; an error rate
passes at <= alpha + 3 SE, a power within 0.05 + 3 SE of the design's.

Scores are per-seed trial means (normal, heavy-tailed t with 3 df, right-skewed lognormal) or
seed x prompt tables of the crossed model (``y = mu + u_seed + v_prompt + w_arm_prompt + e``),
analysed by ``seed_prompt_se`` on the first n seeds of each table.
"""

import math

import numpy as np
import pytest
from scipy import special

from harness.stats import label_of, seed_prompt_se, welch_test
from harness.stats.sequential import Look, look_odds

ALPHA = 0.05
LOOKS = (3, 5, 8, 12, 20)


def se(p: float, reps: int) -> float:
    return math.sqrt(p * (1 - p) / reps)


def looks_of(spending: str) -> list[Look]:
    return [Look(LOOKS[: k + 1], LOOKS[-1], spending) for k in range(len(LOOKS))]


def sequential_labels(analyse, arms: int, spending: str, margin=None):
    """Labels ``[R, arms]`` of a sequential study and the look each arm stopped at (-1: never).
    ``analyse(n)`` gives ``(diff, se, df)`` arrays ``[R, arms]`` on the first n seeds."""
    label, stop = None, None
    for k, look in enumerate(looks_of(spending)):
        diff, s, df = analyse(look.seeds[-1])
        z = look.bound(ALPHA / arms)
        half = special.stdtrit(df, special.ndtr(z)) * s
        now, _ = label_of(diff - half, diff + half, margin=margin)
        if label is None:
            label, stop = np.full(now.shape, "inconclusive", dtype=now.dtype), np.full(now.shape, -1)
        fresh = (stop < 0) & (now != "inconclusive")
        label = np.where(fresh, now, label)
        stop = np.where(fresh, k, stop)
    return label, stop


def draw(dist: str, rng, shape) -> np.ndarray:
    if dist == "normal":
        return rng.normal(0.0, 1.0, shape)
    if dist == "t3":  # heavy tails: a few seeds far out
        return rng.standard_t(3, shape)
    if dist == "lognormal":
        return rng.lognormal(0.0, 1.0, shape)
    raise AssertionError(dist)


def trial_means(rng, dist: str, R: int, arms: int, shift=0.0):
    control = draw(dist, rng, (R, 1, LOOKS[-1]))
    arm = draw(dist, rng, (R, arms, LOOKS[-1])) + shift

    def analyse(n):
        t = welch_test(arm[..., :n], control[..., :n])
        return t.diff, t.se, t.df

    return analyse


CROSSED = {"seed": 0.3, "prompt": 0.5, "arm_x_prompt": 0.25, "residual": 1.0}
P = 32


def crossed_tables(rng, R: int, arms: int):
    c = CROSSED
    k = arms + 1
    y = rng.normal(0, c["residual"], (R, k, LOOKS[-1], P))
    y += rng.normal(0, c["seed"], (R, k, LOOKS[-1], 1))
    y += rng.normal(0, c["prompt"], (R, 1, 1, P))
    y += rng.normal(0, c["arm_x_prompt"], (R, k, 1, P))

    def analyse(n):
        d, s, df, _, _ = seed_prompt_se(y[:, 1:, :n], y[:, :1, :n], paired=False)
        return d, s, df

    return analyse


R_TM = 20_000  # SE at 0.05: 0.0015


@pytest.mark.parametrize("spending", ["obrien_fleming", "pocock"])
@pytest.mark.parametrize("arms", [1, 6])
@pytest.mark.parametrize("dist", ["normal", "t3", "lognormal"])
def test_family_wise_rate_at_zero_with_optional_stopping(dist, arms, spending):
    rng = np.random.default_rng(500 + arms + len(dist) + len(spending))
    label, _ = sequential_labels(trial_means(rng, dist, R_TM, arms), arms, spending)
    fwer = np.isin(label, ("better", "worse")).any(axis=1).mean()
    print(f"sequential {spending} {dist} arms={arms}: family-wise better/worse {fwer:.4f} (SE {se(ALPHA, R_TM):.4f})")
    assert fwer <= ALPHA + 3 * se(ALPHA, R_TM), fwer


def test_naive_peeking_is_what_the_boundaries_prevent():
    # the same looks read with the fixed-sample 95% interval: the rate the design exists to avoid
    rng = np.random.default_rng(11)
    analyse = trial_means(rng, "normal", R_TM, 1)
    crossed = np.zeros((R_TM, 1), dtype=bool)
    for n in LOOKS:
        diff, s, df = analyse(n)
        crossed |= np.abs(diff / s) > special.stdtrit(df, 1 - ALPHA / 2)
    print(f"fixed 95% intervals read at every look: false-positive rate {crossed.mean():.4f}")
    assert crossed.mean() > ALPHA + 5 * se(ALPHA, R_TM)


R_SP = 4_000  # SE at 0.05: 0.0034


@pytest.mark.parametrize("arms", [1, pytest.param(6, marks=pytest.mark.slow)])
def test_family_wise_rate_at_zero_on_seed_prompt_tables(arms):
    rng = np.random.default_rng(900 + arms)
    label, _ = sequential_labels(crossed_tables(rng, R_SP, arms), arms, "obrien_fleming")
    fwer = np.isin(label, ("better", "worse")).any(axis=1).mean()
    print(f"sequential seed x prompt arms={arms}: family-wise better/worse {fwer:.4f} (SE {se(ALPHA, R_SP):.4f})")
    assert fwer <= ALPHA + 3 * se(ALPHA, R_SP), fwer


@pytest.mark.parametrize("spending", ["obrien_fleming", "pocock"])
@pytest.mark.parametrize("arms", [1, pytest.param(6, marks=pytest.mark.slow)])
def test_equivalent_is_rare_at_a_true_difference_of_min_effect(arms, spending):
    # the margin lets a true 0 be declared equivalent often by the last look; at a true
    # difference of exactly the margin, "equivalent" is wrong
    margin = 1.2
    rng = np.random.default_rng(700 + arms + len(spending))
    label, _ = sequential_labels(trial_means(rng, "normal", R_TM, arms, shift=margin), arms, spending, margin)
    wrong = (label == "equivalent").any(axis=1).mean()
    rng = np.random.default_rng(701 + arms)
    at_zero, _ = sequential_labels(trial_means(rng, "normal", R_TM, arms), arms, spending, margin)
    print(
        f"sequential {spending} arms={arms}: equivalent at +margin {wrong:.4f}, at 0 "
        f"{(at_zero == 'equivalent').mean():.3f}"
    )
    assert (at_zero == "equivalent").mean() > 0.3  # the margin is reachable, so the check can fail
    assert wrong <= ALPHA + 3 * se(ALPHA, R_TM), wrong


@pytest.mark.parametrize("spending", ["obrien_fleming", "pocock"])
def test_power_at_a_planted_effect_is_the_designs(spending):
    effect = 0.9
    rng = np.random.default_rng(42 + len(spending))
    label, stop = sequential_labels(trial_means(rng, "normal", R_TM, 1, shift=effect), 1, spending)
    power = (label == "better").mean()
    looks = looks_of(spending)
    bounds = [look.bound(ALPHA) for look in looks]
    design = look_odds(bounds, [2.0 / n for n in LOOKS], effect).above.sum()
    seeds = np.where(stop >= 0, np.array(LOOKS)[stop], LOOKS[-1]).mean()
    print(f"sequential {spending}: power {power:.3f} vs design {design:.3f}; mean seeds per arm {seeds:.1f}")
    assert abs(power - design) <= 0.05 + 3 * se(design, R_TM), (power, design)
