import math

import pytest
import torch

from harness.algorithms.kl import kl_estimate
from harness.algorithms.parts import KL_ESTIMATORS
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
    with pytest.raises(ConfigError, match=r"unknown KL estimator 'k4'; valid: k1, k1\+, k2, k3, k3\+, k3_unbiased"):
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
    for kind in KL_ESTIMATORS.names():
        logp = torch.tensor([-1.0], requires_grad=True)
        old = logp.detach() - log_ratio  # an old policy as far off as the reference
        estimate = kl_estimate(logp, logp.detach() - log_ratio, kind, old)
        estimate.sum().backward()
        assert torch.isfinite(estimate).all() and torch.isfinite(logp.grad).all(), kind


def test_k3_is_unchanged_below_its_cap():
    # where e^d - d - 1 <= 10 (d from -11 to about 2.6) the clamps do nothing
    d = torch.linspace(-10.9, 2.6, 400, dtype=torch.float64)
    assert torch.equal(kl_estimate(torch.zeros_like(d), d, "k3"), torch.expm1(d) - d)


# --- straight-through (verl's "k1+", "k3+") and DeepSeek-V3.2's unbiased k3 ---


def value_and_grad(kind, logp, ref, old=None):
    logp = torch.tensor([logp], dtype=torch.float64, requires_grad=True)
    ref = torch.tensor([ref], dtype=torch.float64)
    old = None if old is None else torch.tensor([old], dtype=torch.float64)
    estimate = kl_estimate(logp, ref, kind, old)
    estimate.sum().backward()
    return estimate.item(), logp.grad.item()


def test_straight_through_estimators_keep_the_value_and_take_k2s_gradient():
    # pi(y) = 0.5, ref(y) = 0.25: k1 = ln 2, k3 = 0.5 + ln 2 - 1; k2's gradient is log pi - log ref = ln 2
    ln2 = math.log(2)
    args = (math.log(0.5), math.log(0.25))
    assert value_and_grad("k1+", *args) == pytest.approx((ln2, ln2))
    assert value_and_grad("k3+", *args) == pytest.approx((0.5 + ln2 - 1, ln2))
    # the plain estimators' own gradients: k1's is 1, k3's is 1 - ref/pi = 0.5
    assert value_and_grad("k1", *args) == pytest.approx((ln2, 1.0))
    assert value_and_grad("k3", *args) == pytest.approx((0.5 + ln2 - 1, 0.5))


def test_straight_through_gradient_is_the_kl_gradient_in_expectation():
    # over samples of pi, E[grad k2] = E[(log pi - log ref) grad log pi] = grad KL(pi || ref), while
    # E[grad k1] = E[grad log pi] = 0: the reason for the "+" (verl's kl_penalty)
    logits = torch.tensor([0.3, -0.2, 0.9, 0.0], dtype=torch.float64, requires_grad=True)
    ref = torch.log_softmax(torch.tensor([0.0, 0.5, -0.3, 0.2], dtype=torch.float64), dim=0)
    logp = torch.log_softmax(logits, dim=0)
    exact = torch.autograd.grad((logp.exp() * (logp - ref)).sum(), logits)[0]
    for kind, matches in (("k1+", True), ("k3+", True), ("k1", False), ("k3", False)):
        # expectation over y ~ pi with pi held fixed: sum_y sg(pi(y)) * estimate(y)
        logp = torch.log_softmax(logits, dim=0)
        expectation = (logp.exp().detach() * kl_estimate(logp, ref, kind)).sum()
        grad = torch.autograd.grad(expectation, logits)[0]
        assert torch.allclose(grad, exact, atol=1e-12) is matches, kind


def test_k3_unbiased_weighs_k3_by_the_ratio_to_the_old_policy():
    # pi 0.5, ref 0.25, pi_old 0.4: (pi/pi_old) * k3 = 1.25 * (0.5 + ln 2 - 1) = 0.2414339
    k3 = 0.5 + math.log(2) - 1
    value, grad = value_and_grad("k3_unbiased", math.log(0.5), math.log(0.25), math.log(0.4))
    assert value == pytest.approx(1.25 * k3)
    # d/dlogp of r * k3 = r * k3 + r * (1 - ref/pi) = 1.25 * (k3 + 0.5)
    assert grad == pytest.approx(1.25 * (k3 + 0.5))
    # on-policy (no old log-probs: the samples are pi's own) it is k3, with k3's gradient + k3
    assert value_and_grad("k3_unbiased", math.log(0.5), math.log(0.25)) == pytest.approx((k3, k3 + 0.5))


def test_k3_unbiased_is_unbiased_for_kl_pi_ref_over_samples_of_pi_old():
    # E_{y ~ pi_old}[(pi/pi_old) k3] = E_pi[k3] = KL(pi || ref); plain k3 over pi_old's samples is not
    pi = torch.tensor([0.1, 0.4, 0.2, 0.2, 0.1], dtype=torch.float64)
    old = torch.tensor([0.3, 0.2, 0.2, 0.1, 0.2], dtype=torch.float64)
    ref = torch.tensor([0.3, 0.1, 0.2, 0.25, 0.15], dtype=torch.float64)
    exact = (pi * (pi / ref).log()).sum().item()
    unbiased = (old * kl_estimate(pi.log(), ref.log(), "k3_unbiased", old.log())).sum().item()
    plain = (old * kl_estimate(pi.log(), ref.log(), "k3")).sum().item()
    assert unbiased == pytest.approx(exact, rel=1e-12) and plain != pytest.approx(exact, rel=1e-2)
