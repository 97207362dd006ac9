"""The sampler-trainer mismatch: importance weights of the trainer's old log-probs against the
sampler's, applied to the policy loss of every token.

The sampler (vLLM in TRL and verl; here the cached decode loop) and a training forward pass score
the same tokens differently: by about 2e-7 per token in fp32 on the CPU, by up to a few 1e-3 in
bf16 on a GPU. The tokens were drawn from the sampler's distribution ``mu``, while the loss's
importance ratio is against the trainer's ``pi_old``; weighing each token's policy term by
``w = pi_old / mu`` corrects the gap (Yao et al. 2025, "Your Efficient RL Framework Secretly
Brings You Off-Policy RL Training"). The raw weight has heavy tails, so every part bounds it:

- ``token_truncate``: ``w_t = min(pi_old/mu, C)`` per token (TIS; verl ``rollout_is=token``, TRL
  ``token_truncate``), clamped below at the floor too where one is set (OpenRLHF's ``tis``, [0.5, 5]);
- ``sequence_truncate``: ``w_i = min(prod_t pi_old/mu, C)`` on every token of row ``i``;
- ``token_mask``: ``w_t = pi_old/mu`` where ``floor <= w_t <= C``, else 0 (MIS, Liu, Li et al. 2025,
  "When Speed Kills Stability"; with a floor, IcePop of Ring-1T, Ling Team 2025: [0.5, 5]);
- ``sequence_mask``: the sequence's ``w_i`` where inside the bounds, else 0 for the whole row (TRL's
  default, C = 3);
- ``rollout_corr``: verl's rollout correction: truncated weights per token or per sequence, optionally
  divided by their batch mean, and a rejection by a k1/k2/k3 statistic that removes tokens or whole
  sequences from the loss's mask;
- ``seq_mask_tis``: OpenRLHF's: the token weight ``pi_old/mu`` on the rows whose geometric mean of
  token weights lies inside ``[floor, C]``, 0 on the other rows.

``C`` is ``mismatch_cap``, the floor ``mismatch_floor``. Every weight is detached: it changes the
measure, not the objective. A token masked by a weight of 0 keeps its place in the loss's
denominator (TRL, OpenRLHF and verl's IS weights zero the weight, not the mask); only
``rollout_corr``'s rejection takes tokens out of the mask, as verl's ``rollout_rs`` does. The
log-ratio (or a sequence's sum of them) is clamped to +-20 before ``exp``, as verl's
``SAFETY_BOUND``, so ``prod_t`` over a long sequence cannot overflow.

Every part is ``fn(old_logprobs, sampler_logprobs, mask, cfg) -> (weights [B, T], mask [B, T],
metrics)``: the mask is the loss's mask after the part's rejection (the given one for every part
but ``rollout_corr``, whose rejection removes tokens or whole sequences from it, as verl's does, so
the loss's denominators count only what is left). The metrics are those verl logs for the
mismatch: ``mismatch_kl`` (k1, the mean of ``log mu - log pi_old``: KL(mu || pi_old)),
``mismatch_k3`` (the mean of ``w - log w - 1``, never negative), ``mismatch_frac`` (tokens whose
weight the part truncated or masked) and ``mismatch_weight_mean``; ``rollout_corr`` adds
``mismatch_rejected_frac`` and ``mismatch_rejected_seq_frac`` (verl's ``rollout_rs_masked_fraction``
and ``rollout_rs_seq_masked_fraction``) and ``mismatch_batch_norm_factor``.
A part whose metadata says it ``compares`` makes the step recompute the old log-probs (see
``old_logprobs.py``): without them there is nothing to compare.
"""

from __future__ import annotations

import math

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
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """The weight of every token's policy term under ``cfg.mismatch``, the loss's mask after its
    rejection, and its metrics."""
    return MISMATCH.get(cfg.mismatch)(old_logprobs, sampler_logprobs, mask, cfg)


