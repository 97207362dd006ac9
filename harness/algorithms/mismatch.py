"""The sampler-trainer mismatch: importance weights of the trainer's old log-probs against the
sampler's, applied to the policy loss of every token.

The sampler (vLLM in TRL and verl; here the cached decode loop) and a training forward pass score
the same tokens differently: by about 2e-7 per token in fp32 on the CPU, by up to a few 1e-3 in
bf16 on a GPU. The tokens were drawn from the sampler's distribution ``mu``, while the loss's
importance ratio is against the trainer's ``pi_old``; weighing each token's policy term by
``w = pi_old / mu`` corrects the gap (Yao et al. 2025, "Your Efficient RL Framework Secretly
Brings You Off-Policy RL Training"). The raw weight has heavy tails, so every part bounds it:

- ``token_truncate``: ``w_t = min(pi_old/mu, C)`` per token (TIS; verl ``rollout_is=token``, TRL
  ``token_truncate``);
- ``sequence_truncate``: ``w_i = min(prod_t pi_old/mu, C)`` on every token of row ``i``;
- ``token_mask``: ``w_t = pi_old/mu`` where ``floor <= w_t <= C``, else 0 (MIS, Liu, Li et al. 2025,
  "When Speed Kills Stability"; with a floor, IcePop of Ring-1T, Ling Team 2025: [0.5, 5]);
- ``sequence_mask``: the sequence's ``w_i`` where inside the bounds, else 0 for the whole row (TRL's
  default, C = 3).

``C`` is ``mismatch_cap``, the floor ``mismatch_floor``. Every weight is detached: it changes the
measure, not the objective. A masked token keeps its place in the loss's denominator (verl and TRL
zero the weight, not the mask). The log-ratio (or a sequence's sum of them) is clamped to +-20
before ``exp``, as verl's ``SAFETY_BOUND``, so ``prod_t`` over a long sequence cannot overflow.

Every part is ``fn(old_logprobs, sampler_logprobs, mask, cfg) -> (weights [B, T], metrics)``; the
metrics are those verl logs for the mismatch: ``mismatch_kl`` (k1, the mean of ``log mu - log
pi_old``: KL(mu || pi_old)), ``mismatch_k3`` (the mean of ``w - log w - 1``, never negative),
``mismatch_frac`` (tokens whose weight the part truncated or masked) and ``mismatch_weight_mean``.
A part whose metadata says it ``compares`` makes the step recompute the old log-probs (see
``old_logprobs.py``): without them there is nothing to compare.
"""

from __future__ import annotations

import torch
from torch import Tensor

from harness.algorithms.config import RLConfig
from harness.algorithms.losses import masked_share
from harness.algorithms.parts import MISMATCH

#: a token's (or a sequence's) log-weight is clamped to +-this before ``exp`` (verl: 20)
LOG_WEIGHT_BOUND = 20.0
_TIS = "TIS: Yao et al. 2025, Your Efficient RL Framework Secretly Brings You Off-Policy RL Training"
_MIS = (
    "MIS: Liu, Li et al. 2025, When Speed Kills Stability; IcePop: Ling Team 2025, Every Step Evolves "
    "(Ring-1T), band [0.5, 5]"
)


def mismatch_weights(
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cfg: RLConfig
) -> tuple[Tensor, dict[str, Tensor]]:
    """The weight of every token's policy term under ``cfg.mismatch``, and its metrics."""
    return MISMATCH.get(cfg.mismatch)(old_logprobs, sampler_logprobs, mask, cfg)


@MISMATCH.implements("none", cites="no correction")
def no_correction(
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cfg: RLConfig
) -> tuple[Tensor, dict[str, Tensor]]:
    return torch.ones_like(mask), {}


def _raw_weights(
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, per_sequence: bool
) -> tuple[Tensor, Tensor]:
    """``pi_old/mu`` per token, or the product over each row on every token of the row, from the
    log-weights clamped to ``+-LOG_WEIGHT_BOUND``; and the token log-weights (0 on padding)."""
    token = torch.where(mask.bool(), old_logprobs - sampler_logprobs, 0.0).detach()
    log_weights = token.sum(dim=1, keepdim=True).expand_as(mask) if per_sequence else token
    return torch.exp(torch.clamp(log_weights, -LOG_WEIGHT_BOUND, LOG_WEIGHT_BOUND)), token


