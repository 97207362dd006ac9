"""AReaL's decoupled PPO objective (the ``decoupled_ppo`` preset): the clipped ratio against the
proximal policy (the trainer's log-probs recomputed at the start of the step: the update's
old log-probs), each token's term weighed by proximal / behaviour (the sampler's log-probs,
perhaps steps stale), masked where it passes the cap; by hand and against AReaL's own formula
(``ppo_actor_loss_fn``, areal/utils/functional.py at 56bad8b21a7307fbe53c2c5ad8311a8aa21ffe45)."""

import math

import pytest
import torch

from harness.algorithms.aggregation import make_aggregator
from harness.algorithms.objective import UpdateBatch, update_loss
from harness.algorithms.old_logprobs import recomputes_old_logprobs
from harness.algorithms.presets import resolve_algorithm

F64 = torch.float64
#: row 1: A = +1, pi / prox = (1.1, 1.3, 0.7), prox / behav = (1, 6, 0.5); row 2: A = -1,
#: pi / prox = (1.1, 0.7), prox / behav = (2, 1), then padding
PROX = torch.log(torch.tensor([[0.5, 0.4, 0.2], [0.3, 0.6, 0.9]], dtype=F64))
RATIO = torch.tensor([[1.1, 1.3, 0.7], [1.1, 0.7, 1.0]], dtype=F64)
BEHAVIOUR_WEIGHT = torch.tensor([[1.0, 6.0, 0.5], [2.0, 1.0, 1.0]], dtype=F64)
ADV = torch.tensor([[1.0] * 3, [-1.0] * 3], dtype=F64)
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], dtype=F64)


def _areal(logprobs, proximal, behaviour, advantages, mask, eps_clip, cap):
    """AReaL's ``ppo_actor_loss_fn`` as that file writes it (no dual clip, eps_clip_higher unset)."""
    loss_mask = mask.bool()
    ratio = torch.where(loss_mask, torch.exp(logprobs - proximal), 0)
    clipped = torch.clamp(ratio, 1.0 - eps_clip, 1.0 + eps_clip)
    pg_loss = torch.max(-advantages * ratio, -advantages * clipped)
    behav_imp_weight = (proximal - behaviour).exp()
    behav_mask = (behav_imp_weight <= cap).logical_and(loss_mask)
    pg_loss = pg_loss * torch.where(behav_mask, behav_imp_weight, 0.0)
    return torch.where(loss_mask, pg_loss, 0).sum() / (loss_mask.count_nonzero() or 1)


def _ours(cfg, logprobs, proximal, behaviour):
    batch = UpdateBatch(
        logprobs=logprobs,
        old_logprobs=proximal,
        ref_logprobs=proximal,
        advantages=ADV,
        mask=MASK,
        entropy=torch.zeros_like(MASK),
        sampler_logprobs=behaviour,
    )
    return update_loss(batch, cfg, make_aggregator(cfg, 3))[0]


def test_the_preset_is_the_decoupled_objective():
    cfg = resolve_algorithm("decoupled_ppo")
    assert (cfg.policy_loss, cfg.aggregation, cfg.kl_placement) == ("clipped", "token_mean", "none")
    assert (cfg.mismatch, cfg.mismatch_cap, cfg.mismatch_floor) == ("token_mask", 5.0, 0.0)
    # the proximal log-probs are the trainer's, recomputed at the start of every step, in any precision
    assert recomputes_old_logprobs(cfg, {torch.float32}) and recomputes_old_logprobs(cfg, {torch.bfloat16})


def test_by_hand():
    cfg = resolve_algorithm("decoupled_ppo")
    logprobs = (PROX + RATIO.log()).requires_grad_()
    loss = _ours(cfg, logprobs, PROX, PROX - BEHAVIOUR_WEIGHT.log())
    # row 1 (A = 1): -min(r, clip(r, 0.8, 1.2)) = -1.1, -1.2, -0.7, weighed 1, 0 (6 > cap 5), 0.5
    # row 2 (A = -1): max(r, clip(r)) = 1.1, 0.8, weighed 2, 1; the mean over the 5 tokens
    assert loss.item() == pytest.approx((-1.1 - 0.35 + 2.2 + 0.8) / 5)
    (grad,) = torch.autograd.grad(loss, logprobs)
    # d/dlogp of -w r A / 5 where the ratio is not clipped (d r / d logp = r); 0 where clipped or masked
    expected = torch.tensor([[-1.1, 0.0, -0.35], [2.2, 0.0, 0.0]], dtype=F64) / 5
    assert torch.allclose(grad, expected)


@pytest.mark.parametrize("seed", range(5))
def test_against_areal_formula_on_random_numbers(seed):
    cfg = resolve_algorithm("decoupled_ppo")
    gen = torch.Generator().manual_seed(seed)
    proximal = -torch.rand(2, 3, generator=gen, dtype=F64) * 3
    logprobs = proximal + (torch.rand(2, 3, generator=gen, dtype=F64) - 0.5) * 0.8
    behaviour = proximal - (torch.rand(2, 3, generator=gen, dtype=F64) - 0.3) * 4  # some weights past the cap
    ours = _ours(cfg, logprobs, proximal, behaviour).item()
    theirs = _areal(logprobs, proximal, behaviour, ADV, MASK, eps_clip=0.2, cap=5.0).item()
    assert ours == pytest.approx(theirs, rel=1e-12, abs=1e-12)
    assert math.isfinite(ours)
