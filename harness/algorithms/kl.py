"""Per-token estimators of KL(pi || ref) from tokens sampled from pi (Schulman, "Approximating
KL Divergence", 2020). With ``d = ref_logp - logp``: k1 = -d (unbiased, can be negative),
k2 = d^2 / 2 (biased, low variance), k3 = exp(d) - d - 1 (unbiased and never negative; GRPO's).

Where the estimate goes is the caller's: in the reward, ``token_rewards -= kl_coef * k`` with no
gradient (InstructGPT); in the loss, ``loss += kl_coef * aggregate(k, mask)`` (GRPO).
"""

from __future__ import annotations

import torch
from torch import Tensor

from harness.algorithms.registry import Registry

KL_ESTIMATORS = Registry("KL estimator")


@KL_ESTIMATORS.register("k1")
def k1(logprobs: Tensor, ref_logprobs: Tensor) -> Tensor:
    return logprobs - ref_logprobs


@KL_ESTIMATORS.register("k2")
def k2(logprobs: Tensor, ref_logprobs: Tensor) -> Tensor:
    return 0.5 * (logprobs - ref_logprobs) ** 2


@KL_ESTIMATORS.register("k3")
def k3(logprobs: Tensor, ref_logprobs: Tensor) -> Tensor:
    d = ref_logprobs - logprobs
    return torch.expm1(d) - d


def kl_estimate(logprobs: Tensor, ref_logprobs: Tensor, kind: str) -> Tensor:
    """Per-token estimate [B, T] of KL(pi || ref) by estimator ``kind`` (k1, k2 or k3)."""
    return KL_ESTIMATORS.get(kind)(logprobs, ref_logprobs)
