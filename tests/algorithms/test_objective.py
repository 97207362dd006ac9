"""The update loss (policy + KL-in-loss + value - entropy) and the token rewards, by hand."""

import math

import pytest
import torch

from harness.algorithms.aggregation import make_aggregator
from harness.algorithms.config import RLConfig
from harness.algorithms.kl import kl_weights
from harness.algorithms.objective import UpdateBatch, token_rewards, update_loss
from harness.algorithms.parts import KL_PLACEMENTS


def one_token_batch(ratio: float, advantage: float, ref_gap: float, **extra) -> UpdateBatch:
    """One sequence of one real token (and one padded position) at ``ratio`` = pi/pi_old."""
    logp = torch.tensor([[math.log(0.5), 0.0]], dtype=torch.float64, requires_grad=True)
    old = logp.detach() - torch.tensor([[math.log(ratio), 0.0]], dtype=torch.float64)
    ref = logp.detach() + torch.tensor([[ref_gap, 0.0]], dtype=torch.float64)
    return UpdateBatch(
        logprobs=logp,
        old_logprobs=old,
        ref_logprobs=ref,
        advantages=torch.tensor([[advantage, 0.0]], dtype=torch.float64),
        mask=torch.tensor([[1.0, 0.0]], dtype=torch.float64),
        entropy=torch.tensor([[0.7, 9.0]], dtype=torch.float64, requires_grad=True),
        **extra,
    )


def test_every_term_by_hand():
    # ratio 1.5 clipped at 1.2 for A = 2: policy term -min(3.0, 2.4) = -2.4
    # k3 with d = ref - logp = 0.1: e^0.1 - 0.1 - 1 = 0.005170918..., weight 0.04 in the loss
    # entropy 0.7 (the padded 9.0 never counts) with coefficient 0.01
    cfg = RLConfig(name="t", kl_placement="loss", kl_coef=0.04, entropy_coef=0.01)
    batch = one_token_batch(ratio=1.5, advantage=2.0, ref_gap=0.1)
    loss, metrics = update_loss(batch, cfg, make_aggregator(cfg, 8))
    k3 = math.exp(0.1) - 0.1 - 1
    assert metrics["train/policy_loss"] == pytest.approx(-2.4)
    assert loss.item() == pytest.approx(-2.4 + 0.04 * k3 - 0.01 * 0.7)
    assert metrics["train/entropy"] == pytest.approx(0.7)
    assert metrics["train/loss"] == pytest.approx(loss.item())
    assert metrics["train/clip_frac"] == 1.0


def test_value_term_by_hand():
    # V = 0.5, V_old = 0.0, R = 1.0, clip 0.2: max((0.5-1)^2, (0.2-1)^2) / 2 = 0.32; vf_coef 0.5
    cfg = RLConfig(name="t", advantage="gae", critic="value_head", vf_coef=0.5, value_clip=0.2)
    values = torch.tensor([[0.5, 0.0]], dtype=torch.float64, requires_grad=True)
    batch = one_token_batch(
        ratio=1.0,
        advantage=1.0,
        ref_gap=0.0,
        values=values,
        old_values=torch.zeros(1, 2, dtype=torch.float64),
        returns=torch.tensor([[1.0, 0.0]], dtype=torch.float64),
    )
    loss, metrics = update_loss(batch, cfg, make_aggregator(cfg, 8))
    assert metrics["train/value_loss"] == pytest.approx(0.32)
    assert loss.item() == pytest.approx(-1.0 + 0.5 * 0.32)
    assert metrics["train/value_clip_frac"] == 1.0


@pytest.mark.parametrize("placement", KL_PLACEMENTS.names())
def test_each_placement_puts_kl_in_exactly_the_reward_or_the_loss(placement):
    coef = 0.0 if placement == "none" else 0.1
    cfg = RLConfig(name="t", kl_placement=placement, kl_coef=coef, kl_estimator="k1")
    weights = kl_weights(cfg)
    batch = one_token_batch(ratio=1.0, advantage=1.0, ref_gap=-0.3)  # k1 = logp - ref = 0.3
    loss, metrics = update_loss(batch, cfg, make_aggregator(cfg, 8))
    assert loss.item() - metrics["train/policy_loss"] == pytest.approx(weights.in_loss * 0.3)
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    rewards = token_rewards(torch.tensor([1.0]), mask, torch.full((1, 3), 0.3), cfg)
    assert rewards[0].tolist() == pytest.approx([-weights.in_reward * 0.3, 1.0 - weights.in_reward * 0.3, 0.0])
    assert (weights.in_reward, weights.in_loss) in {(0.0, 0.0), (coef, 0.0), (0.0, coef)}


def test_padding_gets_no_gradient_from_any_term():
    cfg = RLConfig(name="t", kl_placement="loss", kl_coef=0.04, entropy_coef=0.01)
    batch = one_token_batch(ratio=1.1, advantage=-1.0, ref_gap=0.2)
    loss, _ = update_loss(batch, cfg, make_aggregator(cfg, 8))
    loss.backward()
    assert batch.logprobs.grad[0, 1].item() == 0.0 and batch.entropy.grad[0, 1].item() == 0.0
    assert batch.logprobs.grad[0, 0].item() != 0.0


def test_a_zero_weight_term_is_left_out_of_the_graph():
    """entropy_coef 0: the entropy gets no gradient at all (not a gradient of 0 through it)."""
    cfg = RLConfig(name="t")
    batch = one_token_batch(ratio=1.0, advantage=1.0, ref_gap=0.0)
    loss, _ = update_loss(batch, cfg, make_aggregator(cfg, 8))
    loss.backward()
    assert batch.entropy.grad is None


def test_the_entropy_metric_is_one_token_mean_whatever_the_aggregation():
    # two sequences of 1 and 3 real tokens, entropies 0.4 | 1.0, 1.0, 1.0: token mean 3.4 / 4 = 0.85,
    # where a mean of sequence means would read 0.7 and a sum over a constant 0.425 (constant 8)
    logp = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
    entropy = torch.tensor([[0.4, 9.0, 9.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
    batch = UpdateBatch(
        logprobs=logp,
        old_logprobs=logp.detach(),
        ref_logprobs=logp.detach(),
        advantages=torch.ones(2, 3, dtype=torch.float64),
        mask=mask,
        entropy=entropy,
    )
    seen = {}
    for aggregation in ("seq_mean_token_mean", "token_mean", "seq_mean_token_sum_norm"):
        cfg = RLConfig(name="t", aggregation=aggregation, entropy_coef=0.01)
        _loss, metrics = update_loss(batch, cfg, make_aggregator(cfg, 8))
        seen[aggregation] = (metrics["train/entropy"].item(), metrics["train/entropy_bonus"].item())
    assert {round(e, 12) for e, _bonus in seen.values()} == {0.85}
    assert seen["seq_mean_token_mean"][1] == pytest.approx(0.7)  # the loss's term keeps its aggregation
    assert seen["seq_mean_token_sum_norm"][1] == pytest.approx(3.4 / 2 / 8)
