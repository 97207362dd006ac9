"""Which sequences the policy loss leaves out because they are too far off policy, as a 0/1 weight
per token (issue 35: TRL GRPOTrainer's off-policy sequence masking).

``opsm``: DeepSeek-V3.2's off-policy sequence masking (DeepSeek-AI 2025, arXiv:2512.02556, eq. 9),
as TRL 1.16's ``GRPOTrainer.get_off_policy_mask`` (``trl/trainer/grpo_trainer.py``; its
``off_policy_mask_threshold``). A token's weight is 0 where its advantage is negative and its
sequence's mean per-token ``log(mu / pi)`` exceeds ``off_policy_mask_threshold``: ``mu`` the
sampler's log-probs (TRL: vLLM's where it samples with vLLM, else the old ones; here the sampler's,
which are the old ones unless the step recomputed them), ``pi`` the current policy's, detached.
A wrong answer the policy has already moved far away from is not pushed down further; right
answers are always kept. The weight is 1 everywhere else, and the row keeps its place in the
loss's denominator (TRL multiplies the per-token loss, not the mask). TRL's paper notes suggest
0.5 as a start (docs/source/paper_index.md); the paper gives no value.

Harness conventions where TRL differs: the log-ratio is 0 on padding and clamped to +-20 before
the row's mean (TRL 1.16 zeroes only NaN, f2cd577 not even that); an all-padding row's mean is 0.

Every part is ``fn(logprobs, sampler_logprobs, advantages, mask, cfg) -> (weights [B, T], metrics)``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from harness.algorithms.config import RLConfig
from harness.algorithms.losses import LOG_RATIO_BOUND, masked_share
from harness.algorithms.parts import OFF_POLICY_MASKS


def off_policy_mask_weights(
    logprobs: Tensor, sampler_logprobs: Tensor, advantages: Tensor, mask: Tensor, cfg: RLConfig
) -> tuple[Tensor, dict[str, Tensor]]:
    """The weight of every token's policy term under ``cfg.off_policy_mask``, and its metrics."""
    return OFF_POLICY_MASKS.get(cfg.off_policy_mask)(logprobs, sampler_logprobs, advantages, mask, cfg)


@OFF_POLICY_MASKS.implements("none", cites="every sequence")
def no_mask(
    logprobs: Tensor, sampler_logprobs: Tensor, advantages: Tensor, mask: Tensor, cfg: RLConfig
) -> tuple[Tensor, dict[str, Tensor]]:
    return torch.ones_like(mask), {}


@OFF_POLICY_MASKS.implements(
    "opsm",
    cites="Off-policy sequence masking: DeepSeek-AI 2025, DeepSeek-V3.2 (arXiv:2512.02556), eq. 9, against the "
    "sampler's log-probs; TRL trl/trainer/grpo_trainer.py@f2cd577 (and 1.16.0) off_policy_mask_threshold",
)
def opsm(
    logprobs: Tensor, sampler_logprobs: Tensor, advantages: Tensor, mask: Tensor, cfg: RLConfig
) -> tuple[Tensor, dict[str, Tensor]]:
    """0 where ``A < 0`` and the row's mean ``log(mu/pi)`` is above ``off_policy_mask_threshold``, else 1."""
    on = mask.bool()
    drift = torch.where(on, sampler_logprobs - logprobs.detach(), 0.0)
    drift = torch.clamp(drift, -LOG_RATIO_BOUND, LOG_RATIO_BOUND)
    mean_drift = drift.sum(dim=1, keepdim=True) / mask.sum(dim=1, keepdim=True).clamp(min=1)
    dropped = (advantages < 0) & (mean_drift > cfg.off_policy_mask_threshold) & on
    return (~dropped).to(mask.dtype), {"off_policy_masked": masked_share(dropped, mask)}
