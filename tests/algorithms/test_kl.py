import math

import pytest
import torch

from harness.algorithms.kl import kl_estimate
from harness.errors import ConfigError


def test_estimators_by_hand():
    # pi(y) = 0.5, ref(y) = 0.25: log ratio ln 2.
    logp, ref = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])
    ln2 = math.log(2)
    assert kl_estimate(logp, ref, "k1").item() == pytest.approx(ln2)
    assert kl_estimate(logp, ref, "k2").item() == pytest.approx(0.5 * ln2**2)
    # seeds/000, seeds/004: exp(ref - logp) - (ref - logp) - 1 = 0.5 + ln 2 - 1
    assert kl_estimate(logp, ref, "k3").item() == pytest.approx(0.5 + ln2 - 1)


def test_k3_is_never_negative_and_zero_only_at_equality():
    # seeds/000: "Low-variance KL estimate ... always >= 0"
    d = torch.linspace(-8, 8, 161)
    k3 = kl_estimate(torch.zeros_like(d), d, "k3")
    assert torch.all(k3 >= 0)
    assert torch.equal(k3 == 0, d == 0)
    assert torch.any(kl_estimate(torch.zeros_like(d), d, "k1") < 0)  # k1 can be negative


def test_k1_and_k3_are_unbiased_for_kl_pi_ref_over_samples_of_pi():
    # seeds/002 eq. (4)-(5) and seeds/004: the estimators average to KL(pi || ref) under pi.
    pi = torch.tensor([0.1, 0.4, 0.2, 0.2, 0.1])
    ref = torch.tensor([0.3, 0.1, 0.2, 0.25, 0.15])
    exact = (pi * (pi / ref).log()).sum()
    for kind in ("k1", "k3"):
        expectation = (pi * kl_estimate(pi.log(), ref.log(), kind)).sum()
        assert expectation.item() == pytest.approx(exact.item(), rel=1e-5)
    k2 = (pi * kl_estimate(pi.log(), ref.log(), "k2")).sum()
    assert k2.item() != pytest.approx(exact.item(), rel=1e-2)  # k2 is biased


def test_unknown_estimator_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="unknown KL estimator 'k4'; valid: k1, k2, k3"):
        kl_estimate(torch.zeros(1), torch.zeros(1), "k4")