def _metrics(weights: Tensor, changed: Tensor, token_log_weights: Tensor, mask: Tensor) -> dict[str, Tensor]:
    on = mask.bool()
    n = on.sum().clamp(min=1)
    bounded = torch.clamp(token_log_weights, -LOG_WEIGHT_BOUND, LOG_WEIGHT_BOUND)
    return {
        "mismatch_kl": torch.where(on, -token_log_weights, 0.0).sum() / n,
        "mismatch_k3": torch.where(on, torch.expm1(bounded) - bounded, 0.0).sum() / n,
        "mismatch_frac": masked_share(changed, mask),
        "mismatch_weight_mean": torch.where(on, weights, 0.0).sum() / n,
    }


def _truncate(
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cfg: RLConfig, per_sequence: bool
) -> tuple[Tensor, dict[str, Tensor]]:
    raw, token = _raw_weights(old_logprobs, sampler_logprobs, mask, per_sequence)
    weights = torch.where(mask.bool(), torch.clamp(raw, max=cfg.mismatch_cap), 0.0)
    return weights, _metrics(weights, raw > cfg.mismatch_cap, token, mask)


def _mask(
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cfg: RLConfig, per_sequence: bool
) -> tuple[Tensor, dict[str, Tensor]]:
    raw, token = _raw_weights(old_logprobs, sampler_logprobs, mask, per_sequence)
    outside = (raw > cfg.mismatch_cap) | (raw < cfg.mismatch_floor)
    weights = torch.where(mask.bool() & ~outside, raw, 0.0)
    return weights, _metrics(weights, outside, token, mask)


@MISMATCH.implements("token_truncate", cites=f"{_TIS}; verl rollout_is=token, TRL token_truncate")
def token_truncate(
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cfg: RLConfig
) -> tuple[Tensor, dict[str, Tensor]]:
    """``min(pi_old/mu, C)`` per token."""
    return _truncate(old_logprobs, sampler_logprobs, mask, cfg, per_sequence=False)


@MISMATCH.implements("sequence_truncate", cites=f"{_TIS}; verl rollout_is=sequence, TRL sequence_truncate")
def sequence_truncate(
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cfg: RLConfig
) -> tuple[Tensor, dict[str, Tensor]]:
    """``min(prod_t pi_old/mu, C)`` on every token of the row."""
    return _truncate(old_logprobs, sampler_logprobs, mask, cfg, per_sequence=True)


@MISMATCH.implements("token_mask", cites=f"{_MIS}; TRL token_mask")
def token_mask(
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cfg: RLConfig
) -> tuple[Tensor, dict[str, Tensor]]:
    """``pi_old/mu`` per token inside ``[floor, C]``, 0 outside."""
    return _mask(old_logprobs, sampler_logprobs, mask, cfg, per_sequence=False)


@MISMATCH.implements("sequence_mask", cites=f"{_MIS}; TRL sequence_mask (its default)")
def sequence_mask(
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cfg: RLConfig
) -> tuple[Tensor, dict[str, Tensor]]:
    """The row's ``prod_t pi_old/mu`` inside ``[floor, C]`` on each of its tokens, else 0 on all."""
    return _mask(old_logprobs, sampler_logprobs, mask, cfg, per_sequence=True)


# issue 35: AReaL's objectives for asynchronous training
_M2PO = "M2PO: Zheng et al. 2025, Prosperity before Collapse (arXiv:2510.01161); AReaL m2_threshold"


def m2po_keep(token_log_weights: Tensor, mask: Tensor, threshold: float) -> Tensor:
    """The tokens M2PO keeps (bool [B, T]): of the batch's tokens, sorted by their second moment
    ``(log pi_old/mu)^2`` from the largest, the first ``k`` are dropped, ``k`` the first index at
    which the mean of the rest is below ``threshold``; where none is, all but the smallest (AReaL
    ``_apply_m2po_masking`` and ``_get_m2po_loss_mask``, areal/trainer/ppo/actor.py@4aef98d lines
    769-850). ``token_log_weights`` is 0 on padding; it is clamped to +-20 first, as every
    log-weight here (AReaL squares the raw difference). The sort is stable, so ties keep their order."""
    on = mask.bool()
    second = torch.clamp(token_log_weights, -LOG_WEIGHT_BOUND, LOG_WEIGHT_BOUND).square()[on]
    n = second.numel()
    if n == 0:
        return on
    ordered, order = torch.sort(second, descending=True, stable=True)
    rest_mean = ordered.flip(0).cumsum(0).flip(0) / torch.arange(n, 0, -1, device=ordered.device, dtype=ordered.dtype)
    below = rest_mean < threshold
    dropped = torch.where(below.any(), below.int().argmax(), n - 1)
    kept_in_order = torch.arange(n, device=ordered.device) >= dropped
    kept = torch.empty_like(kept_in_order).scatter_(0, order, kept_in_order)
    return torch.zeros_like(on).masked_scatter_(on, kept)


