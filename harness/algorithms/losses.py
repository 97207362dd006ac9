"""Policy losses, to be minimised.

Every registered loss is ``fn(logprobs, old_logprobs, advantages, mask, cfg, aggregate) ->
(loss, metrics)``: ``logprobs`` [B, T] carry the gradient, ``old_logprobs`` are the sampling
policy's, ``aggregate`` turns per-token terms into a scalar (``aggregation.make_aggregator``).
Metrics always hold ``clip_frac`` (share of tokens whose ratio the loss clipped) and
``ratio_mean`` (mean per-token ratio pi/pi_old), both over masked tokens.
"""

from __future__ import annotations

import torch
from torch import Tensor

from harness.algorithms.aggregation import Aggregator
from harness.algorithms.config import RLConfig
from harness.algorithms.registry import Registry

#: ``reads``: the config fields a loss reads (see ``parts.py``)
POLICY_LOSSES = Registry("policy loss", meta_keys=("reads",))


def _log_ratio(logprobs: Tensor, old_logprobs: Tensor, mask: Tensor) -> Tensor:
    """log(pi/pi_old), 0 on padding so garbage there can never overflow into a NaN gradient."""
    return torch.where(mask.bool(), logprobs - old_logprobs, 0.0)


def _clip_surrogate(
    ratio: Tensor, advantages: Tensor, cfg: RLConfig
) -> tuple[Tensor, Tensor]:
    """``min(r * A, clip(r, 1-eps_low, 1+eps_high) * A)`` and where the clipped branch won."""
    unclipped = ratio * advantages
    bounded = torch.clamp(ratio, 1 - cfg.eps_low, 1 + cfg.eps_high) * advantages
    return torch.minimum(unclipped, bounded), bounded < unclipped


def _metrics(ratio: Tensor, clipped: Tensor, mask: Tensor) -> dict[str, float]:
    on = mask.bool()
    n = on.sum().clamp(min=1)
    return {
        "clip_frac": float((clipped & on).sum() / n),
        "ratio_mean": float(torch.where(on, ratio.detach(), 0.0).sum() / n),
    }


@POLICY_LOSSES.register("clipped", reads=("eps_low", "eps_high", "dual_clip"))
def clipped(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    cfg: RLConfig,
    aggregate: Aggregator,
) -> tuple[Tensor, dict[str, float]]:
    """PPO clipped surrogate (Schulman et al. 2017), bounds ``[1-eps_low, 1+eps_high]`` (DAPO's
    clip-higher, Yu et al. 2025); with ``dual_clip = c``, negative-advantage terms are bounded
    by ``c * A`` (Ye et al. 2020, dual-clip PPO).
    """
    ratio = torch.exp(_log_ratio(logprobs, old_logprobs, mask))
    surrogate, clipped_tokens = _clip_surrogate(ratio, advantages, cfg)
    if cfg.dual_clip is not None:
        floor = cfg.dual_clip * advantages
        dual = (advantages < 0) & (surrogate < floor)
        surrogate, clipped_tokens = torch.where(dual, floor, surrogate), clipped_tokens | dual
    return aggregate(-surrogate, mask), _metrics(ratio, clipped_tokens, mask)


@POLICY_LOSSES.register("cispo", reads=("eps_low", "eps_high"))
def cispo(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    cfg: RLConfig,
    aggregate: Aggregator,
) -> tuple[Tensor, dict[str, float]]:
    """CISPO (MiniMax-M1, arXiv:2506.13585): ``-sg(clip(ratio)) * A * logprob``.

    The importance weight is clipped and detached, so every token keeps a gradient; only its
    size is capped. The loss value itself is not meaningful, its gradient is.
    """
    ratio = torch.exp(_log_ratio(logprobs, old_logprobs, mask))
    weight = torch.clamp(ratio, 1 - cfg.eps_low, 1 + cfg.eps_high).detach()
    per_token = -weight * advantages * logprobs
    return aggregate(per_token, mask), _metrics(ratio, weight != ratio, mask)


@POLICY_LOSSES.register("gspo", reads=("eps_low", "eps_high"))
def gspo(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    cfg: RLConfig,
    aggregate: Aggregator,
) -> tuple[Tensor, dict[str, float]]:
    """GSPO (Zheng et al. 2025, arXiv:2507.18071): the clipped surrogate on the sequence ratio
    ``s_i = exp(mean_t log(pi/pi_old))``, shared by every token of sequence ``i``.
    """
    log_ratio = _log_ratio(logprobs, old_logprobs, mask)
    lengths = mask.sum(dim=1, keepdim=True).clamp(min=1)
    seq_ratio = torch.exp(log_ratio.sum(dim=1, keepdim=True) / lengths)
    surrogate, clipped_tokens = _clip_surrogate(seq_ratio, advantages, cfg)
    return aggregate(-surrogate, mask), _metrics(log_ratio.exp(), clipped_tokens, mask)


@POLICY_LOSSES.register("is", reads=())
def importance_sampling(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    cfg: RLConfig,
    aggregate: Aggregator,
) -> tuple[Tensor, dict[str, float]]:
    """Importance-sampled policy gradient ``-ratio * A``, no clip; REINFORCE when on-policy
    (Williams 1992).
    """
    ratio = torch.exp(_log_ratio(logprobs, old_logprobs, mask))
    never_clipped = torch.zeros_like(mask, dtype=torch.bool)
    return aggregate(-ratio * advantages, mask), _metrics(ratio, never_clipped, mask)
