"""noise_floor(): Bonett's and the chi-square CI of the seed sd, normality p, sem, seeds needed."""

import json
import math

import numpy as np
import pytest
from scipy import stats

from harness.stats import (
    PlanVariance,
    bonett_std_interval,
    chi_square_std_interval,
    noise_floor,
    seeds_needed,
    seeds_to_decide,
)


def bonett_by_hand(values, alpha=0.05):
    """Bonett (2006), eq. for the variance, written out with plain loops:
    CI(sigma^2) = exp(ln(c s^2) -+ z c sqrt((k - (n - 3) / n) / (n - 1))), c = n / (n - z),
    k = n sum (x - m)^4 / (sum (x - mean)^2)^2 with m the mean trimmed by 1 / (2 sqrt(n - 4))
    from each end (R's mean(x, trim): floor(n * trim) values cut each side)."""
    x = sorted(float(v) for v in values)
    n = len(x)
    z = stats.norm.ppf(1 - alpha / 2)
    mean = sum(x) / n
    cut = math.floor(n * (1 / (2 * math.sqrt(n - 4))))
    kept = x[cut : n - cut]
    m = sum(kept) / len(kept)
    ss = sum((v - mean) ** 2 for v in x)
    k = n * sum((v - m) ** 4 for v in x) / ss**2
    c = n / (n - z)
    se = c * math.sqrt((k - (n - 3) / n) / (n - 1))
    s2 = ss / (n - 1)
    return math.sqrt(math.exp(math.log(c * s2) - z * se)), math.sqrt(math.exp(math.log(c * s2) + z * se))


def test_noise_floor_by_hand():
    nf = noise_floor([1.0, 2.0, 3.0, 4.0, 5.0])
    assert nf.n == 5 and nf.mean == 3.0
    assert nf.std == pytest.approx(math.sqrt(2.5))
    assert nf.sem == pytest.approx(math.sqrt(2.5 / 5))
    assert nf.std_ci_method == "bonett"
    # n = 5: trim 1/2, so m is the median 3; k = 5 (16 + 1 + 0 + 1 + 16) / 10^2 = 1.7;
    # c = 5 / (5 - 1.959964) = 1.644717; se = c sqrt((1.7 - 2/5) / 4) = 0.937633;
    # sd interval sqrt(c 2.5 exp(-+1.959964 se)) = 0.809018 to 5.082449
    z = 1.959963985
    c = 5 / (5 - z)
    se = c * math.sqrt((1.7 - 0.4) / 4)
    assert c == pytest.approx(1.644717, abs=1e-6) and se == pytest.approx(0.937633, abs=1e-6)
    assert nf.std_ci_low == pytest.approx(0.809018, abs=1e-6)
    assert nf.std_ci_high == pytest.approx(5.082449, abs=1e-6)
    assert nf.normality_p == pytest.approx(stats.shapiro([1.0, 2.0, 3.0, 4.0, 5.0]).pvalue)
    assert nf.seeds_needed is None and math.isnan(nf.effect) and nf.level == 0.95
    # below 5 values: the chi-square interval, flagged as assuming normal scores
    nf4 = noise_floor([1.0, 2.0, 3.0, 4.0])
    assert nf4.std_ci_method.startswith("chi-square") and "normal" in nf4.std_ci_method
    assert (nf4.std_ci_low, nf4.std_ci_high) == pytest.approx(chi_square_std_interval(nf4.std, 4))


def test_chi_square_interval_by_table():
    # chi-square table, 4 df: 11.1433 (0.975) and 0.484419 (0.025); (n-1) s^2 = 10
    lo, hi = chi_square_std_interval(math.sqrt(2.5), 5)
    assert lo == pytest.approx(math.sqrt(10 / 11.1433), abs=1e-4)
    assert hi == pytest.approx(math.sqrt(10 / 0.484419), abs=1e-4)


def test_chi_square_std_interval_matches_chi2_and_vectorises():
    lo, hi = chi_square_std_interval(2.0, 10, alpha=0.1)
    assert lo == pytest.approx(math.sqrt(9 * 4 / stats.chi2.ppf(0.95, 9)))
    assert hi == pytest.approx(math.sqrt(9 * 4 / stats.chi2.ppf(0.05, 9)))
    los, his = chi_square_std_interval([1.0, 2.0], 10, alpha=0.1)
    assert los[1] == pytest.approx(lo) and his[0] == pytest.approx(hi / 2)
    assert all(math.isnan(v) for v in chi_square_std_interval(1.0, 1))


