import math

import pytest
import torch

from harness.algorithms.config import RLConfig
from harness.algorithms.parts import AGGREGATIONS, POLICY_LOSSES


def cfg(**kw) -> RLConfig:
    return RLConfig(name="test", **kw)


#: Clip-Cov takes away the gradient of the tokens it picks, by design, even on-policy; with an
#: empty covariance band it is the clipped loss, which the generic properties below are about
#: (its own tests, with tokens picked, are in test_covariance_losses.py)
NEUTRAL = {"clip_cov": {"clip_cov_lb": 1e3, "clip_cov_ub": 1e4}}


def plain(name, **kw) -> RLConfig:
    return cfg(**NEUTRAL.get(name, {}), **kw)


def total(per_token, mask):
    """Sum over real tokens: makes each token's gradient its own term's derivative."""
    return torch.where(mask.bool(), per_token, 0.0).sum()


def token_grad(name, ratio, advantage, **kw):
    """d loss / d logprob for one token at ``ratio`` = pi/pi_old."""
    logp = torch.tensor([[math.log(0.3)]], requires_grad=True)
    old = logp.detach() - math.log(ratio)
    loss, _ = POLICY_LOSSES.get(name)(logp, old, torch.tensor([[advantage]]), torch.ones(1, 1), cfg(**kw), total)
    loss.backward()
    return logp.grad.item(), loss.item()


def batch(seed=0, B=4, T=5):
    g = torch.Generator().manual_seed(seed)
    logp = (-torch.rand(B, T, generator=g) * 3).requires_grad_()
    mask = torch.ones(B, T)
    mask[1, 3:] = 0
    mask[3, 1:] = 0
    seq_adv = torch.randn(B, 1, generator=g)
    return logp, mask, seq_adv * mask


@pytest.mark.parametrize("name", POLICY_LOSSES.names())
@pytest.mark.parametrize("aggregation", AGGREGATIONS.names())
def test_at_ratio_one_every_loss_has_the_reinforce_gradient(name, aggregation):
    # seeds/003 ("GRPO, assembled"): with one inner step every rho is 1, the clip never fires
    # and the update is the plain on-policy one, grad of -A * log pi.
    logp, mask, adv = batch()
    aggregate = lambda x, m: AGGREGATIONS.get(aggregation)(x, m, 7)  # noqa: E731
    loss, metrics = POLICY_LOSSES.get(name)(logp, logp.detach(), adv, mask, plain(name), aggregate)
    (grad,) = torch.autograd.grad(loss, logp)
    (reinforce,) = torch.autograd.grad(aggregate(-adv * logp, mask), logp)
    assert torch.allclose(grad, reinforce, atol=1e-6)
    assert grad.abs().sum() > 0
    assert metrics["ratio_mean"] == pytest.approx(1.0)
    assert metrics["clip_frac"] == 0.0


def test_is_loss_reproduces_seed_003_exact_toy_gradient():
    # seeds/003 ("Exact gradient on the toy"): vocabulary (0, 4, 5, 6, 15) with probabilities
    # (0.1, 0.4, 0.2, 0.2, 0.1), reward 1 only for "5", baseline b = J = 0.2. The exact
    # expectation over the five one-token answers gives grad J = (-0.02, -0.08, 0.16, -0.04, -0.02)
    # and one ascent step with lr 1 moves pi(5) from 0.2 to about 0.2366.
    probs = torch.tensor([0.1, 0.4, 0.2, 0.2, 0.1])
    logits = probs.log().requires_grad_()
    logp = torch.log_softmax(logits, dim=0)[:, None]  # one row per answer, one token each
    advantages = torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0])[:, None] - 0.2
    expectation = lambda x, m: (x[:, 0] * probs).sum()  # noqa: E731
    loss, _ = POLICY_LOSSES.get("is")(logp, logp.detach(), advantages, torch.ones(5, 1), cfg(), expectation)
    loss.backward()
    grad_j = -logits.grad
    assert grad_j.tolist() == pytest.approx([-0.02, -0.08, 0.16, -0.04, -0.02], abs=1e-6)
    stepped = torch.softmax(logits.detach() + grad_j, dim=0)
    assert stepped[2].item() == pytest.approx(0.2366, abs=1e-4)