@MISMATCH.implements("m2po", cites=_M2PO)
def m2po(
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cfg: RLConfig
) -> tuple[Tensor, dict[str, Tensor]]:
    """M2PO (Zheng et al. 2025, Prosperity before Collapse: How Far Can Off-Policy RL Reach with
    Stale Data on LLMs?, arXiv:2510.01161), as AReaL runs it with its decoupled objective: the
    tokens whose second moment ``(log pi_old/mu)^2`` is largest are left out of the loss until the
    mean over the rest is below ``m2_threshold`` (``m2po_keep``); the kept ones are weighed by
    AReaL's behaviour weight ``pi_old/mu`` (``pi_old`` the proximal policy, the trainer's
    recomputed log-probs; ``mu`` the sampler's, perhaps steps stale), 0 outside ``[floor, C]``
    as ``token_mask``. AReaL ``grpo_loss_fn`` (areal/trainer/ppo/actor.py@4aef98d line 448) narrows
    the loss mask before ``ppo_actor_loss_fn`` (areal/utils/functional/functional.py@4aef98d line
    483) counts it, so its token mean divides by the kept tokens while a token the behaviour cap
    masks stays counted; here the denominators are the aggregation's, so each kept token is
    weighed by ``n / n_kept`` instead (the batch's tokens over those M2PO keeps): the same loss
    under ``token_mean`` (AReaL's), a batch-wide rescale under the other aggregations. The
    selection is over the tokens of the batch the loss sees: a micro-batch, as AReaL's loss
    function sees its micro-batch. Defaults: ``m2_threshold`` 0.04 and the cap 5 of AReaL's
    examples/math/gsm8k_m2po.yaml@4aef98d (lines 82 and 73).

    Metrics besides the shared ones: ``m2po_frac`` (tokens M2PO left out), ``m2po_m2`` (the mean
    second moment of all tokens) and ``m2po_m2_kept`` (of the kept ones: below the threshold
    unless only one is kept); ``mismatch_frac`` counts a token M2PO or the cap left out.
    """
    raw, token = _raw_weights(old_logprobs, sampler_logprobs, mask, per_sequence=False)
    on = mask.bool()
    keep = m2po_keep(token, mask, cfg.m2_threshold)
    outside = (raw > cfg.mismatch_cap) | (raw < cfg.mismatch_floor)
    scale = on.sum().to(raw.dtype) / keep.sum().clamp(min=1)  # in the weights' dtype (int / int is fp32)
    weights = torch.where(keep & ~outside, raw * scale, 0.0)
    second = torch.clamp(token, -LOG_WEIGHT_BOUND, LOG_WEIGHT_BOUND).square()
    return weights, {
        **_metrics(weights, outside | ~keep, token, mask),
        "m2po_frac": masked_share(~keep, mask),
        "m2po_m2": torch.where(on, second, 0.0).sum() / on.sum().clamp(min=1),
        "m2po_m2_kept": torch.where(keep, second, 0.0).sum() / keep.sum().clamp(min=1),
    }


