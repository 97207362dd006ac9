"""What one RL update minimises, as one pure function of tensors: the policy loss, the KL term
the placement puts in the loss, the entropy bonus and the critic's value loss. The RL step
calls it on each minibatch; the tests and the no-op probe call it on hand-made tensors.

The policy loss's per-token terms are weighted before they are aggregated: by the mismatch
correction (``mismatch.py``: the trainer's old log-probs against the sampler's), by the token
filter (``token_filters.py``) and by the off-policy mask (``off_policy_masks.py``: the current
policy's log-probs against the sampler's). All three weights are detached and 1 by default (an
exact no-op).

Also the token rewards the advantages start from: the verifier's score on each sequence's
last real token, minus the KL penalty the placement puts in the reward.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from harness.algorithms.aggregation import Aggregator
from harness.algorithms.config import RLConfig
from harness.algorithms.critic import value_loss
from harness.algorithms.distill import teacher_weights, top1_tail_reverse_kl
from harness.algorithms.kl import kl_estimate, kl_weights
from harness.algorithms.mismatch import mismatch_weights
from harness.algorithms.off_policy_masks import off_policy_mask_weights
from harness.algorithms.parts import POLICY_LOSSES
from harness.algorithms.token_filters import token_filter_weights


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
    sampler_logprobs: Tensor | None = None  # the sampler's, where they differ from the old ones; None: the same
    teacher_logprobs: Tensor | None = None  # the teacher's (issue 35: on-policy distillation); None: no teacher


def token_rewards(scores: Tensor, mask: Tensor, kl_tokens: Tensor, cfg: RLConfig) -> Tensor:
    """Each sequence's score on its last real token, minus the placement's in-reward KL."""
    last = (mask.cumsum(1) == mask.sum(1, keepdim=True)) & mask.bool()
    rewards = last.float() * scores[:, None]
    weight = kl_weights(cfg).in_reward
    if weight:
        rewards = rewards - weight * kl_tokens * mask
    return rewards


def token_mean(values: Tensor, mask: Tensor) -> Tensor:
    """The mean of ``values`` over the policy's tokens (0 where there are none). One definition for
    every arm: a metric aggregated by each arm's own loss aggregation would read differently for
    the same model (GRPO's mean of sequence means against Dr. GRPO's sum over a constant), and
    arms are compared side by side on it."""
    return (values * mask).sum() / mask.sum().clamp(min=1)


def update_loss(batch: UpdateBatch, cfg: RLConfig, aggregate: Aggregator) -> tuple[Tensor, dict[str, Tensor]]:
    """The scalar one optimiser step minimises, and its parts as ``train/...`` metrics (detached
    0-d tensors, so that computing them forces no wait on the device).

    ``policy + w_kl * KL + w_teacher * reverse KL to the teacher + vf_coef * value - entropy_coef *
    entropy``; a term whose weight is 0 (or, for the value loss, without a critic) is left out of
    the graph, not multiplied by 0.
    The policy loss aggregates its per-token terms times the mismatch and token-filter weights.
    A mismatch correction that rejects (``rollout_corr``) returns the mask without the rejected
    tokens, and every term reads that mask, as verl's replaced ``response_mask``: the rejected
    tokens leave the denominators of the policy, KL, entropy and value terms.
    """
    sampler = batch.old_logprobs if batch.sampler_logprobs is None else batch.sampler_logprobs
    correction, mask, correction_metrics = mismatch_weights(batch.old_logprobs, sampler, batch.mask, cfg)
    kept, filter_metrics = token_filter_weights(batch.entropy, mask, cfg)
    in_policy, off_policy_metrics = off_policy_mask_weights(batch.logprobs, sampler, batch.advantages, mask, cfg)
    token_weights = correction * kept * in_policy

    def weighted(per_token: Tensor, loss_mask: Tensor) -> Tensor:
        return aggregate(per_token * token_weights, loss_mask)

    policy, parts = POLICY_LOSSES.get(cfg.policy_loss)(
        batch.logprobs, batch.old_logprobs, batch.advantages, mask, cfg, weighted
    )
    metrics = {
        f"train/{k}": v for k, v in {**parts, **correction_metrics, **filter_metrics, **off_policy_metrics}.items()
    }
    metrics["train/policy_loss"] = policy.detach()
    loss = policy
    weight = kl_weights(cfg).in_loss
    if weight:
        estimate = kl_estimate(batch.logprobs, batch.ref_logprobs, cfg.kl_estimator, batch.old_logprobs)
        loss = loss + weight * aggregate(estimate, mask)
    weight = teacher_weights(cfg).in_loss
    if weight:
        if batch.teacher_logprobs is None:
            raise ValueError(f"distill={cfg.distill} needs the teacher's log-probs, and the batch has none")
        distill = aggregate(top1_tail_reverse_kl(batch.logprobs, batch.teacher_logprobs, mask), mask)
        loss = loss + weight * distill
        metrics["train/distill_loss"] = distill.detach()
    metrics["train/entropy"] = token_mean(batch.entropy.detach(), mask)
    if cfg.entropy_coef:
        bonus = aggregate(batch.entropy, mask)  # the loss's own aggregation, as the other terms
        loss = loss - cfg.entropy_coef * bonus
        metrics["train/entropy_bonus"] = bonus.detach()
    if batch.values is not None:
        v_loss, v_parts = value_loss(batch.values, batch.old_values, batch.returns, mask, cfg.value_clip, aggregate)
        loss = loss + cfg.vf_coef * v_loss
        metrics["train/value_loss"] = v_loss.detach()
        metrics.update({f"train/{k}": v for k, v in v_parts.items()})
    metrics["train/loss"] = loss.detach()
    return loss, metrics
