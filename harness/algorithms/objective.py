"""What one RL update minimises, as one pure function of tensors: the policy loss, the KL term
the placement puts in the loss, the entropy bonus and the critic's value loss. The RL step
calls it on each minibatch; the tests and the no-op probe call it on hand-made tensors.

Also the token rewards the advantages start from: the verifier's score on each sequence's
last real token, minus the KL penalty the placement puts in the reward.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from harness.algorithms.aggregation import Aggregator
from harness.algorithms.config import RLConfig
from harness.algorithms.critic import value_loss
from harness.algorithms.kl import kl_estimate, kl_weights
from harness.algorithms.parts import POLICY_LOSSES


@dataclass
class UpdateBatch:
    """One minibatch as the loss sees it; every tensor is [B, T] over completion positions."""

    logprobs: Tensor  # the current policy's; carries the gradient
    old_logprobs: Tensor  # the sampling policy's
    ref_logprobs: Tensor  # the frozen reference's
    advantages: Tensor
    mask: Tensor  # 1 on completion tokens, 0 on padding
    entropy: Tensor  # the current policy's per-token entropy
    values: Tensor | None = None  # the critic's, with gradient (critic arms only)
    old_values: Tensor | None = None
    returns: Tensor | None = None


def token_rewards(scores: Tensor, mask: Tensor, kl_tokens: Tensor, cfg: RLConfig) -> Tensor:
    """Each sequence's score on its last real token, minus the placement's in-reward KL."""
    last = (mask.cumsum(1) == mask.sum(1, keepdim=True)) & mask.bool()
    rewards = last.float() * scores[:, None]
    weight = kl_weights(cfg).in_reward
    if weight:
        rewards = rewards - weight * kl_tokens * mask
    return rewards


def update_loss(batch: UpdateBatch, cfg: RLConfig, aggregate: Aggregator) -> tuple[Tensor, dict[str, Tensor]]:
    """The scalar one optimiser step minimises, and its parts as ``train/...`` metrics (detached
    0-d tensors, so that computing them forces no wait on the device).

    ``policy + w_kl * KL + vf_coef * value - entropy_coef * entropy``; a term whose weight is 0
    (or, for the value loss, without a critic) is left out of the graph, not multiplied by 0.
    """
    policy, parts = POLICY_LOSSES.get(cfg.policy_loss)(
        batch.logprobs, batch.old_logprobs, batch.advantages, batch.mask, cfg, aggregate
    )
    metrics = {f"train/{k}": v for k, v in parts.items()}
    metrics["train/policy_loss"] = policy.detach()
    loss = policy
    weight = kl_weights(cfg).in_loss
    if weight:
        loss = loss + weight * aggregate(kl_estimate(batch.logprobs, batch.ref_logprobs, cfg.kl_estimator), batch.mask)
    entropy = aggregate(batch.entropy, batch.mask)
    metrics["train/entropy"] = entropy.detach()
    if cfg.entropy_coef:
        loss = loss - cfg.entropy_coef * entropy
    if batch.values is not None:
        v_loss, v_parts = value_loss(
            batch.values, batch.old_values, batch.returns, batch.mask, cfg.value_clip, aggregate
        )
        loss = loss + cfg.vf_coef * v_loss
        metrics["train/value_loss"] = v_loss.detach()
        metrics.update({f"train/{k}": v for k, v in v_parts.items()})
    metrics["train/loss"] = loss.detach()
    return loss, metrics