def test_clipped_surrogate_reproduces_seed_003_numbers():
    # seeds/003 ("The cheaper leash: PPO's clip"), eps 0.2. Objective = -loss; d loss / d logp.
    # Good action A=+0.8 at rho=2.0: min(1.6, 0.96) = 0.96, flat (zero gradient).
    assert token_grad("clipped", 2.0, 0.8) == pytest.approx((0.0, -0.96))
    # Bad action A=-0.2 at rho=0.5: min(-0.10, -0.16) = -0.16, flat.
    assert token_grad("clipped", 0.5, -0.2) == pytest.approx((0.0, 0.16))
    # Bad action still over-liked, rho=2.0: min(-0.40, -0.24) = -0.40, unclipped, grows with rho.
    assert token_grad("clipped", 2.0, -0.2) == pytest.approx((0.4, 0.4))


# seeds/000 ("What is CISPO?"): per-token gradient weight of the objective for eps 0.2 (PPO)
# and a ratio cap of 5 (CISPO; eps_high 4.0 here, eps_low 1.0 = no lower bound).
RATIOS = (0.7, 1.0, 1.3, 2.0, 6.0)
PPO_WEIGHTS = {+1.0: (0.7, 1.0, 0.0, 0.0, 0.0), -1.0: (0.0, -1.0, -1.3, -2.0, -6.0)}
CISPO_WEIGHTS = {+1.0: (0.7, 1.0, 1.3, 2.0, 5.0), -1.0: (-0.7, -1.0, -1.3, -2.0, -5.0)}


@pytest.mark.parametrize("advantage", [+1.0, -1.0])
def test_ppo_and_cispo_gradient_weights_reproduce_seed_000_table(advantage):
    ppo = [-token_grad("clipped", r, advantage)[0] for r in RATIOS]
    cispo = [-token_grad("cispo", r, advantage, eps_low=1.0, eps_high=4.0)[0] for r in RATIOS]
    assert ppo == pytest.approx(PPO_WEIGHTS[advantage], abs=1e-6)
    assert cispo == pytest.approx(CISPO_WEIGHTS[advantage], abs=1e-6)


def test_cispo_keeps_a_gradient_where_the_clipped_surrogate_has_none():
    assert token_grad("clipped", 1.5, 1.0)[0] == 0.0
    assert token_grad("cispo", 1.5, 1.0)[0] == pytest.approx(-1.2)  # weight clip(1.5) = 1.2
    assert token_grad("clipped", 0.5, -1.0)[0] == 0.0
    assert token_grad("cispo", 0.5, -1.0)[0] == pytest.approx(0.8)


def test_dual_clip_bounds_the_loss_for_negative_advantages():
    for ratio in (2.0, 5.0, 20.0):
        assert token_grad("clipped", ratio, -1.0)[1] == pytest.approx(ratio)  # unbounded
    assert token_grad("clipped", 2.0, -1.0, dual_clip=3.0) == pytest.approx((2.0, 2.0))
    assert token_grad("clipped", 5.0, -1.0, dual_clip=3.0) == pytest.approx((0.0, 3.0))
    assert token_grad("clipped", 20.0, -1.0, dual_clip=3.0) == pytest.approx((0.0, 3.0))
    # positive advantages are untouched
    assert token_grad("clipped", 5.0, 1.0, dual_clip=3.0) == pytest.approx((0.0, -1.2))


def test_clip_bounds_are_asymmetric_eps_low_and_eps_high():
    # DAPO's clip-higher: eps_high 0.28 lets a positive-advantage ratio of 1.25 keep its gradient.
    assert token_grad("clipped", 1.25, 1.0)[0] == 0.0
    assert token_grad("clipped", 1.25, 1.0, eps_high=0.28)[0] == pytest.approx(-1.25)
    assert token_grad("clipped", 0.75, -1.0, eps_high=0.28)[0] == 0.0


