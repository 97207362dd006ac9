"""compare(): hand-worked examples, agreement with scipy, degenerate inputs."""

import json
import math

import numpy as np
import pytest
from scipy import stats

from harness.stats import (
    Comparison,
    compare,
    hedges_g,
    mann_whitney_check,
    paired_test,
    permutation_check,
    prob_improvement,
    sign_flip_check,
    welch_test,
    yuen_test,
)


def test_three_vs_three_by_hand():
    c = compare([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    # both variances 1: se = sqrt(1/3 + 1/3) = 0.81650, t = -3 / se = -3.6742, df = 4
    assert c.diff == -3.0 and c.mean_arm == 2.0 and c.mean_control == 5.0
    assert c.se == pytest.approx(math.sqrt(2 / 3))
    assert c.df == pytest.approx(4.0)
    assert c.test == "welch_t"
    # t table: t_{0.975, 4} = 2.776445; half-width 2.776445 * 0.816497 = 2.266958
    assert c.ci_low == pytest.approx(-3 - 2.266958, abs=1e-6)
    assert c.ci_high == pytest.approx(-3 + 2.266958, abs=1e-6)
    assert c.p_value == pytest.approx(0.021312, abs=1e-6)
    # Hedges: pooled sd 1, d = -3, J = 1 - 3 / (4 * 6 - 9) = 0.8
    assert c.hedges_g == pytest.approx(-2.4)
    assert c.prob_improvement == 0.0
    # every arm value is below every control value: the most extreme of C(6,3) = 20 splits,
    # so the exact two-sided rank and permutation p-values are 2/20 = 0.1, and cannot be lower.
    for name in ("mann_whitney", "permutation"):
        chk = c.robustness[name]
        assert chk.p_value == pytest.approx(0.1)
        assert chk.min_attainable_p == pytest.approx(0.1)
        assert chk.can_reject is False
        assert chk.method == "exact"
    # 20% trimming cuts floor(0.6) = 0 values at n = 3: Yuen is Welch here
    assert c.robustness["yuen"].p_value == pytest.approx(c.p_value)
    assert c.robustness["yuen"].can_reject is True
    assert set(c.robustness) == {"mann_whitney", "yuen", "permutation"}
    assert c.reason == ""


def test_welch_agrees_with_scipy():
    rng = np.random.default_rng(1)
    for na, nb in [(3, 3), (4, 9), (10, 5)]:
        a, b = rng.normal(1.0, 2.0, na), rng.normal(0.0, 0.5, nb)
        ref = stats.ttest_ind(a, b, equal_var=False)
        ci = ref.confidence_interval(0.95)
        c = compare(a, b, n_permutations=200)
        assert c.p_value == pytest.approx(ref.pvalue, rel=1e-9)
        assert (c.ci_low, c.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-9)
        assert c.df == pytest.approx(ref.df, rel=1e-9)
        ci90 = ref.confidence_interval(0.90)
        c90 = compare(a, b, alpha=0.10, n_permutations=200)
        assert (c90.ci_low, c90.ci_high) == pytest.approx((ci90.low, ci90.high), rel=1e-9)


def test_paired_agrees_with_scipy_and_reports_extra_checks():
    rng = np.random.default_rng(2)
    base = rng.normal(0, 1, 6)
    a, b = base + rng.normal(0.5, 0.3, 6), base + rng.normal(0, 0.3, 6)
    ref = stats.ttest_rel(a, b)
    ci = ref.confidence_interval(0.95)
    c = compare(a, b, paired=True)
    assert c.test == "paired_t" and c.paired
    assert c.p_value == pytest.approx(ref.pvalue, rel=1e-9)
    assert (c.ci_low, c.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-9)
    assert c.std_diff == pytest.approx(np.std(a - b, ddof=1))
    assert c.pair_correlation == pytest.approx(stats.pearsonr(a, b).statistic)
    assert set(c.robustness) == {"mann_whitney", "yuen", "permutation", "paired_t", "sign_flip"}
    assert c.robustness["paired_t"].p_value == pytest.approx(c.p_value)
    # exact sign flip over 2^6 = 64 patterns: smallest attainable p = 2/64
    assert c.robustness["sign_flip"].min_attainable_p == pytest.approx(2 / 64)
    assert c.robustness["sign_flip"].can_reject is True
    # unpaired compare of the same data is less sensitive (the shared seed effect is noise to it)
    assert compare(a, b).p_value > c.p_value


def test_paired_requires_equal_lengths():
    with pytest.raises(ValueError, match="paired=True"):
        compare([1, 2, 3], [1, 2], paired=True)


def test_sign_flip_at_five_pairs_cannot_reject():
    c = compare([2, 3, 4, 5, 6], [1, 1.5, 2, 2.5, 3], paired=True)
    sf = c.robustness["sign_flip"]
    assert sf.min_attainable_p == pytest.approx(2 / 32) and sf.p_value == pytest.approx(2 / 32)
    assert sf.can_reject is False  # 0.0625 > 0.05: reported as unable, not as "no effect"


def test_yuen_hand_worked_example():
    a = [1.0, 2.0, 3.0, 4.0, 10.0]  # g = floor(0.2 * 5) = 1, h = 3; trimmed mean 3
    b = [0.0, 5.0, 6.0, 7.0, 100.0]  # trimmed mean 6
    # winsorized: [2,2,3,4,4] and [5,5,6,7,7], both with variance 1 (ddof=1);
    # d = (n-1) s_w^2 / (h (h-1)) = 4/6 each; t = -3 / sqrt(4/3) = -2.598076; df = (4/3)^2 / (2 (4/6)^2 / 2) = 4
    y = yuen_test(a, b)
    assert float(y.diff) == pytest.approx(-3.0)
    assert float(y.se) == pytest.approx(math.sqrt(4 / 3))
    assert float(y.t) == pytest.approx(-2.598076, abs=1e-6)
    assert float(y.df) == pytest.approx(4.0)
    assert float(y.p_value) == pytest.approx(2 * stats.t.sf(2.598076, 4), abs=1e-6)
    # scipy implements Yuen through ttest_ind(trim=...)
    assert float(y.p_value) == pytest.approx(stats.ttest_ind(a, b, equal_var=False, trim=0.2).pvalue, rel=1e-9)


def test_yuen_agrees_with_scipy_on_random_data():
    rng = np.random.default_rng(3)
    for na, nb in [(5, 5), (7, 11), (10, 10)]:
        a, b = rng.lognormal(0, 1, na), rng.lognormal(0.3, 1, nb)
        ref = stats.ttest_ind(a, b, equal_var=False, trim=0.2)
        assert float(yuen_test(a, b).p_value) == pytest.approx(ref.pvalue, rel=1e-9)


def _scipy_perm(a, b):
    res = stats.permutation_test(
        (a, b),
        lambda x, y, axis: np.mean(x, axis=axis) - np.mean(y, axis=axis),
        permutation_type="independent",
        vectorized=True,
        n_resamples=np.inf,
        alternative="two-sided",
    )
    return res.pvalue


def test_permutation_exact_agrees_with_scipy():
    rng = np.random.default_rng(4)
    for na, nb in [(3, 3), (4, 6), (7, 7)]:
        a, b = rng.normal(0.8, 1, na), rng.normal(0, 1, nb)
        chk = permutation_check(a, b)
        assert chk.method == "exact"
        assert chk.p_value == pytest.approx(_scipy_perm(a, b), rel=1e-9)
        assert chk.min_attainable_p == pytest.approx(min(1.0, 2 / math.comb(na + nb, na)))


def test_permutation_monte_carlo_is_close_to_exact_and_reproducible():
    rng = np.random.default_rng(5)
    a, b = rng.normal(0.9, 1, 8), rng.normal(0, 1, 8)  # C(16, 8) = 12870 splits
    exact = permutation_check(a, b, n_permutations=20_000)
    assert exact.method == "exact"
    mc = permutation_check(a, b, n_permutations=4000, rng=np.random.default_rng(0))
    assert mc.method == "monte_carlo"
    # two-sided p = 2 * tail; MC standard error of that is 2 * sqrt(q (1 - q) / B) with q = p / 2
    se = 2 * math.sqrt(exact.p_value / 2 * (1 - exact.p_value / 2) / 4000)
    assert abs(mc.p_value - exact.p_value) < 4 * se + 1 / 4000
    assert mc.min_attainable_p == pytest.approx(2 / 4001)
    again = permutation_check(a, b, n_permutations=4000, rng=np.random.default_rng(0))
    assert again.p_value == mc.p_value
    other = permutation_check(a, b, n_permutations=4000, rng=np.random.default_rng(1))
    assert other.p_value != mc.p_value


def test_sign_flip_exact_agrees_with_scipy():
    rng = np.random.default_rng(6)
    a, b = rng.normal(0.5, 1, 7), rng.normal(0, 1, 7)
    ref = stats.permutation_test(
        (a, b),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=np.inf,
        alternative="two-sided",
    )
    chk = sign_flip_check(a, b)
    assert chk.method == "exact"
    assert chk.p_value == pytest.approx(ref.pvalue, rel=1e-9)
    mc = sign_flip_check(a, b, n_permutations=64, rng=np.random.default_rng(0))  # 2^7 = 128 > 64
    assert mc.method == "monte_carlo"


def test_mann_whitney_agrees_with_scipy():
    rng = np.random.default_rng(7)
    a, b = rng.normal(1, 1, 5), rng.normal(0, 1, 6)  # no ties; C(11, 5) = 462 splits
    chk = mann_whitney_check(a, b)
    assert chk.method == "exact"
    assert chk.p_value == pytest.approx(stats.mannwhitneyu(a, b, method="exact").pvalue, rel=1e-9)
    a, b = rng.normal(1, 1, 12), rng.normal(0, 1, 10)  # C(22, 12) > 10_000 -> normal approximation
    chk = mann_whitney_check(a, b)
    assert chk.method == "asymptotic"
    assert chk.p_value == pytest.approx(stats.mannwhitneyu(a, b, method="asymptotic").pvalue, rel=1e-9)
    assert chk.can_reject is True


def test_mann_whitney_with_ties_at_three_seeds_stays_exact():
    # scipy's default falls back to the normal approximation when there are ties and reports
    # p = 0.047 here, which no test on 3 vs 3 seeds can honestly attain; the exact tie-aware
    # permutation distribution gives 2/20.
    a, b = [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]
    assert stats.mannwhitneyu(a, b).pvalue < 0.05
    chk = mann_whitney_check(a, b)
    assert chk.p_value == pytest.approx(0.1) and chk.can_reject is False


def test_vectorised_cores_match_scalar_calls():
    rng = np.random.default_rng(8)
    a, b = rng.normal(size=(50, 4)), rng.normal(size=(50, 6))
    w = welch_test(a, b)
    for i in (0, 17, 49):
        ref = stats.ttest_ind(a[i], b[i], equal_var=False)
        assert w.p_value[i] == pytest.approx(ref.pvalue, rel=1e-9)
    p = paired_test(a, b[:, :4])
    assert p.p_value[3] == pytest.approx(stats.ttest_rel(a[3], b[3, :4]).pvalue, rel=1e-9)


def test_effect_sizes_by_hand():
    assert prob_improvement([1, 2], [0, 1.5]) == pytest.approx(0.75)
    assert prob_improvement([1, 2], [1, 2]) == pytest.approx(0.5)  # ties count half
    a, b = [1.0, 2.0, 3.0, 4.0], [0.0, 2.0]
    # pooled var = (3 * 1.6667 + 1 * 2) / 4 = 1.75; d = 1.5 / sqrt(1.75); J = 1 - 3 / (4 * 6 - 9)
    assert hedges_g(a, b) == pytest.approx(1.5 / math.sqrt(1.75) * 0.8)
    assert math.isnan(hedges_g([1, 1], [1, 1]))


def test_one_seed_gives_nan_p_with_a_reason():
    c = compare([0.5], [0.2, 0.3, 0.4])
    assert math.isnan(c.p_value) and math.isnan(c.ci_low)
    assert "at least 2 seeds" in c.reason
    assert c.diff == pytest.approx(0.2)
    assert c.robustness["yuen"].can_reject is False
    d = c.to_dict()
    assert d["p_value"] is None and d["std_arm"] is None


def test_zero_variance_in_both_arms_gives_nan_p_with_a_reason():
    c = compare([1.0, 1.0, 1.0], [0.0, 0.0, 0.0])
    assert math.isnan(c.p_value)
    assert "zero variance" in c.reason
    c = compare([1.0, 1.0, 1.0], [0.0, 0.5, 0.0])  # one constant arm is fine for Welch
    assert math.isfinite(c.p_value) and c.reason == ""
    c = compare([1.0, 2.0, 3.0], [0.0, 1.0, 2.0], paired=True)  # all differences equal 1
    assert math.isnan(c.p_value) and "paired differences" in c.reason


@pytest.mark.parametrize("bad", [[], [1.0, math.nan], [[1.0, 2.0], [3.0, 4.0]]])
def test_bad_inputs_raise(bad):
    with pytest.raises(ValueError):
        compare(bad, [1.0, 2.0])


def test_to_dict_is_json_and_frozen():
    c = compare([0.1, 0.2, 0.4], [0.0, 0.1, 0.15], paired=True)
    d = c.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["robustness"]["sign_flip"]["can_reject"] is False
    assert isinstance(d["n_arm"], int) and isinstance(d["diff"], float)
    with pytest.raises(AttributeError):
        c.diff = 0.0  # frozen
    assert isinstance(c, Comparison)


def test_rng_accepts_seed_and_generator_only():
    a, b = np.arange(10.0), np.arange(10.0) + 2.5
    assert (
        compare(a, b, rng=3).robustness["permutation"].p_value
        == compare(a, b, rng=np.random.default_rng(3)).robustness["permutation"].p_value
    )
    with pytest.raises(TypeError):
        compare(a, b, rng="seed")
