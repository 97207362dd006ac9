"""bootstrap_ci, rliable aggregates across tasks, learning-curve bands and grid alignment."""

import json
import math

import numpy as np
import pytest
from scipy import stats

from harness.stats import (
    Interval,
    align_on_grid,
    bootstrap_ci,
    bootstrap_diff_ci,
    curve_band,
)


def test_bootstrap_ci_by_hand():
    assert bootstrap_ci([2.0, 2.0, 2.0]) == Interval(2.0, 2.0, 2.0)
    # the mean of 2 draws from {0, 1} is 0, 0.5, 1 w.p. 1/4, 1/2, 1/4: 2.5% and 97.5% points are 0 and 1
    iv = bootstrap_ci([0.0, 1.0], n_boot=4000, rng=np.random.default_rng(0))
    assert (iv.point, iv.low, iv.high) == (0.5, 0.0, 1.0)
    # a 40% interval (alpha = 0.6): the 30% and 70% points both fall on 0.5, which holds 50% of the mass
    iv = bootstrap_ci([0.0, 1.0], alpha=0.6, n_boot=4000, rng=1)
    assert (iv.low, iv.high) == (0.5, 0.5)


def test_bootstrap_ci_statistics_and_rng():
    x = np.arange(20.0)
    a = bootstrap_ci(x, np.median, rng=np.random.default_rng(3))
    b = bootstrap_ci(x, np.median, rng=np.random.default_rng(3))
    assert a == b and a.point == 9.5 and a.low < 9.5 < a.high
    c = bootstrap_ci(x, lambda v: float(np.max(v) - np.min(v)), rng=3)  # no axis argument: row loop
    assert c.point == 19.0 and c.high == 19.0 and c.low < 19.0
    json.dumps(a.to_dict())
    # compared with the large-sample normal interval of the mean the percentile interval is close
    iv = bootstrap_ci(np.random.default_rng(4).normal(size=400), rng=5)
    assert iv.high - iv.low == pytest.approx(2 * 1.96 / 20, rel=0.15)


def test_bootstrap_diff_ci():
    iv = bootstrap_diff_ci([1.0, 1.0], [0.0, 0.0])
    assert (iv.point, iv.low, iv.high) == (1.0, 1.0, 1.0)
    iv = bootstrap_diff_ci([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], rng=0)
    assert iv.point == -3.0 and -5.0 <= iv.low < -3.0 < iv.high <= -1.0


def test_curve_band_by_hand_with_missing_points():
    mean, lo, hi = curve_band([[1.0, 2.0, np.nan], [3.0, np.nan, np.nan]])
    np.testing.assert_allclose(mean[:2], [2.0, 2.0])
    assert math.isnan(mean[2])
    # point 0: sd = sqrt(2), se = 1, t_{0.975, 1} = 12.7062
    assert lo[0] == pytest.approx(2.0 - 12.7062, abs=1e-4) and hi[0] == pytest.approx(2.0 + 12.7062, abs=1e-4)
    assert math.isnan(lo[1]) and math.isnan(hi[1])  # one seed: a mean but no band


def test_curve_band_matches_t_interval_per_point():
    rng = np.random.default_rng(2)
    v = rng.normal(size=(5, 4))
    mean, lo, hi = curve_band(v, alpha=0.1)
    for j in range(4):
        ref = stats.ttest_1samp(v[:, j], 0.0).confidence_interval(0.9)
        assert (lo[j], hi[j]) == pytest.approx((ref.low, ref.high))
        assert mean[j] == pytest.approx(v[:, j].mean())


def test_align_on_grid_by_hand():
    out = align_on_grid([[0.0, 10.0], [5.0, 20.0, 15.0]], [[0.0, 1.0], [0.0, 3.0, 2.0]], [-1, 0, 5, 10, 11, 20])
    np.testing.assert_allclose(out[0], [np.nan, 0.0, 0.5, 1.0, np.nan, np.nan])
    np.testing.assert_allclose(out[1], [np.nan, np.nan, 0.0, 1.0, 1.2, 3.0])  # x sorted first
    assert out.shape == (2, 6)


def test_align_on_grid_drops_nan_and_checks_lengths():
    out = align_on_grid([[0.0, 1.0, 2.0]], [[0.0, np.nan, 2.0]], [1.0])
    assert out[0, 0] == pytest.approx(1.0)
    assert np.isnan(align_on_grid([[]], [[]], [1.0])).all()
    with pytest.raises(ValueError):
        align_on_grid([[0.0, 1.0]], [[0.0]], [0.5])
    with pytest.raises(ValueError):
        align_on_grid([[0.0]], [], [0.5])
