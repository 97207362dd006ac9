"""prime-rl's default loss (the ``prime_rl`` policy loss and preset): DPPO-Binary-TV masking against
the sampler plus its KL term to the sampler, by hand and against prime-rl's own formula
(``default_loss_fn`` and ``compute_loss``, src/prime_rl/trainer/rl/loss.py at
559b44772e471d1538537b8805cc77f3824a5e64); and the two defaults issue 35 found mislabelled (the
DPPO preset's ratio cap, KL-Cov's k and coefficient)."""

import math

import pytest
import torch

from harness.algorithms.aggregation import make_aggregator
from harness.algorithms.config import RLConfig
from harness.algorithms.covariance_losses import largest
from harness.algorithms.old_logprobs import recomputes_old_logprobs
from harness.algorithms.parts import POLICY_LOSSES
from harness.algorithms.presets import resolve_algorithm
from harness.errors import ConfigError

F64 = torch.float64
KL_TAU = 1e-3  # prime-rl's DefaultLossConfig.kl_tau


def cfg(**kw) -> RLConfig:
    return RLConfig(name="test", **kw)


def token_mean(per_token, mask):
    return make_aggregator(cfg(aggregation="token_mean"), 1)(per_token, mask)


def one_token(old_prob, new_prob, advantage, **kw):
    """Loss, d loss / d logp and clip_frac of one token moved from ``old_prob`` to ``new_prob``."""
    logp = torch.tensor([[math.log(new_prob)]], dtype=F64, requires_grad=True)
    old = torch.tensor([[math.log(old_prob)]], dtype=F64)
    adv, mask = torch.tensor([[advantage]], dtype=F64), torch.ones(1, 1, dtype=F64)
    loss, metrics = POLICY_LOSSES.get("prime_rl")(logp, old, adv, mask, cfg(**kw), token_mean)
    loss.backward()
    return loss.item(), logp.grad.item(), metrics["clip_frac"].item()


def test_by_hand():
    # (loss, gradient, clip_frac); the KL term kl_tau * ln(r)^2 is on every token, masked or not
    kl = lambda r: KL_TAU * math.log(r) ** 2  # noqa: E731
    dkl = lambda r: 2 * KL_TAU * math.log(r)  # noqa: E731
    # 0.5 -> 0.6, A = +1: change 0.1 <= 0.2, kept: -A r = -1.2, gradient -A r = -1.2
    assert one_token(0.5, 0.6, 1.0) == pytest.approx((-1.2 + kl(1.2), -1.2 + dkl(1.2), 0.0))
    assert one_token(0.5, 0.6, 1.0)[:2] == pytest.approx((-1.1999667589, -1.1996353569))
    # 0.5 -> 0.75, A = +1: change 0.25 > 0.2 pushed further up: masked, only the KL term
    assert one_token(0.5, 0.75, 1.0) == pytest.approx((1.644019e-4, 8.109302e-4, 1.0), rel=1e-6)
    # the same move with A = -1 is against the push: kept, -A r = 1.5
    assert one_token(0.5, 0.75, -1.0) == pytest.approx((1.5 + kl(1.5), 1.5 + dkl(1.5), 0.0))
    # 0.5 -> 0.25, A = -1: change -0.25 < -0.2: masked; A = 0 is masked on the same side, as prime-rl's
    assert one_token(0.5, 0.25, -1.0) == pytest.approx((4.804530e-4, -1.386294e-3, 1.0), rel=1e-6)
    assert one_token(0.5, 0.25, 0.0) == pytest.approx((kl(0.5), dkl(0.5), 1.0))
    # ... and kept for A = +1, which pushes the other way
    assert one_token(0.5, 0.25, 1.0) == pytest.approx((-0.5 + kl(0.5), -0.5 + dkl(0.5), 0.0))
    # a rare token 0.01 -> 0.05 (ratio 5) stays inside the region, with its whole ratio (no cap)
    assert one_token(0.01, 0.05, 1.0)[1] == pytest.approx(-5.0 + dkl(5.0))
    # adv_tau scales the policy term only; kl_tau the KL term only
    assert one_token(0.5, 0.6, 1.0, adv_tau=0.5)[0] == pytest.approx(-0.6 + kl(1.2))
    assert one_token(0.5, 0.6, 1.0, kl_tau=0.1)[0] == pytest.approx(-1.2 + 0.1 * math.log(1.2) ** 2)
    # the thresholds are eps_low / eps_high (prime-rl's dppo_mask_low / dppo_mask_high)
    assert one_token(0.5, 0.75, 1.0, eps_high=0.3)[2] == 0.0
    assert one_token(0.5, 0.25, -1.0, eps_low=0.3)[2] == 0.0