@pytest.mark.parametrize("name", POLICY_LOSSES.names())
def test_padding_gets_zero_gradient_whatever_it_holds(name):
    logp, mask, adv = batch(seed=1)
    garbage = torch.where(mask.bool(), 0.0, 50.0)
    logp_bad = (logp.detach() + garbage).requires_grad_()
    old = logp.detach() - 0.1 * mask - garbage * 2  # ratios near 1.1 on real tokens, e^150 off
    loss, metrics = POLICY_LOSSES.get(name)(
        logp_bad, old, adv, mask, plain(name), lambda x, m: AGGREGATIONS.get("token_mean")(x, m, 1)
    )
    loss.backward()
    assert torch.isfinite(loss)
    assert torch.all(logp_bad.grad[mask == 0] == 0)
    assert torch.all(logp_bad.grad[mask == 1] != 0)
    assert math.isfinite(metrics["ratio_mean"])


def test_metrics_are_masked_means():
    logp = torch.log(torch.tensor([[1.5, 1.0, 9.0]]))
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    for name in ("clipped", "cispo"):
        _, metrics = POLICY_LOSSES.get(name)(logp, torch.zeros(1, 3), torch.ones(1, 3), mask, cfg(), total)
        assert metrics == pytest.approx({"clip_frac": 0.5, "ratio_mean": 1.25})
    _, metrics = POLICY_LOSSES.get("is")(logp, torch.zeros(1, 3), torch.ones(1, 3), mask, cfg(), total)
    assert metrics == pytest.approx({"clip_frac": 0.0, "ratio_mean": 1.25})


def test_gspo_clips_the_sequence_ratio_not_token_ratios():
    # Token log-ratios (+0.1, -0.1) average to 0: sequence ratio 1, inside even GSPO's tiny range,
    # while the token-level clip cuts the first token (ratio e^0.1 > 1.0004).
    narrow = {"eps_low": 3e-4, "eps_high": 4e-4}
    logp = torch.zeros(1, 2, requires_grad=True)
    old = torch.tensor([[-0.1, 0.1]])
    adv, mask = torch.ones(1, 2), torch.ones(1, 2)
    mean = lambda x, m: AGGREGATIONS.get("seq_mean_token_mean")(x, m, 1)  # noqa: E731
    loss, metrics = POLICY_LOSSES.get("gspo")(logp, old, adv, mask, cfg(**narrow), mean)
    loss.backward()
    assert loss.item() == pytest.approx(-1.0)
    assert metrics["clip_frac"] == 0.0
    assert logp.grad[0].tolist() == pytest.approx([-0.5, -0.5])  # d s / d logp_t = s / |y|
    _, token_metrics = POLICY_LOSSES.get("clipped")(logp, old, adv, mask, cfg(**narrow), mean)
    assert token_metrics["clip_frac"] == 0.5
    # both tokens up by 0.2: s = e^0.2, clipped to 1.0004, no gradient for A > 0
    logp = torch.zeros(1, 2, requires_grad=True)
    loss, metrics = POLICY_LOSSES.get("gspo")(logp, torch.full((1, 2), -0.2), adv, mask, cfg(**narrow), mean)
    loss.backward()
    assert loss.item() == pytest.approx(-1.0004)
    assert metrics["clip_frac"] == 1.0
    assert logp.grad.abs().sum() == 0


def test_is_loss_is_minus_ratio_times_advantage_without_clip():
    assert token_grad("is", 3.0, 2.0) == pytest.approx((-6.0, -6.0))


# --- the log-ratio clamp (verl/OpenRLHF: +-20 per token; verl's GSPO: the sequence's <= 10) ---

LOSS_VARIANTS = [(name, {}) for name in POLICY_LOSSES.names()] + [("clipped", {"dual_clip": 3.0})]


def at_log_ratio(name, log_ratio, advantage, dtype=torch.float32, **kw):
    """Loss (summed over two tokens) and d loss / d logprob, both tokens at one log-ratio."""
    logp = torch.full((1, 2), -1.0, dtype=dtype, requires_grad=True)
    old = logp.detach() - log_ratio
    loss, metrics = POLICY_LOSSES.get(name)(
        logp, old, torch.full((1, 2), advantage, dtype=dtype), torch.ones(1, 2, dtype=dtype), cfg(**kw), total
    )
    loss.backward()
    return loss, logp.grad, metrics


