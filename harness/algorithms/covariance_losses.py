"""Clip-Cov and KL-Cov (Cui et al. 2025, The Entropy Mechanism of Reinforcement Learning for
Reasoning Language Models, arXiv:2505.22617): policy entropy falls fastest through the tokens
whose log-prob and advantage covary most, so these two losses act on a few of them only,

    c_t = (A_t - mean A) * (log pi_t - mean log pi)

the means over the real tokens of the rows the loss is given. Clip-Cov takes the gradient away
from some tokens of moderately high covariance; KL-Cov puts a ``|log(pi/pi_old)|`` penalty on
the tokens of highest covariance. Same signature as every policy loss (``losses.py``).

Which tokens are chosen depends on the batch the loss sees. With ``train.micro_batch_size``
splitting a minibatch, that is each micro-batch, as verl's per-micro-batch call: the one place
where micro-batching changes what a loss computes, not only its memory.
"""

from __future__ import annotations

import torch
from torch import Tensor

from harness.algorithms.aggregation import Aggregator
from harness.algorithms.config import RLConfig
from harness.algorithms.losses import (
    clamped_ratio,
    clip_surrogate,
    loss_metrics,
    masked_share,
    never,
    token_log_ratio,
)
from harness.algorithms.parts import POLICY_LOSSES


def covariance(logprobs: Tensor, advantages: Tensor, mask: Tensor) -> Tensor:
    """``c_t`` of every token (detached), the means over the masked tokens."""
    on = mask.bool()
    n = on.sum().clamp(min=1)
    logprobs = logprobs.detach()
    mean_advantage = torch.where(on, advantages, 0.0).sum() / n
    mean_logprob = torch.where(on, logprobs, 0.0).sum() / n
    return (advantages - mean_advantage) * (logprobs - mean_logprob)


def largest(score: Tensor, eligible: Tensor, share: float, mask: Tensor) -> Tensor:
    """The ``max(1, floor(share * n))`` eligible tokens of largest ``score`` (fewer where fewer
    are eligible), ``n`` the masked tokens; ties go to the earlier token. No host sync."""
    budget = torch.floor(share * mask.bool().sum(dtype=torch.float64)).clamp(min=1)
    ranked = torch.where(eligible, score, -torch.inf).flatten()
    order = torch.argsort(ranked, descending=True, stable=True)
    rank = torch.empty_like(order).scatter_(0, order, torch.arange(order.numel(), device=order.device))
    return eligible & (rank.view_as(score) < budget)


#: seed of the random keys by which Clip-Cov picks its tokens from the band
PICK_SEED = 20250528


def random_pick(eligible: Tensor, share: float, mask: Tensor) -> Tensor:
    """``max(1, floor(share * n))`` of the eligible tokens (fewer where fewer are eligible), at
    random: those with the smallest keys drawn from a generator seeded with ``PICK_SEED``, one key
    per position. The loss reads no global random state, and one batch gives one loss."""
    generator = torch.Generator(device=eligible.device).manual_seed(PICK_SEED)
    keys = torch.rand(eligible.shape, generator=generator, device=eligible.device)
    return largest(-keys, eligible, share, mask)


@POLICY_LOSSES.implements("clip_cov", cites="Clip-Cov: Cui et al. 2025, The Entropy Mechanism of RL (arXiv:2505.22617)")
def clip_cov(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    cfg: RLConfig,
    aggregate: Aggregator,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Clip-Cov: the clipped surrogate ``-min(r A, clip(r, 1-eps_low, 1+eps_high) A)``, times 0 on
    ``max(1, floor(clip_cov_ratio * n))`` tokens picked at random among those the clip has not cut
    already and whose covariance lies strictly inside ``(clip_cov_lb, clip_cov_ub)`` (all of them
    where fewer): those tokens give no gradient (verl ``compute_policy_loss_clip_cov``; the paper's
    r = 2e-4 and band (1, 5)).

    verl picks with ``torch.randperm`` on torch's global generator; here with fixed-seed keys
    (``random_pick``), so the loss touches no global state and a batch gives one loss; each
    band token is as likely to be picked. ``clip_frac``: tokens clipped or picked (verl's counts
    the picked); ``cov_frac``: the picked. The log-ratio is clamped to +-20 first.
    """
    ratio = clamped_ratio(token_log_ratio(logprobs, old_logprobs, mask))
    surrogate, clipped = clip_surrogate(ratio, advantages, cfg)
    with torch.no_grad():
        cov = covariance(logprobs, advantages, mask)
        band = mask.bool() & ~clipped & (cov > cfg.clip_cov_lb) & (cov < cfg.clip_cov_ub)
        chosen = random_pick(band, cfg.clip_cov_ratio, mask)
    per_token = torch.where(chosen, 0.0, -surrogate)
    metrics = loss_metrics(ratio, clipped | chosen, mask)
    return aggregate(per_token, mask), {**metrics, "cov_frac": masked_share(chosen, mask)}


@POLICY_LOSSES.implements("kl_cov", cites="KL-Cov: Cui et al. 2025, The Entropy Mechanism of RL (arXiv:2505.22617)")
def kl_cov(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    cfg: RLConfig,
    aggregate: Aggregator,
) -> tuple[Tensor, dict[str, Tensor]]:
    """KL-Cov: the unclipped importance-sampled loss ``-r A``, plus ``kl_cov_coef * |log(pi/pi_old)|``
    on the ``max(1, floor(kl_cov_ratio * n))`` tokens of largest covariance (verl
    ``compute_policy_loss_kl_cov``; the paper's k = 2e-3 for its 7B model, 2e-4 for 32B, and
    beta = 1). No clip: ``clip_frac`` is 0; ``cov_frac``: the penalised tokens. The ratio's
    log-ratio is clamped to +-20 first; the penalty reads it unclamped (its gradient is +-coef).
    """
    log_ratio = token_log_ratio(logprobs, old_logprobs, mask)
    ratio = clamped_ratio(log_ratio)
    with torch.no_grad():
        chosen = largest(covariance(logprobs, advantages, mask), mask.bool(), cfg.kl_cov_ratio, mask)
    per_token = -ratio * advantages + torch.where(chosen, cfg.kl_cov_coef * log_ratio.abs(), 0.0)
    metrics = loss_metrics(ratio, never(mask), mask)
    return aggregate(per_token, mask), {**metrics, "cov_frac": masked_share(chosen, mask)}