# --- prime-rl's formula, transcribed from src/prime_rl/trainer/rl/loss.py at 559b447 ---


def _prime_rl_default_loss_fn(trainer_logprobs, inference_logprobs, advantages, loss_mask, mask_low, mask_high):
    """``default_loss_fn`` (lines 109-161) for one sample, adv_tau 1 and kl_tau 1e-3 (its defaults,
    packages/prime-rl-configs/src/prime_rl/configs/trainer.py lines 497-506), loss_weights None."""
    log_importance_ratio = trainer_logprobs - inference_logprobs
    importance_ratio = torch.exp(log_importance_ratio)
    probs_diff = torch.exp(trainer_logprobs) - torch.exp(inference_logprobs)
    dppo_invalid_mask_high = probs_diff > mask_high
    dppo_invalid_mask_low = probs_diff < -mask_low
    positive_advantages = advantages > 0
    is_masked = torch.where(positive_advantages, dppo_invalid_mask_high, dppo_invalid_mask_low)
    keep_mask = loss_mask & ~is_masked
    advantages = 1.0 * advantages
    pg_loss = keep_mask * advantages * importance_ratio
    kl_loss = loss_mask * log_importance_ratio**2
    per_token_loss = -pg_loss + KL_TAU * kl_loss
    return per_token_loss.sum(), loss_mask & is_masked


def _prime_rl_compute_loss(trainer, inference, advantages, mask, mask_low=0.2, mask_high=0.2):
    """``compute_loss`` (lines 285-403) over the rows as packed samples: the samples' losses summed
    and divided by ``rl_scale``, the batch's loss tokens (train.py lines 307-323); and the masked."""
    total, masked = trainer.new_zeros(()), []
    for row in range(trainer.shape[0]):
        on = mask[row].bool()
        loss, row_masked = _prime_rl_default_loss_fn(
            trainer[row], inference[row], advantages[row], on, mask_low, mask_high
        )
        total, masked = total + loss, masked + [row_masked]
    return total / max(int(mask.sum()), 1), torch.stack(masked)


def random_batch(seed, B=8, T=6):
    """Sampler probabilities in (0.05, 0.95) moved by up to +-0.45, rows of 6, 3, 1 and 0 tokens."""
    g = torch.Generator().manual_seed(seed)
    old_prob = 0.05 + 0.9 * torch.rand(B, T, generator=g, dtype=F64)
    new_prob = (old_prob + 0.9 * torch.rand(B, T, generator=g, dtype=F64) - 0.45).clamp(0.01, 0.99)
    mask = torch.ones(B, T, dtype=F64)
    mask[1, 3:] = 0
    mask[2, 1:] = 0  # one token
    mask[3] = 0  # all padding
    adv = torch.randn(B, 1, generator=g, dtype=F64).expand(B, T).clone()
    adv[4] = 0.0  # a zero advantage
    return torch.log(new_prob), torch.log(old_prob), adv, mask


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("thresholds", [(0.2, 0.2), (0.1, 0.3)])
def test_matches_prime_rls_formula_loss_gradient_and_masked_share(seed, thresholds):
    low, high = thresholds
    logp, old, adv, mask = random_batch(seed)
    logp.requires_grad_()
    loss, metrics = POLICY_LOSSES.get("prime_rl")(logp, old, adv, mask, cfg(eps_low=low, eps_high=high), token_mean)
    (grad,) = torch.autograd.grad(loss, logp)
    theirs_logp = logp.detach().clone().requires_grad_()
    theirs, masked = _prime_rl_compute_loss(theirs_logp, old, adv, mask, low, high)
    (theirs_grad,) = torch.autograd.grad(theirs, theirs_logp)
    assert loss.item() == pytest.approx(theirs.item(), rel=1e-12, abs=1e-15)
    assert torch.allclose(grad, theirs_grad, rtol=1e-12, atol=1e-15)
    assert metrics["clip_frac"].item() == pytest.approx(masked.sum().item() / mask.sum().item())
    assert 0 < masked.sum() < mask.sum()  # the mask fired, and not everywhere