@pytest.mark.parametrize("name,kw", LOSS_VARIANTS)
@pytest.mark.parametrize("log_ratio", [100.0, -100.0])
@pytest.mark.parametrize("advantage", [1.0, -1.0])
def test_every_loss_is_finite_at_log_ratios_of_plus_minus_100_in_fp32(name, kw, log_ratio, advantage):
    assert not math.isfinite(torch.exp(torch.tensor(100.0)).item())  # what the clamp prevents
    loss, grad, metrics = at_log_ratio(name, log_ratio, advantage, **kw)
    assert torch.isfinite(loss) and torch.all(torch.isfinite(grad))
    assert math.isfinite(metrics["ratio_mean"])
    assert metrics["ratio_mean"] == pytest.approx(math.exp(math.copysign(20.0, log_ratio)), rel=1e-5)


def test_clamped_extremes_by_hand():
    e20, e10 = math.exp(20.0), math.exp(10.0)
    # clipped, A = -1, ratio held at e^20: the unclipped branch -r*A = e^20 per token, no gradient
    loss, grad, _ = at_log_ratio("clipped", 100.0, -1.0)
    assert loss.item() == pytest.approx(2 * e20, rel=1e-6) and torch.all(grad == 0)
    # dual clip 3 bounds it at -c*A = 3 per token
    loss, grad, _ = at_log_ratio("clipped", 100.0, -1.0, dual_clip=3.0)
    assert loss.item() == pytest.approx(6.0) and torch.all(grad == 0)
    # plain IS, A = +1: -e^20 per token; at -100 the ratio is e^-20
    loss, grad, _ = at_log_ratio("is", 100.0, 1.0)
    assert loss.item() == pytest.approx(-2 * e20, rel=1e-6) and torch.all(grad == 0)
    loss, grad, _ = at_log_ratio("is", -100.0, 1.0)
    assert loss.item() == pytest.approx(-2 * math.exp(-20.0), rel=1e-5) and torch.all(grad == 0)
    # GSPO, A = -1: the sequence ratio is held at e^10 (verl's bound), -s*A per token
    loss, grad, _ = at_log_ratio("gspo", 100.0, -1.0)
    assert loss.item() == pytest.approx(2 * e10, rel=1e-6) and torch.all(grad == 0)
    # ... and has no lower bound: at -100 it underflows towards 0 and keeps its gradient s/|y|
    loss, grad, _ = at_log_ratio("gspo", -100.0, 1.0, dtype=torch.float64)
    assert loss.item() == pytest.approx(0.0, abs=1e-40)
    assert grad[0].tolist() == pytest.approx([-math.exp(-100.0)] * 2, rel=1e-9)
    # CISPO: the weight is clipped to 1 + eps_high whatever the ratio; gradient -w*A
    loss, grad, _ = at_log_ratio("cispo", 100.0, 1.0)
    assert grad[0].tolist() == pytest.approx([-1.2, -1.2])


@pytest.mark.parametrize("name,kw", LOSS_VARIANTS)
def test_the_clamp_changes_nothing_inside_its_bounds(name, kw, monkeypatch):
    # log-ratios in [-15, 15] per token, sequence means below 10: bitwise the unclamped formula
    g = torch.Generator().manual_seed(3)
    logp = (-torch.rand(6, 5, generator=g, dtype=torch.float64) * 3).requires_grad_()
    old = logp.detach() - (torch.rand(6, 5, generator=g, dtype=torch.float64) * 30 - 15)
    old[0] = logp.detach()[0] - 9.5  # a sequence mean just under GSPO's bound
    mask = torch.ones(6, 5, dtype=torch.float64)
    mask[2, 3:] = 0
    adv = torch.randn(6, 1, generator=g, dtype=torch.float64) * mask

    def run():
        loss, metrics = POLICY_LOSSES.get(name)(logp, old, adv, mask, cfg(**kw), total)
        (grad,) = torch.autograd.grad(loss, logp)
        return loss.detach(), grad, metrics

    clamped = run()
    import harness.algorithms.losses as losses

    monkeypatch.setattr(losses, "LOG_RATIO_BOUND", math.inf)
    monkeypatch.setattr(losses, "SEQ_LOG_RATIO_MAX", math.inf)
    unclamped = run()
    assert torch.equal(clamped[0], unclamped[0]) and torch.equal(clamped[1], unclamped[1])
    assert clamped[2] == unclamped[2]


