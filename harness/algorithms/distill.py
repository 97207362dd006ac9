"""On-policy distillation: the student's sampled tokens scored against a teacher's log-probs.

Two places for the per-token reverse KL ``KL(student || teacher)``, as the frameworks put it:

- in the **advantage** (tinker-cookbook, Thinking Machines 2025, "On-Policy Distillation",
  thinkingmachines.ai/blog/on-policy-distillation; ``tinker_cookbook/distillation/train_on_policy.py``
  @9dfcc3a, ``incorporate_kl_penalty``): each token's advantage gains
  ``-distill_coef * (log p_sampler - log p_teacher)`` (optionally the discounted future sum of
  it), added to the advantages of the task reward or, as its distillation datasets (reward 0),
  on its own;
- in the **loss** (TRL ``trl/experimental/server_distillation/server_distillation_trainer.py``
  @f2cd577, ``ServerDistillationTrainer`` with ``beta=1``, ``loss_top_k=1``,
  ``reverse_kl_top_1_mode='sampled'``, ``loss_add_tail=True``: the generalized JSD of GKD,
  Agarwal et al. 2024, arXiv:2306.13649, at ``beta=1``, on the support {sampled token, the rest}):
  ``loss += distill_coef * aggregate(p_s (log p_s - log p_t) + (1 - p_s)(log(1 - p_s) - log(1 - p_t)))``,
  the reverse KL between the two-outcome distributions "this token / any other", which the
  sampled tokens' log-probs alone determine.

A part of this slot gives the weights of the two places and whether the task reward's
advantages are kept (``TeacherWeights``); the step applies both, as it applies the KL placement.
Harness conventions, where they differ from the frameworks: the log-ratios are clamped to +-20
(``LOG_RATIO_BOUND``), padding is masked with ``where`` (NaN padding gives 0, no NaN gradient),
and the loss is aggregated by the arm's aggregation (TRL: the mean over the batch's tokens, the
harness's ``token_mean``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from harness.algorithms.config import RLConfig
from harness.algorithms.losses import LOG_RATIO_BOUND
from harness.algorithms.parts import DISTILL

#: TRL's ``_add_tail_bucket`` clamps the support's log-mass to at most this, so the tail is > 0
TAIL_LOG_MASS_MAX = -1e-7
_TINKER = (
    "On-policy distillation: Thinking Machines 2025 (thinkingmachines.ai/blog/on-policy-distillation); "
    "tinker-cookbook tinker_cookbook/distillation/train_on_policy.py@9dfcc3a"
)
_TRL = (
    "GKD: Agarwal et al. 2024 (arXiv:2306.13649), beta=1 reverse KL on the sampled token's top-1 support with tail; "
    "TRL trl/experimental/server_distillation/server_distillation_trainer.py@f2cd577"
)


@dataclass(frozen=True)
class TeacherWeights:
    """Where the reverse KL to the teacher goes, and whether the task reward's advantages stay."""

    in_advantage: float
    in_loss: float
    task_reward: bool


def _masked(x: Tensor, mask: Tensor) -> Tensor:
    return torch.where(mask.bool(), x, torch.zeros_like(x))


def teacher_log_ratio(logprobs: Tensor, teacher_logprobs: Tensor, mask: Tensor) -> Tensor:
    """``log p_student - log p_teacher`` per token (the single-sample reverse-KL estimate), clamped
    to +-20, 0 on padding (NaN padding included)."""
    ratio = torch.clamp(logprobs - teacher_logprobs, -LOG_RATIO_BOUND, LOG_RATIO_BOUND)
    return _masked(ratio, mask)


def discounted_future_sum(values: Tensor, discount: float) -> Tensor:
    """``out[t] = sum_{k >= t} discount^(k - t) values[k]`` along each row (tinker-cookbook's
    ``discounted_future_sum_vectorized``); ``discount = 0`` is ``values`` itself."""
    if discount == 0:
        return values
    out = torch.zeros_like(values)
    running = torch.zeros_like(values[:, 0])
    for t in range(values.shape[1] - 1, -1, -1):
        running = values[:, t] + discount * running
        out[:, t] = running
    return out