@pytest.mark.parametrize("n", [5, 6, 7, 9, 12, 30])
@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_bonett_interval_matches_the_formula_by_hand(n, alpha):
    rng = np.random.default_rng(n)
    for x in (rng.normal(size=n), rng.lognormal(size=n), rng.standard_t(3, size=n)):
        assert bonett_std_interval(x, alpha=alpha) == pytest.approx(bonett_by_hand(x, alpha), rel=1e-10)


def test_bonett_interval_vectorises_and_needs_five_values():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4, 8))
    lo, hi = bonett_std_interval(x)
    assert lo.shape == hi.shape == (3, 4)
    assert (lo[2, 1], hi[2, 1]) == pytest.approx(bonett_by_hand(x[2, 1]))
    assert np.all(lo < x.std(axis=-1, ddof=1)) and np.all(x.std(axis=-1, ddof=1) < hi)
    # scale-equivariant and shift-invariant
    lo2, hi2 = bonett_std_interval(3.0 * x + 7.0)
    np.testing.assert_allclose(lo2, 3 * lo, rtol=1e-12)
    np.testing.assert_allclose(hi2, 3 * hi, rtol=1e-12)
    with pytest.raises(ValueError, match="at least 5"):
        bonett_std_interval([1.0, 2.0, 3.0, 4.0])


def test_bonett_interval_widens_with_kurtosis():
    # same sd, one sample with a heavy tail: Bonett's interval is wider (the chi-square one is not)
    light = np.array([-1.0, -1.0, -1.0, -1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0])
    heavy = np.array([0.0] * 9 + [1.0])
    heavy = (heavy - heavy.mean()) * light.std(ddof=1) / heavy.std(ddof=1)
    lo_l, hi_l = bonett_std_interval(light)
    lo_h, hi_h = bonett_std_interval(heavy)
    assert hi_h / lo_h > 2 * (hi_l / lo_l)


def test_seeds_needed_is_prospective_at_the_effect_and_level():
    x = [1.0, 2.0, 4.0, 8.0, 3.0, 5.0]
    sd = float(np.std(x, ddof=1))
    nf = noise_floor(x, effect=sd)
    # one seed sd at 95% / 80%: Cohen's 17 per arm
    assert nf.seeds_needed == 17 == seeds_needed(1.0, 1.0)
    assert nf.effect == pytest.approx(sd) and nf.level == 0.95
    plan = PlanVariance(seed=2 * sd**2, prompt=0.0, residual=0.0, sampling=0.0, n_prompts=1, samples=1, paired=False)
    strict = noise_floor(x, effect=sd, level=1 - 0.05 / 6)
    assert strict.seeds_needed == seeds_to_decide(sd, plan, level=1 - 0.05 / 6) > nf.seeds_needed


def test_noise_floor_alpha_and_power_change_the_numbers():
    x = [1.0, 2.0, 4.0, 8.0, 3.0]
    a = noise_floor(x, effect=2.0)
    b = noise_floor(x, alpha=0.1, power=0.9, effect=2.0)
    assert b.std_ci_high < a.std_ci_high and b.std_ci_low > a.std_ci_low
    assert b.level == 0.9
    assert b.seeds_needed != a.seeds_needed


def test_single_seed_and_constant_values():
    one = noise_floor([0.7], effect=0.1)
    assert one.n == 1 and one.mean == 0.7 and math.isnan(one.std) and one.seeds_needed is None
    assert math.isnan(one.std_ci_low) and math.isnan(one.normality_p)
    d = one.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["std"] is None and d["sem"] is None
    for flat in (noise_floor([0.5, 0.5, 0.5]), noise_floor([0.5] * 6, effect=0.1)):
        assert flat.std == 0.0 and flat.std_ci_high == 0.0 and flat.std_ci_method.startswith("chi-square")
        assert math.isnan(flat.normality_p) and flat.seeds_needed is None


def test_bad_values_raise():
    with pytest.raises(ValueError):
        noise_floor([])
    with pytest.raises(ValueError, match="non-finite"):
        noise_floor([1.0, float("nan")])