def _sequence_geomean(
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cfg: RLConfig, truncate: bool
) -> tuple[Tensor, dict[str, Tensor]]:
    """AReaL's sequence-level rejection sampling on the ratio (``apply_rejection_sampling``,
    areal/utils/functional/functional.py@4aef98d lines 185-426, the 2D padded branch, ``agg``
    mean): every token of row ``i`` weighed by the geometric mean ``g_i = exp(mean_t log(pi_old/mu))``
    over its tokens, which is also what the bounds ``[floor, C]`` judge; outside them the whole
    row is masked (``action=mask``) or ``g_i`` clamped to them (``action=clamp``). The mean
    log-weight is clamped to +-20 before ``exp`` (AReaL sets a non-finite token log-ratio to 0
    and clamps nothing); an all-padding row has no tokens to weigh."""
    token = torch.where(mask.bool(), old_logprobs - sampler_logprobs, 0.0).detach()
    lengths = mask.sum(dim=1, keepdim=True).clamp(min=1)
    mean = torch.clamp(token.sum(dim=1, keepdim=True) / lengths, -LOG_WEIGHT_BOUND, LOG_WEIGHT_BOUND)
    geomean = torch.exp(mean).expand_as(mask)
    outside = (geomean > cfg.mismatch_cap) | (geomean < cfg.mismatch_floor)
    if truncate:
        kept = torch.clamp(geomean, min=cfg.mismatch_floor, max=cfg.mismatch_cap)
    else:
        kept = torch.where(outside, 0.0, geomean)
    weights = torch.where(mask.bool(), kept, 0.0)
    return weights, _metrics(weights, outside, token, mask)


@MISMATCH.implements(
    "sequence_geomean_mask",
    cites="AReaL rejection_sampling level=sequence, metric=ratio, agg=mean, action=mask (arXiv:2505.24298)",
)
def sequence_geomean_mask(
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cfg: RLConfig
) -> tuple[Tensor, dict[str, Tensor]]:
    """The row's geometric mean of ``pi_old/mu`` on each of its tokens inside ``[floor, C]``, else
    0 on all (AReaL's ``rejection_sampling: {level: sequence, metric: ratio}``, its defaults ``agg:
    mean``, ``action: mask``; Fu et al. 2025, AReaL, arXiv:2505.24298). ``sequence_mask`` weighs by
    the product instead, as TRL's."""
    return _sequence_geomean(old_logprobs, sampler_logprobs, mask, cfg, truncate=False)


@MISMATCH.implements(
    "sequence_geomean_truncate",
    cites="AReaL rejection_sampling level=sequence, metric=ratio, agg=mean, action=clamp (arXiv:2505.24298)",
)
def sequence_geomean_truncate(
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cfg: RLConfig
) -> tuple[Tensor, dict[str, Tensor]]:
    """The row's geometric mean of ``pi_old/mu``, clamped to ``[floor, C]``, on each of its tokens
    (AReaL's ``rejection_sampling: {level: sequence, metric: ratio, action: clamp}``, its lower
    bound 0 unless set). ``sequence_truncate`` truncates the product instead."""
    return _sequence_geomean(old_logprobs, sampler_logprobs, mask, cfg, truncate=True)


#: the quantiles of the token ratio pi/mu the step logs (``mismatch/ratio_p05`` ...)
RATIO_QUANTILES = {"p05": 0.05, "p50": 0.5, "p95": 0.95}


def mismatch_measure(trainer_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor) -> dict[str, Tensor]:
    """How far the sampler's log-probs ``mu`` are from the trainer's ``pi`` on the same tokens
    (``mask``), whatever the correction: the mean and max of ``|log pi - log mu|``, the k3
    estimate of KL(mu || pi) (the mean of ``r - 1 - log r`` with ``r = pi/mu``: the tokens were
    drawn from ``mu``; never negative) and quantiles of ``r``. All 0 (the ratios 1) without tokens."""
    on = mask.bool()
    log_ratio = torch.where(on, trainer_logprobs - sampler_logprobs, 0.0).detach().float()
    bounded = torch.clamp(log_ratio, -LOG_WEIGHT_BOUND, LOG_WEIGHT_BOUND)
    n = on.sum().clamp(min=1)
    tokens = bounded[on]
    ratios = tokens.exp() if tokens.numel() else tokens.new_ones(1)
    quantiles = torch.quantile(ratios.double(), ratios.new_tensor(list(RATIO_QUANTILES.values()), dtype=torch.float64))
    return {
        "mismatch/abs_logp_mean": log_ratio.abs().sum() / n,
        "mismatch/abs_logp_max": log_ratio.abs().max() if log_ratio.numel() else log_ratio.new_zeros(()),
        "mismatch/kl_k3": torch.where(on, torch.expm1(bounded) - bounded, 0.0).sum() / n,
        **{f"mismatch/ratio_{name}": q for name, q in zip(RATIO_QUANTILES, quantiles)},
    }
