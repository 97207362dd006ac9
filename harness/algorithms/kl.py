"""KL(pi || ref): per-token estimators, and where the estimate goes.

Estimators (Schulman, "Approximating KL Divergence", 2020), from tokens sampled from pi, with
``d = ref_logp - logp``: k1 = -d (unbiased, can be negative), k2 = d^2 / 2 (biased, low
variance), k3 = exp(d) - d - 1 (unbiased and never negative; GRPO's). k3 is clamped as verl's
``low_var_kl`` (``kl_penalty_forward``): ``d`` to +-20 before ``exp``, so a log-ratio of +-100 gives
no fp32 overflow, then the estimate to at most 10 (OpenRLHF's ``compute_approx_kl`` clamps its
estimate to +-10 too, but not ``d``, which overflows). The cap makes k3 biased, and gives a token
no KL gradient, once k3 > 10: ``d`` above about 2.6 or below about -11.

The estimate of k1 and k3 is unbiased, their gradient is not the gradient of the KL; k2's is (on
samples of pi). Straight-through ``k1+`` and ``k3+`` (verl ``kl_penalty``) keep k1's or k3's value
and take k2's gradient: ``k2 - sg(k2) + sg(k)``. ``k3_unbiased`` (DeepSeek-V3.2, arXiv:2512.02556,
eq. 8; TRL ``use_bias_correction_kl``, slime ``use_unbiased_kl``) weighs k3 by ``pi/pi_old``, the
ratio with its gradient, because the tokens were sampled from pi_old, not pi: its estimate and its
gradient are unbiased off-policy. Every estimator is ``fn(logprobs, ref_logprobs, old_logprobs)``;
only ``k3_unbiased`` reads the old log-probs (in the reward they are the log-probs themselves).

Placements: in the ``reward``, ``token_rewards -= kl_coef * k`` with no gradient (InstructGPT);
in the ``loss``, ``loss += kl_coef * aggregate(k, mask)`` (GRPO); or ``none``. A placement is a
registry entry giving the two weights, so the step applies both and never asks which it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from harness.algorithms.config import RLConfig
from harness.algorithms.losses import LOG_RATIO_BOUND
from harness.algorithms.parts import KL_ESTIMATORS, KL_PLACEMENTS

#: k3's log-ratio ``d`` is clamped to +-this before ``exp`` (verl: 20)
K3_LOG_RATIO_BOUND = 20.0
#: k3's estimate is clamped to at most this (verl and OpenRLHF: 10; k3 is never below 0)
K3_MAX = 10.0
_SCHULMAN = "Schulman 2020, Approximating KL Divergence (joschu.net/blog/kl-approx.html)"


@KL_ESTIMATORS.implements("k1", cites=_SCHULMAN)
def k1(logprobs: Tensor, ref_logprobs: Tensor, old_logprobs: Tensor) -> Tensor:
    return logprobs - ref_logprobs


@KL_ESTIMATORS.implements("k2", cites=_SCHULMAN)
def k2(logprobs: Tensor, ref_logprobs: Tensor, old_logprobs: Tensor) -> Tensor:
    return 0.5 * (logprobs - ref_logprobs) ** 2


@KL_ESTIMATORS.implements("k3", cites=_SCHULMAN)
def k3(logprobs: Tensor, ref_logprobs: Tensor, old_logprobs: Tensor) -> Tensor:
    d = torch.clamp(ref_logprobs - logprobs, -K3_LOG_RATIO_BOUND, K3_LOG_RATIO_BOUND)
    return torch.clamp(torch.expm1(d) - d, max=K3_MAX)


def _straight_through(value: Tensor, logprobs: Tensor, ref_logprobs: Tensor, old_logprobs: Tensor) -> Tensor:
    """``value``'s number with k2's gradient."""
    gradient = k2(logprobs, ref_logprobs, old_logprobs)
    return gradient - gradient.detach() + value.detach()


@KL_ESTIMATORS.implements("k1+", cites=f"{_SCHULMAN}; straight-through k2 gradient as verl kl_penalty 'k1+'")
def k1_straight_through(logprobs: Tensor, ref_logprobs: Tensor, old_logprobs: Tensor) -> Tensor:
    """``k1+``: k1's value, k2's gradient ``(log pi - log ref) * grad log pi``."""
    return _straight_through(k1(logprobs, ref_logprobs, old_logprobs), logprobs, ref_logprobs, old_logprobs)


@KL_ESTIMATORS.implements("k3+", cites=f"{_SCHULMAN}; straight-through k2 gradient as verl kl_penalty 'k3+'")
def k3_straight_through(logprobs: Tensor, ref_logprobs: Tensor, old_logprobs: Tensor) -> Tensor:
    """``k3+``: k3's (clamped) value, k2's gradient."""
    return _straight_through(k3(logprobs, ref_logprobs, old_logprobs), logprobs, ref_logprobs, old_logprobs)


@KL_ESTIMATORS.implements(
    "k3_unbiased", cites="DeepSeek-AI 2025, DeepSeek-V3.2 (arXiv:2512.02556), eq. 8: k3 times pi/pi_old"
)
def k3_unbiased(logprobs: Tensor, ref_logprobs: Tensor, old_logprobs: Tensor) -> Tensor:
    """``(pi/pi_old) * k3``, the ratio with its gradient, its log-ratio clamped to +-20 as the
    policy losses' (k3 keeps its own clamps)."""
    log_ratio = torch.clamp(logprobs - old_logprobs, -LOG_RATIO_BOUND, LOG_RATIO_BOUND)
    return torch.exp(log_ratio) * k3(logprobs, ref_logprobs, old_logprobs)


def kl_estimate(logprobs: Tensor, ref_logprobs: Tensor, kind: str, old_logprobs: Tensor | None = None) -> Tensor:
    """Per-token estimate [B, T] of KL(pi || ref) by estimator ``kind``, on tokens sampled from the
    policy with ``old_logprobs`` (None: from pi itself, as the rollout's tokens are)."""
    old = logprobs.detach() if old_logprobs is None else old_logprobs
    return KL_ESTIMATORS.get(kind)(logprobs, ref_logprobs, old)


@dataclass(frozen=True)
class KLWeights:
    """How much of the KL estimate goes into the token rewards and into the loss."""

    in_reward: float
    in_loss: float


@KL_PLACEMENTS.implements("none", cites="no KL term (DAPO drops it)")
def no_kl(cfg: RLConfig) -> KLWeights:
    return KLWeights(in_reward=0.0, in_loss=0.0)


@KL_PLACEMENTS.implements("reward", cites="InstructGPT: Ouyang et al. 2022 (arXiv:2203.02155)")
def kl_in_reward(cfg: RLConfig) -> KLWeights:
    return KLWeights(in_reward=cfg.kl_coef, in_loss=0.0)


@KL_PLACEMENTS.implements("loss", cites="GRPO: Shao et al. 2024 (arXiv:2402.03300)")
def kl_in_loss(cfg: RLConfig) -> KLWeights:
    return KLWeights(in_reward=0.0, in_loss=cfg.kl_coef)


def kl_weights(cfg: RLConfig) -> KLWeights:
    return KL_PLACEMENTS.get(cfg.kl_placement)(cfg)