def teacher_advantages(
    sampler_logprobs: Tensor, teacher_logprobs: Tensor, mask: Tensor, coef: float, discount: float
) -> Tensor:
    """tinker-cookbook's distillation advantage (``incorporate_kl_penalty``, train_on_policy.py
    @9dfcc3a lines 91-105): ``-coef * mask * (log p_sampler - log p_teacher)``, then with
    ``discount > 0`` its discounted future sum; defaults ``kl_penalty_coef = 1.0`` and
    ``kl_discount_factor = 0.0`` (``Config``, lines 146-147). The log-ratio is clamped to +-20."""
    per_token = -coef * teacher_log_ratio(sampler_logprobs, teacher_logprobs, mask)
    return _masked(discounted_future_sum(per_token, discount), mask)


def _log_one_minus_exp(logp: Tensor) -> Tensor:
    """``log(1 - p)`` from ``log p``, ``log p`` clamped to at most -1e-7 first (TRL's tail bucket)."""
    return torch.log(-torch.expm1(torch.clamp(logp, max=TAIL_LOG_MASS_MAX)))


def top1_tail_reverse_kl(logprobs: Tensor, teacher_logprobs: Tensor, mask: Tensor) -> Tensor:
    """TRL's server-distillation loss per token at ``beta = 1`` (``_compute_sparse_top_1_divergence_loss``
    with ``_add_tail_bucket`` and ``_jsd_divergence``, server_distillation_trainer.py @f2cd577
    lines 27-82 and 197-242; ``beta`` 1.0 the default of ``DistillationConfig``,
    distillation_config.py line 155; ``loss_top_k`` 1, ``loss_add_tail`` True and
    ``reverse_kl_top_1_mode`` 'sampled' the defaults of ``ServerDistillationConfig``, lines 52-67):
    on the support {the sampled token, the tail}, ``p_s (log p_s - log p_t) + (1 - p_s)(log(1 - p_s)
    - log(1 - p_t))`` with ``p = exp(log p)``. Differentiable in the student's ``logprobs``; both
    log-ratios clamped to +-20 (TRL does not clamp); 0 on padding."""
    valid = mask.bool()
    student = torch.where(valid, logprobs, torch.full_like(logprobs, -1.0))
    teacher = torch.where(valid, teacher_logprobs, torch.full_like(teacher_logprobs, -1.0))
    top = torch.clamp(student - teacher, -LOG_RATIO_BOUND, LOG_RATIO_BOUND)
    tail = torch.clamp(_log_one_minus_exp(student) - _log_one_minus_exp(teacher), -LOG_RATIO_BOUND, LOG_RATIO_BOUND)
    p_tail = -torch.expm1(torch.clamp(student, max=TAIL_LOG_MASS_MAX))  # the tail's mass, as TRL's bucket
    return _masked(torch.exp(student) * top + p_tail * tail, mask)


@DISTILL.implements("none", cites="no teacher")
def no_teacher(cfg: RLConfig) -> TeacherWeights:
    return TeacherWeights(in_advantage=0.0, in_loss=0.0, task_reward=True)


@DISTILL.implements("advantage", cites=_TINKER)
def in_advantage(cfg: RLConfig) -> TeacherWeights:
    """tinker-cookbook: ``-distill_coef * (log p_sampler - log p_teacher)`` added to each token's advantage."""
    return TeacherWeights(in_advantage=cfg.distill_coef, in_loss=0.0, task_reward=cfg.distill_task_reward)


@DISTILL.implements("loss", cites=_TRL)
def in_loss(cfg: RLConfig) -> TeacherWeights:
    """TRL: ``distill_coef`` times the aggregated top-1-with-tail reverse KL added to the loss."""
    return TeacherWeights(in_advantage=0.0, in_loss=cfg.distill_coef, task_reward=cfg.distill_task_reward)


def teacher_weights(cfg: RLConfig) -> TeacherWeights:
    return DISTILL.get(cfg.distill)(cfg)


def distilled_advantages(
    advantages: Tensor, sampler_logprobs: Tensor, teacher_logprobs: Tensor | None, mask: Tensor, cfg: RLConfig
) -> Tensor:
    """The step's advantages with the teacher's term: the estimator's (zeroed when the part drops
    the task reward) plus ``teacher_advantages`` weighted by the part; ``advantages`` itself
    with ``distill: none``."""
    weights = teacher_weights(cfg)
    if cfg.distill == "none":
        return advantages
    if teacher_logprobs is None:
        raise ValueError(f"distill={cfg.distill} needs the teacher's log-probs, and the step computed none")
    out = advantages if weights.task_reward else torch.zeros_like(advantages)
    if weights.in_advantage:
        coef, discount = weights.in_advantage, cfg.distill_discount
        out = out + teacher_advantages(sampler_logprobs, teacher_logprobs, mask, coef, discount)
    return out
