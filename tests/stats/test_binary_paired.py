"""0/1 scores on the same prompts: McNemar's exact test, Newcombe's interval, and the verdict's union."""

import numpy as np
import pytest
from scipy import special
from statsmodels.stats.contingency_tables import mcnemar

from harness import stats
from harness.stats.binary_paired import newcombe_p, union_interval

Z95 = float(special.ndtri(0.975))


def _newcombe_11(a, b, c, d, z):
    """Newcombe (1998) method 11 written out from the paper, scalar, for the check."""
    n = a + b + c + d

    def wilson_cc(x):
        p = x / n
        lo = (2 * n * p + z * z - 1 - z * np.sqrt(z * z - 2 - 1 / n + 4 * p * (n * (1 - p) + 1))) / (2 * (n + z * z))
        hi = (2 * n * p + z * z + 1 + z * np.sqrt(z * z + 2 - 1 / n + 4 * p * (n * (1 - p) - 1))) / (2 * (n + z * z))
        return (0.0 if p == 0 else lo), (1.0 if p == 1 else hi)

    p1, p2 = (a + b) / n, (a + c) / n
    (l1, u1), (l2, u2) = wilson_cc(a + b), wilson_cc(a + c)
    num = a * d - b * c
    num = max(num - n / 2, 0) if num > 0 else num
    denom = (a + b) * (c + d) * (a + c) * (b + d)
    phi = num / np.sqrt(denom) if denom else 0.0
    low = p1 - p2 - np.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    high = p1 - p2 + np.sqrt((p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2)
    return low, high


@pytest.mark.parametrize("b,c", [(0, 0), (1, 0), (2, 0), (4, 0), (5, 0), (6, 0), (5, 1), (3, 7), (12, 2), (40, 25)])
def test_mcnemar_exact_matches_statsmodels(b, c):
    want = 1.0 if b + c == 0 else mcnemar([[10, b], [c, 15]], exact=True).pvalue
    assert stats.mcnemar_exact_p(b, c) == pytest.approx(want, rel=1e-9)


def test_newcombe_interval_matches_the_paper_and_the_formula():
    # Newcombe 1998 (Stat Med 17:2635), Table II example (a) 36/12/2/0: method 11 0.0407 to 0.3522
    low, high = stats.newcombe_interval(36, 12, 2, 0, Z95)
    assert (round(float(low), 4), round(float(high), 4)) == (0.0407, 0.3522)
    for table in [(10, 4, 0, 16), (0, 1, 0, 29), (3, 5, 1, 21), (20, 0, 0, 10), (5, 7, 3, 25)]:
        assert stats.newcombe_interval(*table, Z95) == pytest.approx(_newcombe_11(*table, Z95))


@pytest.mark.parametrize(
    "flips,exact_p", [(2, 0.5), (4, 0.125), (5, 0.0625), (6, 0.03125)]
)  # AIME size: 30 prompts, flips all one way
def test_aime_sized_flips_keep_the_exact_level(flips, exact_p):
    arm = np.zeros(30)
    arm[:flips] = 1.0
    control = np.zeros(30)
    counts = stats.PairedCounts(0, flips, 0, 30 - flips)
    assert counts.p_value() >= exact_p - 1e-12
    low, high = counts.interval(0.95)
    assert (low > 0) == (exact_p < 0.05)  # 4 or 5 flips: not "better" (the t test says p 0.043 / 0.023)
    t = stats.paired_test(arm, control)
    t_half = float(special.stdtrit(29, 0.975)) * float(np.std(arm - control, ddof=1) / np.sqrt(30))
    assert high - low > 2 * t_half  # wider than the t interval on the same prompts
    if flips in (4, 5):
        assert t.p_value < 0.05 and counts.p_value() > 0.05


def test_sat_math_one_change_is_far_wider_than_t():
    counts = stats.PairedCounts(20, 1, 0, 9)
    low, high = counts.interval(0.95)
    assert low < 0 < high and counts.p_value() == 1.0
    t_half = float(special.stdtrit(29, 0.975)) * np.sqrt(1 / 30 * (1 - 1 / 30) / 29)
    assert high - low > 1.5 * 2 * t_half and low < -t_half  # and it does not sit on the observed flip


@pytest.mark.slow
def test_p_value_and_interval_agree():
    rng = np.random.default_rng(3)
    for _ in range(200):
        a, b, c = rng.integers(0, 8, 3)
        counts = stats.PairedCounts(float(a), float(b), float(c), float(30 - a - b - c))
        for level in (0.9, 0.95, 0.99):
            low, high = counts.interval(level)
            assert (low > 0 or high < 0) == (counts.p_value() < 1 - level - 1e-9) or abs(
                counts.p_value() - (1 - level)
            ) < 1e-6
    assert newcombe_p(0, 0, 0, 30) == 1.0


def test_union_never_narrows_the_t_interval():
    counts = stats.PairedCounts(10, 4, 0, 16)
    lo, hi, p = union_interval(-0.01, 0.5, 0.2, counts, 0.95)
    b_lo, b_hi = counts.interval(0.95)
    assert lo == min(-0.01, b_lo) and hi == max(0.5, b_hi) and p == max(0.2, counts.p_value())
    assert union_interval(0.1, 0.2, 0.01, None, 0.95) == (0.1, 0.2, 0.01)


def test_seed_prompt_binary_difference_and_its_verdict():
    rng = np.random.default_rng(0)
    control = (rng.random((3, 30)) < 0.4).astype(float)
    arm = control.copy()
    arm[:, :4] = 1.0  # four prompts flip for every seed
    control[:, :4] = 0.0
    d = stats.seed_prompt_difference(arm, control, paired=True, binary=True)
    t = stats.seed_prompt_difference(arm, control, paired=True)
    assert d.test == "seed_prompt_binary" and d.binary is not None and d.diff == pytest.approx(4 / 30)
    assert d.binary.design_effect >= 1 and d.binary.diff == pytest.approx(d.diff)
    (vb,), (vt,) = stats.decide([d]), stats.decide([t])
    assert vt.label == "better" and vb.label == "inconclusive"  # 4 prompts of 30, exact p 0.125
    assert vb.test == "seed_prompt_binary" and vb.ci_low <= vt.ci_low and vb.ci_high >= vt.ci_high
    assert d.to_dict()["binary"]["arm_only"] == pytest.approx(d.binary.arm_only)


def test_is_binary():
    assert stats.is_binary(np.array([[0, 1], [1, 1]]), np.zeros((2, 2)))
    assert not stats.is_binary(np.array([[0, 0.5]]))
    assert not stats.is_binary(np.zeros((0, 2)))