@pytest.mark.parametrize(
    "log_ratio, advantage, logp", [(20.0, -1.0, -1.0), (-20.0, 1.0, -25.0), (25.0, -1.0, -1.0), (-25.0, 1.0, -30.0)]
)
def test_log_ratios_at_and_beyond_20(log_ratio, advantage, logp):
    # kept tokens (A < 0 moved up, A > 0 moved down); the KL term squares the log-ratio unclamped,
    # as prime-rl's; the ratio is clamped at e^+-20, so beyond it the policy term has no gradient
    mask = torch.ones(1, 1, dtype=F64)
    adv = torch.full((1, 1), advantage, dtype=F64)
    old = torch.full((1, 1), logp - log_ratio, dtype=F64)
    ours_logp = torch.full((1, 1), logp, dtype=F64, requires_grad=True)
    loss, _ = POLICY_LOSSES.get("prime_rl")(ours_logp, old, adv, mask, cfg(), token_mean)
    (grad,) = torch.autograd.grad(loss, ours_logp)
    theirs_logp = ours_logp.detach().clone().requires_grad_()
    theirs, masked = _prime_rl_compute_loss(theirs_logp, old, adv, mask)
    (theirs_grad,) = torch.autograd.grad(theirs, theirs_logp)
    assert not masked.any()
    kl, dkl = KL_TAU * log_ratio**2, 2 * KL_TAU * log_ratio
    bounded = math.copysign(20.0, log_ratio)
    assert loss.item() == pytest.approx(-advantage * math.exp(bounded) + kl, rel=1e-12)
    assert theirs.item() == pytest.approx(-advantage * math.exp(log_ratio) + kl, rel=1e-12)
    if abs(log_ratio) == 20.0:  # at the bound: prime-rl's numbers
        assert grad.item() == pytest.approx(theirs_grad.item(), rel=1e-12)
    else:  # beyond it: the KL term's gradient only
        assert grad.item() == pytest.approx(dkl, rel=1e-12)
        assert theirs_grad.item() == pytest.approx(-advantage * math.exp(log_ratio) + dkl, rel=1e-12)


def test_nan_padding_and_all_padding_rows_change_nothing():
    logp, old, adv, mask = random_batch(5)
    clean = logp.clone().requires_grad_()
    loss, metrics = POLICY_LOSSES.get("prime_rl")(clean, old, adv, mask, cfg(), token_mean)
    (grad,) = torch.autograd.grad(loss, clean)
    pad = ~mask.bool()
    nan = lambda t: torch.where(pad, torch.nan, t)  # noqa: E731
    dirty = nan(logp).requires_grad_()
    loss_nan, metrics_nan = POLICY_LOSSES.get("prime_rl")(dirty, nan(old), nan(adv), mask, cfg(), token_mean)
    (grad_nan,) = torch.autograd.grad(loss_nan, dirty)
    assert loss_nan.item() == pytest.approx(loss.item(), rel=1e-12)
    assert torch.equal(grad_nan, grad) and torch.all(grad_nan[pad] == 0)
    assert {k: v.item() for k, v in metrics_nan.items()} == pytest.approx({k: v.item() for k, v in metrics.items()})
    # a batch of padding only: a zero loss, no gradient
    none = torch.zeros_like(mask)
    loss_empty, metrics_empty = POLICY_LOSSES.get("prime_rl")(dirty, nan(old), nan(adv), none, cfg(), token_mean)
    assert loss_empty.item() == 0.0 and metrics_empty["clip_frac"].item() == 0.0


