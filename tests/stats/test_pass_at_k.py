"""pass@k and pass^k: hand-worked numbers and brute-force enumeration of the k-subsets."""

import itertools
import math

import numpy as np
import pytest

from harness.stats import pass_at_k, pass_hat_k


def test_hand_worked_numbers():
    # n = 4 answers, c = 1 correct, k = 2: 1 - C(3,2)/C(4,2) = 1 - 3/6 = 0.5; pass^2 = C(1,2)/C(4,2) = 0
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5) and pass_hat_k(4, 1, 2) == 0.0
    # n = 5, c = 3, k = 2: 1 - C(2,2)/C(5,2) = 1 - 1/10 = 0.9; pass^2 = C(3,2)/C(5,2) = 3/10
    assert pass_at_k(5, 3, 2) == pytest.approx(0.9) and pass_hat_k(5, 3, 2) == pytest.approx(0.3)
    # k = 1: both are c / n
    assert pass_at_k(10, 7, 1) == pytest.approx(0.7) and pass_hat_k(10, 7, 1) == pytest.approx(0.7)
    # k = n: pass@n is "any correct", pass^n "all correct"
    assert pass_at_k(4, 1, 4) == 1.0 and pass_at_k(4, 0, 4) == 0.0
    assert pass_hat_k(4, 4, 4) == pytest.approx(1.0) and pass_hat_k(4, 3, 4) == 0.0


def test_matches_brute_force_enumeration():
    for n in range(1, 9):
        for c in range(n + 1):
            answers = [1] * c + [0] * (n - c)
            for k in range(1, n + 1):
                subsets = list(itertools.combinations(answers, k))
                assert pass_at_k(n, c, k) == pytest.approx(np.mean([any(s) for s in subsets]), abs=1e-12)
                assert pass_hat_k(n, c, k) == pytest.approx(np.mean([all(s) for s in subsets]), abs=1e-12)


def test_vectorised_and_unbiased():
    c = np.arange(0, 11)
    np.testing.assert_allclose(pass_at_k(10, c, 3), [1 - math.comb(10 - x, 3) / math.comb(10, 3) for x in c])
    np.testing.assert_allclose(pass_hat_k(10, c, 3), [math.comb(x, 3) / math.comb(10, 3) for x in c])
    # unbiased: E over c ~ Bin(n, p) equals 1 - (1 - p)^k and p^k exactly
    n, k, p = 8, 3, 0.3
    w = np.array([math.comb(n, x) * p**x * (1 - p) ** (n - x) for x in range(n + 1)])
    assert w @ pass_at_k(n, np.arange(n + 1), k) == pytest.approx(1 - (1 - p) ** k)
    assert w @ pass_hat_k(n, np.arange(n + 1), k) == pytest.approx(p**k)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="k <= n"):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError, match="whole numbers"):
        pass_hat_k(4, 1.5, 2)
    with pytest.raises(ValueError, match="whole numbers"):
        pass_at_k(4, 5, 2)
