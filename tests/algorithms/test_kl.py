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


def test_k3_is_clamped_as_verl_low_var_kl():
    # verl kl_penalty_forward("low_var_kl"): d = clamp(ref - logp, +-20); clamp(e^d - d - 1, max 10)
    d = torch.tensor([-100.0, -20.0, -11.5, -10.0, 2.0, 3.0, 20.0, 100.0], requires_grad=True)
    k3 = kl_estimate(torch.zeros_like(d), d, "k3")
    expected = [10.0, 10.0, 10.0, math.exp(-10.0) + 9.0, math.exp(2.0) - 3.0, 10.0, 10.0, 10.0]
    assert k3.tolist() == pytest.approx(expected, rel=1e-6)
    k3.sum().backward()
    # d/d ref of e^d - d - 1 is e^d - 1 inside the clamp; 0 where the estimate is capped
    assert d.grad.tolist() == pytest.approx(
        [0.0, 0.0, 0.0, math.exp(-10.0) - 1, math.exp(2.0) - 1, 0.0, 0.0, 0.0], rel=1e-6
    )


@pytest.mark.parametrize("log_ratio", [100.0, -100.0])
def test_every_estimator_is_finite_with_finite_gradients_at_plus_minus_100_in_fp32(log_ratio):
    for kind in ("k1", "k2", "k3"):
        logp = torch.tensor([-1.0], requires_grad=True)
        estimate = kl_estimate(logp, logp.detach() - log_ratio, kind)
        estimate.sum().backward()
        assert torch.isfinite(estimate).all() and torch.isfinite(logp.grad).all(), kind


def test_k3_is_unchanged_below_its_cap():
    # where e^d - d - 1 <= 10 (d from -11 to about 2.6) the clamps do nothing
    d = torch.linspace(-10.9, 2.6, 400, dtype=torch.float64)
    assert torch.equal(kl_estimate(torch.zeros_like(d), d, "k3"), torch.expm1(d) - d)