@MISMATCH.implements("none", cites="no correction")
def no_correction(
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cfg: RLConfig
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    return torch.ones_like(mask), mask, {}


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
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cfg: RLConfig, per_sequence: bool, floor: float
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    raw, token = _raw_weights(old_logprobs, sampler_logprobs, mask, per_sequence)
    weights = torch.where(mask.bool(), torch.clamp(raw, min=floor, max=cfg.mismatch_cap), 0.0)
    return weights, mask, _metrics(weights, (raw > cfg.mismatch_cap) | (raw < floor), token, mask)


def _mask(
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cfg: RLConfig, per_sequence: bool
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    raw, token = _raw_weights(old_logprobs, sampler_logprobs, mask, per_sequence)
    outside = (raw > cfg.mismatch_cap) | (raw < cfg.mismatch_floor)
    weights = torch.where(mask.bool() & ~outside, raw, 0.0)
    return weights, mask, _metrics(weights, outside, token, mask)


@MISMATCH.implements("token_truncate", cites=f"{_TIS}; verl rollout_is=token, TRL token_truncate")
def token_truncate(
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cfg: RLConfig
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """``min(pi_old/mu, C)`` per token; with ``mismatch_floor > 0`` also ``max(., floor)``, the
    two-sided clamp of OpenRLHF's default ``is_correction_type tis`` (openrlhf/models/loss.py@3c3be62
    line 216: ``exp(old - rollout).clamp(min=low, max=high)``; its thresholds default to [0.5, 5.0],
    openrlhf/cli/train_ppo_ray.py@3c3be62 line 262). Floor 0 (the default) is verl's and TRL's
    one-sided clamp."""
    return _truncate(old_logprobs, sampler_logprobs, mask, cfg, per_sequence=False, floor=cfg.mismatch_floor)


@MISMATCH.implements("sequence_truncate", cites=f"{_TIS}; verl rollout_is=sequence, TRL sequence_truncate")
def sequence_truncate(
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cfg: RLConfig
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """``min(prod_t pi_old/mu, C)`` on every token of the row."""
    return _truncate(old_logprobs, sampler_logprobs, mask, cfg, per_sequence=True, floor=0.0)


@MISMATCH.implements("token_mask", cites=f"{_MIS}; TRL token_mask")
def token_mask(
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cfg: RLConfig
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """``pi_old/mu`` per token inside ``[floor, C]``, 0 outside."""
    return _mask(old_logprobs, sampler_logprobs, mask, cfg, per_sequence=False)


@MISMATCH.implements("sequence_mask", cites=f"{_MIS}; TRL sequence_mask (its default)")
def sequence_mask(
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cfg: RLConfig
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """The row's ``prod_t pi_old/mu`` inside ``[floor, C]`` on each of its tokens, else 0 on all."""
    return _mask(old_logprobs, sampler_logprobs, mask, cfg, per_sequence=True)


# issue 35: verl's rollout correction (batch-normalised weights, rejection on the mask), OpenRLHF's seq-mask-tis
_VERL_RC = (
    "MIS: Liu, Li et al. 2025, When Speed Kills Stability; verl rollout correction "
    "(verl/trainer/ppo/rollout_corr_helper.py@b178a3c)"
)
_OPENRLHF_SMT = f"{_TIS}; OpenRLHF is_correction_type=seq-mask-tis (openrlhf/models/loss.py@3c3be62)"


def _rejection_statistic(token_log_weights: Tensor, mask: Tensor, option: str) -> Tensor:
    """verl's statistic of ``rollout_rs=option`` on every token [B, T] (a sequence's on each of its
    tokens): ``k1 = -log r``, ``k2 = (log r)^2 / 2``, ``k3 = r - 1 - log r`` of the token log-weight
    ``log r`` clamped to +-20, per token or as the sum, mean or max over the row's tokens."""
    bounded = torch.clamp(token_log_weights, -LOG_WEIGHT_BOUND, LOG_WEIGHT_BOUND)
    level, estimator = option.rsplit("_", 1)
    per_token = {"k1": -bounded, "k2": 0.5 * bounded**2, "k3": torch.expm1(bounded) - bounded}[estimator]
    on = mask.bool()
    if level == "token":
        return per_token
    if level == "seq_max":
        # an empty row's max is 0, as verl's (-inf filled, then replaced)
        row = torch.where(on, per_token, -torch.inf).amax(dim=1, keepdim=True)
        row = torch.where(torch.isinf(row), 0.0, row)
    else:
        row = torch.where(on, per_token, 0.0).sum(dim=1, keepdim=True)
        if level == "seq_mean":
            row = row / on.sum(dim=1, keepdim=True).clamp(min=1)
    return row.expand_as(per_token)


def _rejection_keep(token_log_weights: Tensor, mask: Tensor, cfg: RLConfig) -> Tensor:
    """Where ``cfg.rollout_rs``'s statistic passes: k1 inside ``[log(1 / upper), log upper]`` (verl's
    bounds from a single threshold), k2 and k3 at most the upper bound."""
    stat = _rejection_statistic(token_log_weights, mask, cfg.rollout_rs)
    upper = cfg.rollout_rs_threshold
    if not cfg.rollout_rs.endswith("k1"):
        return stat <= upper
    return (stat >= math.log(1.0 / upper)) & (stat <= math.log(upper))


def _batch_mean_weight(weights: Tensor, mask: Tensor, per_sequence: bool) -> Tensor:
    """verl's ``rollout_is_batch_normalize`` divisor: the mean weight over the batch's tokens, or
    over its non-empty rows (a row's weight is its sequence's)."""
    on = mask.bool()
    if not per_sequence:
        return torch.where(on, weights, 0.0).sum() / on.sum().clamp(min=1)
    rows = on.any(dim=1)
    row_weight = torch.where(on, weights, 0.0).sum(dim=1) / on.sum(dim=1).clamp(min=1)
    return torch.where(rows, row_weight, 0.0).sum() / rows.sum().clamp(min=1)


@MISMATCH.implements("rollout_corr", cites=_VERL_RC)
def rollout_corr(
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cfg: RLConfig
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """verl's rollout correction (``compute_rollout_correction_and_rejection_mask`` in
    verl/trainer/ppo/rollout_corr_helper.py@b178a3c; Liu, Li et al. 2025, When Speed Kills
    Stability), its two halves chosen apart as verl's ``algorithm.rollout_correction`` does:

    - importance weights, ``rollout_is``: ``token`` ``min(pi_old/mu, C)`` or ``sequence``
      ``min(prod_t pi_old/mu, C)`` (``C`` = ``mismatch_cap``, verl's ``rollout_is_threshold``, 2.0 in
      verl/trainer/config/algorithm.py@b178a3c line 174; ``rollout_is`` defaults to ``sequence``,
      line 173), or ``none`` (weight 1). With ``rollout_is_batch_normalize`` the truncated weights
      are divided by their mean over the batch's tokens (``token``) or non-empty rows
      (``sequence``), where that mean is above 1e-8 (rollout_corr_helper.py lines 569-595);
    - rejection, ``rollout_rs`` (verl's option names; none by default, line 176): a token or
      sequence statistic of ``log r = log pi_old/mu`` (``k1 = -log r``, ``k2 = (log r)^2/2``,
      ``k3 = r - 1 - log r``, per token or as the row's sum, mean or max) past
      ``rollout_rs_threshold`` takes its tokens, or the whole sequence, out of the loss's mask
      (``modified_response_mask = response_mask * final_mask``, line 371). ``seq_mean_k1`` is the
      geometric-mean rejection (verl's "Geo-RS"), ``seq_mean_k3`` verl's "K3-RS".

    The weights are those of the mask before rejection (verl computes them apart and batch-normalises
    them over the original ``response_mask``); the rejected tokens leave every term's denominator.
    Departures: one ``rollout_rs`` option, not a comma-separated chain; a k1 rejection's bounds are
    ``[1/threshold, threshold]``, verl's from a single threshold (its ``lower_upper`` strings may be
    asymmetric; its presets' are not: ``0.5_2.0``, and ``0.999_1.001`` within 1e-6); the weights are normalised
    over the update's minibatch (verl: the whole step's batch, all ranks); verl drops the rejected
    tokens before computing the advantages, here they are dropped in the update (the same for
    outcome-reward estimators, whose advantages do not read the mask); NaN padding is masked with
    ``where`` (verl multiplies by the mask); ``mismatch_rejected_seq_frac`` is a share of the non-empty
    rows (verl's of all rows).
    """
    on = mask.bool()
    token = torch.where(on, old_logprobs - sampler_logprobs, 0.0).detach()
    weights = torch.where(on, torch.ones_like(token), 0.0)
    truncated = torch.zeros_like(on)
    metrics: dict[str, Tensor] = {}
    if cfg.rollout_is != "none":
        per_sequence = cfg.rollout_is == "sequence"
        raw, _ = _raw_weights(old_logprobs, sampler_logprobs, mask, per_sequence)
        weights = torch.where(on, torch.clamp(raw, max=cfg.mismatch_cap), 0.0)
        truncated = raw > cfg.mismatch_cap
        if cfg.rollout_is_batch_normalize:
            factor = _batch_mean_weight(weights, mask, per_sequence)
            factor = torch.where(factor > 1e-8, factor, torch.ones_like(factor))
            weights = weights / factor
            metrics["mismatch_batch_norm_factor"] = factor
    kept = mask
    if cfg.rollout_rs != "none":
        keep = _rejection_keep(token, mask, cfg)
        kept = torch.where(keep, mask, torch.zeros_like(mask))
        rejected = on & ~keep
        metrics["mismatch_rejected_frac"] = masked_share(rejected, mask)
        rows = on.any(dim=1)
        metrics["mismatch_rejected_seq_frac"] = (rejected.any(dim=1) & rows).sum() / rows.sum().clamp(min=1)
    return weights, kept, {**_metrics(weights, truncated, token, mask), **metrics}


@MISMATCH.implements("seq_mask_tis", cites=_OPENRLHF_SMT)
def seq_mask_tis(
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cfg: RLConfig
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """OpenRLHF's ``seq-mask-tis`` (openrlhf/models/loss.py@3c3be62 lines 206-213): a row is kept
    where the geometric mean of its token weights, ``exp(mean_t log pi_old/mu)``, lies inside
    ``[floor, C]`` (OpenRLHF's ``is_correction_threshold``, [0.5, 5.0] by default,
    openrlhf/cli/train_ppo_ray.py@3c3be62 line 262: set ``mismatch_floor=0.5, mismatch_cap=5``);
    each token of a kept row is weighed by its own ``pi_old/mu``, 0 on the other rows.

    The token weight is not clamped: OpenRLHF's comment says the coefficients "still use TIS
    (token-level clamp)", but its code (line 212) is ``exp(old - rollout)`` without a clamp, and
    this follows the code. A rejected row's weight is 0 and its tokens stay in the denominator, as
    OpenRLHF multiplies the loss, not the mask. Departures: the log-weights are clamped to +-20
    before ``exp`` (OpenRLHF: not at all); an empty row's mean is 0 (OpenRLHF: 0/0).
    """
    on = mask.bool()
    token = torch.where(on, old_logprobs - sampler_logprobs, 0.0).detach()
    geometric = token.sum(dim=1, keepdim=True) / on.sum(dim=1, keepdim=True).clamp(min=1)
    seq_weight = torch.exp(torch.clamp(geometric, -LOG_WEIGHT_BOUND, LOG_WEIGHT_BOUND))
    outside = ((seq_weight < cfg.mismatch_floor) | (seq_weight > cfg.mismatch_cap)).expand_as(on)
    raw = torch.exp(torch.clamp(token, -LOG_WEIGHT_BOUND, LOG_WEIGHT_BOUND))
    weights = torch.where(on & ~outside, raw, 0.0)
    return weights, mask, _metrics(weights, outside, token, mask)


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
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """M2PO (Zheng et al. 2025, Prosperity before Collapse: How Far Can Off-Policy RL Reach with
    Stale Data on LLMs?, arXiv:2510.01161), as AReaL runs it with its decoupled objective: the
    tokens whose second moment ``(log pi_old/mu)^2`` is largest are left out of the loss until the
    mean over the rest is below ``m2_threshold`` (``m2po_keep``); the kept ones are weighed by
    AReaL's behaviour weight ``pi_old/mu`` (``pi_old`` the proximal policy, the trainer's
    recomputed log-probs; ``mu`` the sampler's, perhaps steps stale), 0 outside ``[floor, C]``
    as ``token_mask``. AReaL ``grpo_loss_fn`` (areal/trainer/ppo/actor.py@4aef98d line 448) narrows
    the loss mask before ``ppo_actor_loss_fn`` (areal/utils/functional/functional.py@4aef98d line
    483) counts it, so its token mean divides by the kept tokens while a token the behaviour cap
    masks stays counted; so here too M2PO's dropped tokens leave the mask every term reads (and
    its denominators), and a capped token only gets weight 0. The
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
    weights = torch.where(keep & ~outside, raw, 0.0)
    second = torch.clamp(token, -LOG_WEIGHT_BOUND, LOG_WEIGHT_BOUND).square()
    return (
        weights,
        torch.where(keep, mask, torch.zeros_like(mask)),
        {
            **_metrics(weights, outside | ~keep, token, mask),
            "m2po_frac": masked_share(~keep, mask),
            "m2po_m2": torch.where(on, second, 0.0).sum() / on.sum().clamp(min=1),
            "m2po_m2_kept": torch.where(keep, second, 0.0).sum() / keep.sum().clamp(min=1),
        },
    )


def _sequence_geomean(
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cfg: RLConfig, truncate: bool
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
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
    return weights, mask, _metrics(weights, outside, token, mask)


@MISMATCH.implements(
    "sequence_geomean_mask",
    cites="AReaL rejection_sampling level=sequence, metric=ratio, agg=mean, action=mask (arXiv:2505.24298)",
)
def sequence_geomean_mask(
    old_logprobs: Tensor, sampler_logprobs: Tensor, mask: Tensor, cfg: RLConfig
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
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
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
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
