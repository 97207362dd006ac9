"""Holm and Benjamini-Hochberg on textbook examples."""

import math

import numpy as np
import pytest

from harness.stats import adjust_pvalues

# Benjamini & Hochberg (1995), section 4: 15 p-values from a multiple-endpoint trial.
BH1995 = [
    0.0001,
    0.0004,
    0.0019,
    0.0095,
    0.0201,
    0.0278,
    0.0298,
    0.0344,
    0.0459,
    0.3240,
    0.4262,
    0.5719,
    0.6528,
    0.7590,
    1.000,
]


def test_holm_small_example_by_hand():
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> running max 0.06
    adj = adjust_pvalues([0.01, 0.04, 0.03, 0.005], method="holm")
    np.testing.assert_allclose(adj, [0.03, 0.06, 0.06, 0.02])
    assert list(adj < 0.05) == [True, False, False, True]  # Holm rejects H1 and H4


def test_bh_and_holm_on_the_bh1995_example():
    bh = adjust_pvalues(BH1995, method="bh")
    holm = adjust_pvalues(BH1995, method="holm")
    assert int(np.sum(bh < 0.05)) == 4  # the paper: BH rejects the four smallest
    assert int(np.sum(holm < 0.05)) == 3  # and the Bonferroni-type procedures three
    # by hand: 15 * 0.0095 / 4 = 0.035625 (smaller than every 15 p(j) / j for j > 4)
    assert bh[3] == pytest.approx(0.035625)
    assert bh[2] == pytest.approx(15 * 0.0019 / 3)
    assert holm[2] == pytest.approx(13 * 0.0019)
    assert holm[3] == pytest.approx(12 * 0.0095)


def test_equal_steps_example():
    p = [0.01, 0.02, 0.03, 0.04, 0.05]
    np.testing.assert_allclose(adjust_pvalues(p, method="bh"), [0.05] * 5)
    np.testing.assert_allclose(adjust_pvalues(p, method="holm"), [0.05, 0.08, 0.09, 0.09, 0.09])


def test_order_is_preserved_and_capped_at_one():
    p = [0.9, 0.01, 0.5]
    holm = adjust_pvalues(p)
    np.testing.assert_allclose(holm, [1.0, 0.03, 1.0])
    assert adjust_pvalues([0.3], method="bh")[0] == pytest.approx(0.3)


def test_nan_stays_nan_and_does_not_count():
    adj = adjust_pvalues([0.01, math.nan, 0.04], method="holm")
    assert math.isnan(adj[1])
    np.testing.assert_allclose(adj[[0, 2]], [0.02, 0.04])
    assert np.all(np.isnan(adjust_pvalues([math.nan, math.nan])))


def test_unknown_method_lists_valid_ones():
    with pytest.raises(ValueError, match="holm, bh"):
        adjust_pvalues([0.1], method="bonferroni")


def test_out_of_range_p_rejected():
    with pytest.raises(ValueError):
        adjust_pvalues([0.1, 1.2])


def test_rows_are_independent_families():
    rows = np.array([[0.01, 0.04, 0.03, 0.005], BH1995[:4], [0.5, math.nan, 0.01, 0.2]])
    for method in ("holm", "bh"):
        adj = adjust_pvalues(rows, method=method)
        assert adj.shape == rows.shape
        for i in range(3):
            np.testing.assert_allclose(adj[i], adjust_pvalues(rows[i], method=method))
    np.testing.assert_allclose(adjust_pvalues(rows, method="holm")[2], [0.5, np.nan, 0.03, 0.4])
