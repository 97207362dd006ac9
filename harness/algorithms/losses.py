"""Policy losses, to be minimised.

Every registered loss is ``fn(logprobs, old_logprobs, advantages, mask, cfg, aggregate) ->
(loss, metrics)``: ``logprobs`` [B, T] carry the gradient, ``old_logprobs`` are the sampling
policy's, ``aggregate`` turns per-token terms into a scalar (``aggregation.make_aggregator``).
Metrics always hold ``clip_frac`` (share of tokens whose ratio the loss clipped) and
``ratio_mean`` (mean per-token ratio pi/pi_old), both over masked tokens, as detached 0-d tensors
(the step moves them to the host once, at its end).

Every log-ratio is clamped before ``exp``, where the references clamp it, so a ratio far off 1
(a log-ratio of +-100 overflows ``exp`` in fp32) gives a finite loss and a zero gradient from
that token, never inf or NaN: a token's log(pi/pi_old) to ``[-LOG_RATIO_BOUND,
LOG_RATIO_BOUND]`` (verl's ``compute_policy_loss_vanilla`` and ``compute_policy_loss_cispo``,
OpenRLHF's ``PolicyLoss``), GSPO's sequence log-ratio to at most ``SEQ_LOG_RATIO_MAX`` (verl's
``compute_policy_loss_gspo``). Inside the bounds nothing changes (every clip band lies far
inside them); beyond them the ratio stays at the bound and its token gives no gradient.
"""

from __future__ import annotations

import torch
from torch import Tensor

from harness.algorithms.aggregation import Aggregator
from harness.algorithms.config import RLConfig

#: |log(pi/pi_old)| of one token is clamped to this before ``exp`` (verl, OpenRLHF: 20)
LOG_RATIO_BOUND = 20.0
#: GSPO's sequence log-ratio is clamped above to this before ``exp`` (verl: 10; none below)
SEQ_LOG_RATIO_MAX = 10.0


def _log_ratio(logprobs: Tensor, old_logprobs: Tensor, mask: Tensor) -> Tensor:
    """log(pi/pi_old), 0 on padding so garbage there can never overflow into a NaN gradient."""
    return torch.where(mask.bool(), logprobs - old_logprobs, 0.0)


def _ratio(log_ratio: Tensor) -> Tensor:
    """pi/pi_old per token, from the log-ratio clamped to ``+-LOG_RATIO_BOUND``."""
    return torch.exp(torch.clamp(log_ratio, -LOG_RATIO_BOUND, LOG_RATIO_BOUND))


def _clip_surrogate(
    ratio: Tensor, advantages: Tensor, cfg: RLConfig
) -> tuple[Tensor, Tensor]:
    """``min(r * A, clip(r, 1-eps_low, 1+eps_high) * A)`` and where the clipped branch won."""
    unclipped = ratio * advantages
    bounded = torch.clamp(ratio, 1 - cfg.eps_low, 1 + cfg.eps_high) * advantages
    return torch.minimum(unclipped, bounded), bounded < unclipped


def _metrics(ratio: Tensor, clipped: Tensor, mask: Tensor) -> dict[str, Tensor]:
    on = mask.bool()
    n = on.sum().clamp(min=1)
    return {
        "clip_frac": (clipped & on).sum() / n,
        "ratio_mean": torch.where(on, ratio.detach(), 0.0).sum() / n,
    }


def clipped(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    cfg: RLConfig,
    aggregate: Aggregator,
) -> tuple[Tensor, dict[str, Tensor]]:
    """PPO clipped surrogate (Schulman et al. 2017), bounds ``[1-eps_low, 1+eps_high]`` (DAPO's
    clip-higher, Yu et al. 2025); with ``dual_clip = c``, negative-advantage terms are bounded
    by ``c * A`` (Ye et al. 2020, dual-clip PPO). The log-ratio is clamped to +-20 first.
    """
    ratio = _ratio(_log_ratio(logprobs, old_logprobs, mask))
    surrogate, clipped_tokens = _clip_surrogate(ratio, advantages, cfg)
    if cfg.dual_clip is not None:
        floor = cfg.dual_clip * advantages
        dual = (advantages < 0) & (surrogate < floor)
        surrogate, clipped_tokens = torch.where(dual, floor, surrogate), clipped_tokens | dual
    return aggregate(-surrogate, mask), _metrics(ratio, clipped_tokens, mask)


def cispo(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    cfg: RLConfig,
    aggregate: Aggregator,
) -> tuple[Tensor, dict[str, Tensor]]:
    """CISPO (MiniMax-M1, arXiv:2506.13585): ``-sg(clip(ratio)) * A * logprob``.

    The importance weight is clipped and detached, so every token keeps a gradient; only its
    size is capped. The loss value itself is not meaningful, its gradient is. The log-ratio is
    clamped to +-20 first (as verl's), which no clip band reaches.
    """
    ratio = _ratio(_log_ratio(logprobs, old_logprobs, mask))
    weight = torch.clamp(ratio, 1 - cfg.eps_low, 1 + cfg.eps_high).detach()
    per_token = -weight * advantages * logprobs
    return aggregate(per_token, mask), _metrics(ratio, weight != ratio, mask)


def gspo(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    cfg: RLConfig,
    aggregate: Aggregator,
) -> tuple[Tensor, dict[str, Tensor]]:
    """GSPO (Zheng et al. 2025, arXiv:2507.18071): the clipped surrogate on the sequence ratio
    ``s_i = exp(mean_t log(pi/pi_old))``, shared by every token of sequence ``i``. The mean
    log-ratio is clamped above to 10 first, as verl's (below, ``exp`` only underflows to 0).
    """
    log_ratio = _log_ratio(logprobs, old_logprobs, mask)
    lengths = mask.sum(dim=1, keepdim=True).clamp(min=1)
    seq_log_ratio = log_ratio.sum(dim=1, keepdim=True) / lengths
    seq_ratio = torch.exp(torch.clamp(seq_log_ratio, max=SEQ_LOG_RATIO_MAX))
    surrogate, clipped_tokens = _clip_surrogate(seq_ratio, advantages, cfg)
    return aggregate(-surrogate, mask), _metrics(_ratio(log_ratio), clipped_tokens, mask)


def importance_sampling(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    cfg: RLConfig,
    aggregate: Aggregator,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Importance-sampled policy gradient ``-ratio * A``, no clip; REINFORCE when on-policy
    (Williams 1992). The log-ratio is clamped to +-20 first, the bound verl and OpenRLHF use
    for their ratios, so the ratio itself is at most e^20.
    """
    ratio = _ratio(_log_ratio(logprobs, old_logprobs, mask))
    never_clipped = torch.zeros_like(mask, dtype=torch.bool)
    return aggregate(-ratio * advantages, mask), _metrics(ratio, never_clipped, mask)