# --- the later losses, by hand (expected values from the papers' and verl's formulas) ---


def test_sapo_gate_by_hand():
    # f(r) = sigmoid(tau (r - 1)) * 4 / tau, loss -f(r) A; d loss / d logp = -A * 4 s (1 - s) * r
    # r = 1: f = 2 / tau * ... = 2 (tau 1), slope 1: REINFORCE
    assert token_grad("sapo", 1.0, 1.0) == pytest.approx((-1.0, -2.0))
    # r = 1.5, A = +1, tau_pos 1: s = sigmoid(0.5) = 0.6224593; f = 2.4898373; slope 4 s (1-s) r = 1.4100223
    assert token_grad("sapo", 1.5, 1.0) == pytest.approx((-1.4100223, -2.4898373))
    # where the clip would have cut the gradient to 0, the gate only lowers it
    assert token_grad("clipped", 1.5, 1.0)[0] == 0.0
    # r = 0.5, A = -1, tau_neg 1.05: s = sigmoid(-0.525); f = 4 s / 1.05 = 1.4159383; slope 0.4670699
    assert token_grad("sapo", 0.5, -1.0) == pytest.approx((0.4670699, 1.4159383))
    # r = 2, A = -1: s = sigmoid(1.05); f = 2.8219996, slope 1.5362196 (the clip: r A = 2, slope 2)
    assert token_grad("sapo", 2.0, -1.0) == pytest.approx((1.5362196, 2.8219996))
    # the temperatures are read: tau_neg = tau_pos gives sigmoid(-0.5) instead
    assert token_grad("sapo", 0.5, -1.0, sapo_tau_neg=1.0)[1] == pytest.approx(4 * (1 - 0.6224593))


def mean_of_rows(x, m):
    return AGGREGATIONS.get("seq_mean_token_mean")(x, m, 1)


def test_gmpo_geometric_mean_of_log_clipped_ratios_by_hand():
    # one row, log-ratios (0.6, -0.2), eps 0.4 in log space: clip -> (0.4, -0.2)
    def run(advantage):
        logp = torch.zeros(1, 2, dtype=torch.float64, requires_grad=True)
        old = torch.tensor([[-0.6, 0.2]], dtype=torch.float64)
        adv = torch.full((1, 2), advantage, dtype=torch.float64)
        loss, metrics = POLICY_LOSSES.get("gmpo")(
            logp, old, adv, torch.ones(1, 2, dtype=torch.float64), cfg(eps_low=0.4, eps_high=0.4), mean_of_rows
        )
        loss.backward()
        return loss.item(), *logp.grad[0].tolist(), metrics["clip_frac"].item()

    # A = +1: min(l, clip(l)) = (0.4, -0.2), mean 0.1: loss -e^0.1; token 0 clipped (no gradient),
    # token 1: d/dl1 of -exp((0.4 + l1) / 2) = -e^0.1 / 2
    assert run(1.0) == pytest.approx((-1.1051709, 0.0, -0.5525855, 0.5))
    # A = -1: the pessimistic branch is the larger log-ratio, (0.6, -0.2): loss +e^0.2, no clip
    assert run(-1.0) == pytest.approx((1.2214028, 0.6107014, 0.6107014, 0.0))