def test_without_its_kl_term_it_has_dppo_tvs_gradient():
    # the same mask; a kept token's gradient -A r grad log pi, dppo_tv's below its ratio cap
    logp, old, adv, mask = random_batch(7)
    grads = []
    for name, kw in (("prime_rl", {"kl_tau": 0.0}), ("dppo_tv", {"dppo_ratio_cap": 1e4})):
        x = logp.clone().requires_grad_()
        loss, metrics = POLICY_LOSSES.get(name)(x, old, adv, mask, cfg(**kw), token_mean)
        grads.append((torch.autograd.grad(loss, x)[0], metrics["clip_frac"]))
    assert torch.allclose(grads[0][0], grads[1][0], rtol=1e-12, atol=1e-15)
    assert grads[0][1] == grads[1][1]


def test_the_preset_is_prime_rls_defaults():
    cfg_ = resolve_algorithm("prime_rl")
    assert (cfg_.policy_loss, cfg_.advantage, cfg_.aggregation) == ("prime_rl", "group_mean", "token_mean")
    assert (cfg_.eps_low, cfg_.eps_high, cfg_.adv_tau, cfg_.kl_tau) == (0.2, 0.2, 1.0, 1e-3)
    assert cfg_.drop_degenerate and (cfg_.kl_placement, cfg_.mismatch) == ("none", "none")
    # the ratio is against the sampler's own log-probs in any precision: never recomputed
    assert cfg_.old_logprobs == "sampler"
    assert not recomputes_old_logprobs(cfg_, {torch.float32}) and not recomputes_old_logprobs(cfg_, {torch.bfloat16})
    # the fields are its own: another loss refuses them
    with pytest.raises(ConfigError, match="kl_tau is read by .*policy_loss=prime_rl"):
        resolve_algorithm("grpo", {"kl_tau": 0.01})


# --- the defaults issue 35 found mislabelled ---


def test_dppo_preset_caps_its_ratio_as_verls_dppo_example():
    # verl examples/dppo_trainer/run_qwen3_30b_a3b_megatron.sh line 79 (at 1dda039): clip_ratio_c=10000
    dppo = resolve_algorithm("dppo")
    assert dppo.dppo_ratio_cap == 1e4
    # A = +1, a token 1e-5 -> 0.1 (ratio 1e4, change 0.1 <= 0.15): kept, weight exactly the cap;
    # 1e-6 -> 0.1 (ratio 1e5): capped at 1e4
    for old_prob, weight in ((1e-5, 1e4), (1e-6, 1e4), (0.05, 2.0)):
        logp = torch.tensor([[math.log(0.1)]], dtype=F64, requires_grad=True)
        old = torch.tensor([[math.log(old_prob)]], dtype=F64)
        loss, _ = POLICY_LOSSES.get("dppo_tv")(
            logp, old, torch.ones(1, 1, dtype=F64), torch.ones(1, 1, dtype=F64), dppo, token_mean
        )
        loss.backward()
        assert logp.grad.item() == pytest.approx(-weight, rel=1e-9)


def test_kl_cov_keeps_the_papers_7b_setting_and_takes_verls_config_defaults_as_overrides():
    assert (resolve_algorithm("kl_cov").kl_cov_ratio, resolve_algorithm("kl_cov").kl_cov_coef) == (2e-3, 1.0)
    verl = resolve_algorithm("kl_cov", {"kl_cov_ratio": 2e-4, "kl_cov_coef": 0.1})
    assert (verl.kl_cov_ratio, verl.kl_cov_coef) == (2e-4, 0.1)
    # on a testbed minibatch of 64 tokens both ks penalise one token (max(1, floor(k * n))): 2e-3
    # first picks two tokens at 1000
    score = torch.arange(64, dtype=F64).view(8, 8)
    mask = torch.ones(8, 8, dtype=F64)
    for k in (2e-3, 2e-4):
        assert largest(score, mask.bool(), k, mask).sum() == 1
    big = torch.ones(40, 25, dtype=F64)
    assert largest(torch.arange(1000, dtype=F64).view(40, 25), big.bool(), 2e-3, big).sum() == 2
