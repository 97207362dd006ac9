"""noise_floor(): chi-square CI of the seed sd, sem, minimal detectable effect."""

import json
import math

import pytest
from scipy import stats

from harness.stats import (
    minimal_detectable_effect,
    noise_floor,
    seeds_needed,
    std_interval,
)


def test_noise_floor_by_hand():
    nf = noise_floor([1.0, 2.0, 3.0, 4.0, 5.0])
    assert nf.n == 5 and nf.mean == 3.0
    assert nf.std == pytest.approx(math.sqrt(2.5))
    assert nf.sem == pytest.approx(math.sqrt(2.5 / 5))
    # chi-square table, 4 df: 11.1433 (0.975) and 0.484419 (0.025); (n-1) s^2 = 10
    assert nf.std_ci_low == pytest.approx(math.sqrt(10 / 11.1433), abs=1e-4)
    assert nf.std_ci_high == pytest.approx(math.sqrt(10 / 0.484419), abs=1e-4)
    assert nf.mde == pytest.approx(minimal_detectable_effect(5, math.sqrt(2.5)))
    assert nf.seeds_for_1sd == 17 == seeds_needed(1.0, 1.0)


def test_std_interval_matches_chi2_and_vectorises():
    lo, hi = std_interval(2.0, 10, alpha=0.1)
    assert lo == pytest.approx(math.sqrt(9 * 4 / stats.chi2.ppf(0.95, 9)))
    assert hi == pytest.approx(math.sqrt(9 * 4 / stats.chi2.ppf(0.05, 9)))
    los, his = std_interval([1.0, 2.0], 10, alpha=0.1)
    assert los[1] == pytest.approx(lo) and his[0] == pytest.approx(hi / 2)


def test_noise_floor_alpha_and_power_change_the_numbers():
    a = noise_floor([1.0, 2.0, 4.0, 8.0])
    b = noise_floor([1.0, 2.0, 4.0, 8.0], alpha=0.1, power=0.9)
    assert b.std_ci_high < a.std_ci_high
    assert b.seeds_for_1sd != a.seeds_for_1sd


def test_single_seed_and_constant_values():
    one = noise_floor([0.7])
    assert one.n == 1 and one.mean == 0.7 and math.isnan(one.std) and one.mde == math.inf
    d = one.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["std"] is None and d["mde"] is None
    flat = noise_floor([0.5, 0.5, 0.5])
    assert flat.std == 0.0 and flat.std_ci_high == 0.0 and flat.mde == 0.0


def test_bad_values_raise():
    with pytest.raises(ValueError):
        noise_floor([])
    with pytest.raises(ValueError, match="non-finite"):
        noise_floor([1.0, float("nan")])