def test_gmpo_moves_less_than_the_arithmetic_mean_under_one_outlier():
    # log-ratios (2, 0, 0, 0), no clip (eps 10): geometric mean e^0.5, arithmetic (e^2 + 3) / 4
    logp = torch.zeros(1, 4, dtype=torch.float64)
    old = torch.tensor([[-2.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    adv, mask = torch.ones(1, 4, dtype=torch.float64), torch.ones(1, 4, dtype=torch.float64)
    wide = cfg(eps_low=10.0, eps_high=10.0)
    geometric, _ = POLICY_LOSSES.get("gmpo")(logp, old, adv, mask, wide, mean_of_rows)
    arithmetic, _ = POLICY_LOSSES.get("is")(logp, old, adv, mask, wide, mean_of_rows)
    assert geometric.item() == pytest.approx(-math.exp(0.5))
    assert arithmetic.item() == pytest.approx(-(math.exp(2.0) + 3) / 4)


def prob_grad(name, old_prob, new_prob, advantage, **kw):
    """d loss / d logp and the loss for one token moved from ``old_prob`` to ``new_prob``."""
    logp = torch.tensor([[math.log(new_prob)]], dtype=torch.float64, requires_grad=True)
    old = torch.tensor([[math.log(old_prob)]], dtype=torch.float64)
    loss, metrics = POLICY_LOSSES.get(name)(
        logp,
        old,
        torch.tensor([[advantage]], dtype=torch.float64),
        torch.ones(1, 1, dtype=torch.float64),
        cfg(**kw),
        total,
    )
    loss.backward()
    return logp.grad.item(), loss.item(), metrics["clip_frac"].item()


def test_dppo_tv_masks_by_the_change_in_probability_not_the_ratio():
    tv = {"eps_low": 0.15, "eps_high": 0.15}
    # p 0.5 -> 0.6 (ratio 1.2), A = +1: change 0.1 <= 0.15, kept: -A sg(r) log p = 1.2 * -ln 0.6
    assert prob_grad("dppo_tv", 0.5, 0.6, 1.0, **tv) == pytest.approx((-1.2, 0.6129907, 0.0))
    # p 0.5 -> 0.7, A = +1: change 0.2 > 0.15, pushed further up: masked
    assert prob_grad("dppo_tv", 0.5, 0.7, 1.0, **tv) == pytest.approx((0.0, 0.0, 1.0))
    # the same move with A = -1 is against the push: kept, gradient -A r = 1.4
    assert prob_grad("dppo_tv", 0.5, 0.7, -1.0, **tv)[0] == pytest.approx(1.4)
    # A = -1 and p 0.5 -> 0.3: change -0.2 < -0.15, masked
    assert prob_grad("dppo_tv", 0.5, 0.3, -1.0, **tv)[0] == 0.0
    # a rare token 0.01 -> 0.05 (ratio 5) stays inside (change 0.04), where PPO's clip cuts it
    assert prob_grad("dppo_tv", 0.01, 0.05, 1.0, **tv)[0] == pytest.approx(-5.0)
    assert token_grad("clipped", 5.0, 1.0)[0] == 0.0
    # 0.001 -> 0.05 (ratio 50): kept, its weight capped at dppo_ratio_cap 20, counted as clipped
    assert prob_grad("dppo_tv", 0.001, 0.05, 1.0, **tv)[::2] == pytest.approx((-20.0, 1.0))
    assert prob_grad("dppo_tv", 0.001, 0.05, 1.0, dppo_ratio_cap=100.0, **tv)[0] == pytest.approx(-50.0)


def test_dppo_kl_masks_by_the_binary_kl():
    kl = {"eps_low": 0.05, "eps_high": 0.05}
    # 0.5 -> 0.7: KL(B(0.5) || B(0.7)) = 0.5 ln(5/7) + 0.5 ln(5/3) = 0.0871767 > 0.05, moved up, A > 0
    assert prob_grad("dppo_kl", 0.5, 0.7, 1.0, **kl)[0] == 0.0
    # 0.5 -> 0.6: 0.0204110 <= 0.05, kept
    assert prob_grad("dppo_kl", 0.5, 0.6, 1.0, **kl)[0] == pytest.approx(-1.2)
    # 0.5 -> 0.2: KL 0.2231436, but moved down while A > 0 pushes up: kept
    assert prob_grad("dppo_kl", 0.5, 0.2, 1.0, **kl)[0] == pytest.approx(-0.4)
    # ... and masked for A < 0, which pushes down
    assert prob_grad("dppo_kl", 0.5, 0.2, -1.0, **kl)[0] == 0.0


def seq_grad(name, log_ratios, advantage, **kw):
    logp = torch.full((1, len(log_ratios)), -1.0, dtype=torch.float64, requires_grad=True)
    old = logp.detach() - torch.tensor([log_ratios], dtype=torch.float64)
    loss, metrics = POLICY_LOSSES.get(name)(
        logp,
        old,
        torch.full((1, len(log_ratios)), advantage, dtype=torch.float64),
        torch.ones(1, len(log_ratios), dtype=torch.float64),
        cfg(**kw),
        total,
    )
    loss.backward()
    return *logp.grad[0].tolist(), metrics["clip_frac"].item()


def test_topr_tapers_only_negative_sequences_by_their_truncated_ratio():
    # A >= 0: plain REINFORCE whatever the ratio, -A grad log pi per token
    # (gradient of each token, clip_frac)
    assert seq_grad("topr", [0.3, 0.4], 1.0) == pytest.approx((-1.0, -1.0, 0.0))
    assert seq_grad("topr", [-0.3, -0.4], 1.0) == pytest.approx((-1.0, -1.0, 0.0))
    # A < 0 and pi(y)/pi_old(y) = e^0.7 > 1: truncated to 1
    assert seq_grad("topr", [0.3, 0.4], -1.0) == pytest.approx((1.0, 1.0, 1.0))
    # A < 0 and the sequence ratio e^-0.7 = 0.4965853: the push is tapered by it
    assert seq_grad("topr", [-0.3, -0.4], -1.0) == pytest.approx((0.4965853, 0.4965853, 0.0))
    # the ratio is the product over the sequence, not a token's: (+0.5, -0.7) is e^-0.2
    assert seq_grad("topr", [0.5, -0.7], -1.0)[:2] == pytest.approx([math.exp(-0.2)] * 2)


@pytest.mark.parametrize("name", POLICY_LOSSES.names())
def test_zero_advantages_give_a_zero_loss_and_no_gradient(name):
    # a degenerate group: every advantage 0, the ratios off 1 (KL-Cov's penalty and prime_rl's KL
    # term to the sampler are the terms that do not scale with the advantage: KL-Cov's gradient is
    # +-coef on its chosen token; prime_rl's kl_tau * 0.3^2 on each of the 14 tokens, gradient
    # 2 * kl_tau * 0.3 on each)
    logp, mask, _ = batch(seed=2)
    old = logp.detach() - 0.3 * mask
    loss, _ = POLICY_LOSSES.get(name)(logp, old, torch.zeros_like(mask), mask, cfg(), total)
    (grad,) = torch.autograd.grad(loss, logp)
    if name == "kl_cov":
        assert loss.item() == pytest.approx(0.3) and grad.abs().sum().item() == pytest.approx(1.0)
    elif name == "prime_rl":
        assert loss.item() == pytest.approx(14 * 1e-3 * 0.09)
        assert torch.allclose(grad, 2 * 1e-3 * 0.3 * mask)
    else:
        assert loss.item() == 0.0 and torch.all(grad == 0)


@pytest.mark.parametrize("name", POLICY_LOSSES.names())
@pytest.mark.parametrize("aggregation", AGGREGATIONS.names())
def test_an_all_padding_row_changes_nothing(name, aggregation):
    # a row dropped by zeroing its mask, holding garbage: the loss and the other rows' gradients
    # are those of the batch without it
    logp, mask, adv = batch(seed=4)
    old = logp.detach() - 0.2 * torch.randn(logp.shape, generator=torch.Generator().manual_seed(5))
    aggregate = lambda x, m: AGGREGATIONS.get(aggregation)(x, m, 7)  # noqa: E731
    loss, _ = POLICY_LOSSES.get(name)(logp, old, adv, mask, cfg(), aggregate)
    (grad,) = torch.autograd.grad(loss, logp)
    padded = torch.cat([logp.detach(), torch.full((1, 5), 50.0)]).requires_grad_()
    loss_padded, _ = POLICY_LOSSES.get(name)(
        padded,
        torch.cat([old, torch.full((1, 5), -90.0)]),
        torch.cat([adv, torch.full((1, 5), 3.0)]),
        torch.cat([mask, torch.zeros(1, 5)]),
        cfg(),
        aggregate,
    )
    (grad_padded,) = torch.autograd.grad(loss_padded, padded)
    assert loss_padded.item() == pytest.approx(loss.item(), rel=1e-6, abs=1e-7)
    assert torch.allclose(grad_padded[:-1], grad, atol=1e-7) and torch.all(grad_padded[-1] == 0)
