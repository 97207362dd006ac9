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
inside them); beyond them the ratio stays at the bound and its token gives no gradient. TOPR's
sequence ratio is capped at 1 by its own formula, so it needs no clamp.

The covariance-selected losses (Clip-Cov, KL-Cov) are in ``covariance_losses.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from harness.algorithms.aggregation import Aggregator
from harness.algorithms.config import RLConfig
from harness.algorithms.parts import POLICY_LOSSES

#: |log(pi/pi_old)| of one token is clamped to this before ``exp`` (verl, OpenRLHF: 20)
LOG_RATIO_BOUND = 20.0
#: GSPO's sequence log-ratio is clamped above to this before ``exp`` (verl: 10; none below)
SEQ_LOG_RATIO_MAX = 10.0


def token_log_ratio(logprobs: Tensor, old_logprobs: Tensor, mask: Tensor) -> Tensor:
    """log(pi/pi_old), 0 on padding so garbage there can never overflow into a NaN gradient."""
    return torch.where(mask.bool(), logprobs - old_logprobs, 0.0)


def clamped_ratio(log_ratio: Tensor) -> Tensor:
    """pi/pi_old per token, from the log-ratio clamped to ``+-LOG_RATIO_BOUND``."""
    return torch.exp(torch.clamp(log_ratio, -LOG_RATIO_BOUND, LOG_RATIO_BOUND))


def clip_surrogate(
    ratio: Tensor, advantages: Tensor, cfg: RLConfig, delta: float | None = None
) -> tuple[Tensor, Tensor]:
    """``min(r * A, clip(r, 1-eps_low, 1+eps_high) * A)`` and where the clipped branch won.

    With ``delta`` (INTELLECT-2's two-sided clip, arXiv:2505.07291; TRL's ``delta``), the ratio of
    the unclipped branch is capped at ``delta`` first, ``min(min(r, delta) * A, clip(r) * A)``, as
    TRL 1.16's ``_compute_loss`` (``trl/trainer/grpo_trainer.py``; the same at huggingface/trl
    f2cd577) clamps ``coef_1``: a negative advantage's term is at most ``delta * |A|`` and its token
    gives no gradient beyond; with ``delta >= 1 + eps_high`` it is exactly the dual clip with
    ``c = delta``, below that it caps positive advantages' ratios too. Capped tokens count as clipped.
    """
    unclipped = (ratio if delta is None else torch.clamp(ratio, max=delta)) * advantages
    bounded = torch.clamp(ratio, 1 - cfg.eps_low, 1 + cfg.eps_high) * advantages
    clipped_tokens = bounded < unclipped
    if delta is not None:
        clipped_tokens = clipped_tokens | (ratio > delta)
    return torch.minimum(unclipped, bounded), clipped_tokens


def masked_share(flags: Tensor, mask: Tensor) -> Tensor:
    """The share of masked tokens where ``flags`` holds (0 for a batch of padding only)."""
    on = mask.bool()
    return (flags & on).sum() / on.sum().clamp(min=1)


def loss_metrics(ratio: Tensor, clipped: Tensor, mask: Tensor) -> dict[str, Tensor]:
    on = mask.bool()
    return {
        "clip_frac": masked_share(clipped, mask),
        "ratio_mean": torch.where(on, ratio.detach(), 0.0).sum() / on.sum().clamp(min=1),
    }


def never(mask: Tensor) -> Tensor:
    """No token clipped: the ``clipped`` flags of a loss without a clip."""
    return torch.zeros_like(mask, dtype=torch.bool)


@POLICY_LOSSES.implements(
    "clipped",
    cites="PPO: Schulman et al. 2017 (arXiv:1707.06347); dual clip: Ye et al. 2020 (arXiv:1912.09729); "
    "two-sided clip: INTELLECT-2 (arXiv:2505.07291), "
    "TRL trl/trainer/grpo_trainer.py@f2cd577 (and 1.16.0) delta",
)
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
    by ``c * A`` (Ye et al. 2020, dual-clip PPO); with ``two_sided_delta``, the unclipped ratio
    is capped at it (INTELLECT-2's two-sided clip, TRL's ``delta``: ``clip_surrogate``). The
    log-ratio is clamped to +-20 first.
    """
    ratio = clamped_ratio(token_log_ratio(logprobs, old_logprobs, mask))
    surrogate, clipped_tokens = clip_surrogate(ratio, advantages, cfg, cfg.two_sided_delta)
    if cfg.dual_clip is not None:
        floor = cfg.dual_clip * advantages
        dual = (advantages < 0) & (surrogate < floor)
        surrogate, clipped_tokens = torch.where(dual, floor, surrogate), clipped_tokens | dual
    return aggregate(-surrogate, mask), loss_metrics(ratio, clipped_tokens, mask)


@POLICY_LOSSES.implements("cispo", cites="CISPO: MiniMax 2025, MiniMax-M1 (arXiv:2506.13585)")
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
    ratio = clamped_ratio(token_log_ratio(logprobs, old_logprobs, mask))
    weight = torch.clamp(ratio, 1 - cfg.eps_low, 1 + cfg.eps_high).detach()
    per_token = -weight * advantages * logprobs
    return aggregate(per_token, mask), loss_metrics(ratio, weight != ratio, mask)


@POLICY_LOSSES.implements(
    "gspo",
    cites="GSPO: Zheng et al. 2025 (arXiv:2507.18071); two-sided clip: INTELLECT-2 (arXiv:2505.07291), "
    "TRL trl/trainer/grpo_trainer.py@f2cd577 (and 1.16.0) delta",
)
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
    log-ratio is clamped above to 10 first, as verl's (below, ``exp`` only underflows to 0); TRL's
    ``importance_sampling_level="sequence"`` does not clamp it. ``two_sided_delta`` caps the sequence
    ratio of the unclipped branch, as TRL's ``delta`` on that level (``clip_surrogate``).
    With ``aggregation=seq_mean_token_sum`` this is LUSPO (TRL ``loss_type="luspo"``).
    """
    log_ratio = token_log_ratio(logprobs, old_logprobs, mask)
    lengths = mask.sum(dim=1, keepdim=True).clamp(min=1)
    seq_log_ratio = log_ratio.sum(dim=1, keepdim=True) / lengths
    seq_ratio = torch.exp(torch.clamp(seq_log_ratio, max=SEQ_LOG_RATIO_MAX))
    surrogate, clipped_tokens = clip_surrogate(seq_ratio, advantages, cfg, cfg.two_sided_delta)
    return aggregate(-surrogate, mask), loss_metrics(clamped_ratio(log_ratio), clipped_tokens, mask)


@POLICY_LOSSES.implements("is", cites="REINFORCE: Williams 1992, importance-weighted")
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
    ratio = clamped_ratio(token_log_ratio(logprobs, old_logprobs, mask))
    return aggregate(-ratio * advantages, mask), loss_metrics(ratio, never(mask), mask)


@POLICY_LOSSES.implements("sapo", cites="SAPO: Gao et al. 2025, Soft Adaptive Policy Optimization (arXiv:2511.20347)")
def sapo(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    cfg: RLConfig,
    aggregate: Aggregator,
) -> tuple[Tensor, dict[str, Tensor]]:
    """SAPO (Gao et al. 2025, arXiv:2511.20347): a soft gate in place of the hard clip,
    ``-f(r) * A`` with ``f(r) = sigmoid(tau * (r - 1)) * 4 / tau``, ``tau = sapo_tau_pos`` where
    ``A > 0`` and ``sapo_tau_neg`` elsewhere (verl ``compute_policy_loss_sapo``, TRL
    ``loss_type='sapo'``; both default to 1.0 and 1.05).

    ``f'(r) = 4 s (1 - s)``, ``s`` the sigmoid, is 1 at ``r = 1``: on-policy it is REINFORCE. Off
    policy a token's gradient weight ``f'(r) * r`` fades smoothly as the ratio leaves 1, faster
    for the larger temperature, where the clip cuts it to 0 at the band's edge. No hard clip:
    ``clip_frac`` is 0. The log-ratio is clamped to +-20 first (at ``r = e^20`` the gate is flat).
    """
    ratio = clamped_ratio(token_log_ratio(logprobs, old_logprobs, mask))
    tau = torch.where(advantages > 0, advantages.new_tensor(cfg.sapo_tau_pos), advantages.new_tensor(cfg.sapo_tau_neg))
    gate = torch.sigmoid(tau * (ratio - 1)) * (4 / tau)
    return aggregate(-gate * advantages, mask), loss_metrics(ratio, never(mask), mask)


@POLICY_LOSSES.implements("gmpo", cites="GMPO: Zhao et al. 2025, Geometric-Mean Policy Optimization (arXiv:2507.20673)")
def gmpo(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    cfg: RLConfig,
    aggregate: Aggregator,
) -> tuple[Tensor, dict[str, Tensor]]:
    """GMPO (Zhao et al. 2025, arXiv:2507.20673): the geometric mean of a sequence's token ratios,
    each clipped in log space, in place of their arithmetic mean (verl ``compute_policy_loss_geo_mean``):

        -A_i * exp( 1/|o_i| * sum_t sgn(A) * min(sgn(A) * l_t, sgn(A) * clip(l_t, -eps_low, eps_high)) )

    with ``l_t = log(pi/pi_old)`` and ``A_i`` the mean of row ``i``'s token advantages. ``eps_low``
    and ``eps_high`` bound the log-ratio here: the paper's range ``(e^-0.4, e^0.4)`` is 0.4 and 0.4.
    The pessimistic branch of each token is kept, as PPO's min does (for ``A < 0`` the larger
    log-ratio). One outlier token moves a geometric mean less than an arithmetic one.

    The sequence's term is placed on each of its tokens, so ``seq_mean_token_mean`` gives the
    paper's mean over sequences (verl takes the plain mean over rows, all-padding rows included).
    ``clip_frac``: tokens whose clipped log-ratio was kept. The log-ratio is clamped to +-20 first.
    """
    log_ratio = torch.clamp(token_log_ratio(logprobs, old_logprobs, mask), -LOG_RATIO_BOUND, LOG_RATIO_BOUND)
    sign = torch.sign(advantages)
    bounded = torch.clamp(log_ratio, -cfg.eps_low, cfg.eps_high)
    kept = sign * torch.minimum(sign * log_ratio, sign * bounded)
    lengths = mask.sum(dim=1, keepdim=True).clamp(min=1)
    seq_log_ratio = torch.where(mask.bool(), kept, 0.0).sum(dim=1, keepdim=True) / lengths
    seq_advantage = torch.where(mask.bool(), advantages, 0.0).sum(dim=1, keepdim=True) / lengths
    per_token = (-seq_advantage * torch.exp(seq_log_ratio)).expand_as(mask)
    clipped_tokens = sign * bounded < sign * log_ratio
    return aggregate(per_token, mask), loss_metrics(clamped_ratio(log_ratio), clipped_tokens, mask)


def _dppo(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    cfg: RLConfig,
    aggregate: Aggregator,
    inside: Callable[[Tensor, Tensor, Tensor, Tensor, RLConfig], Tensor],
) -> tuple[Tensor, dict[str, Tensor]]:
    """``-A * sg(min(r, dppo_ratio_cap)) * log pi * m``: ``m`` 0 on the tokens ``inside`` puts
    outside the trust region in the direction their advantage pushes, 1 elsewhere."""
    log_ratio = token_log_ratio(logprobs, old_logprobs, mask)
    ratio = clamped_ratio(log_ratio)
    with torch.no_grad():
        prob, old_prob = torch.exp(logprobs), torch.exp(old_logprobs)
        kept = inside(prob, old_prob, log_ratio, advantages > 0, cfg) & mask.bool()
        weight = torch.clamp(ratio, max=cfg.dppo_ratio_cap) * kept
    per_token = -advantages * weight * logprobs
    return aggregate(per_token, mask), loss_metrics(ratio, ~kept | (ratio > cfg.dppo_ratio_cap), mask)


def _inside_tv(prob: Tensor, old_prob: Tensor, log_ratio: Tensor, pushes_up: Tensor, cfg: RLConfig) -> Tensor:
    change = prob - old_prob
    return torch.where(pushes_up, change <= cfg.eps_high, change >= -cfg.eps_low)


def _inside_kl(prob: Tensor, old_prob: Tensor, log_ratio: Tensor, pushes_up: Tensor, cfg: RLConfig) -> Tensor:
    # KL(Bernoulli(p_old) || Bernoulli(p)) of the sampled token against the rest; 1e-8 as verl's
    binary_kl = old_prob * -log_ratio + (1 - old_prob) * torch.log((1 - old_prob + 1e-8) / (1 - prob + 1e-8))
    return torch.where(
        pushes_up, (binary_kl <= cfg.eps_high) | (prob <= old_prob), (binary_kl <= cfg.eps_low) | (prob >= old_prob)
    )


@POLICY_LOSSES.implements(
    "dppo_tv", cites="DPPO-Binary-TV: Qi et al. 2026, Rethinking the Trust Region (arXiv:2602.04879)"
)
def dppo_tv(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    cfg: RLConfig,
    aggregate: Aggregator,
) -> tuple[Tensor, dict[str, Tensor]]:
    """DPPO-Binary-TV (Qi et al. 2026, Rethinking the Trust Region in LLM RL, arXiv:2602.04879;
    verl ``compute_policy_loss_dppo_tv``): the trust region bounds the change of the sampled
    token's probability, not its ratio, so a rare token may move further in ratio and a likely
    one less. ``-A * sg(min(r, dppo_ratio_cap)) * log pi * m``, ``m = 0`` where ``A > 0`` and
    ``p - p_old > eps_high``, or ``A <= 0`` and ``p - p_old < -eps_low``: here ``eps_low`` and
    ``eps_high`` are probability differences (verl's example: 0.15). A kept token's gradient is
    the unclipped importance-sampled one, ``-A * r * grad log pi``, while ``r <= cap``: verl's
    ``clip_ratio_c``, which is ActorConfig's 3.0 (the dual clip's) unless a run sets it, 1e4 in its
    DPPO example, and 20 only where the config lacks the key (verl verl/trainer/ppo/core_algos.py
    @1dda039 line 1427; verl/workers/config/actor.py line 164). ``clip_frac``: tokens masked or capped.
    """
    return _dppo(logprobs, old_logprobs, advantages, mask, cfg, aggregate, _inside_tv)


@POLICY_LOSSES.implements(
    "dppo_kl", cites="DPPO-Binary-KL: Qi et al. 2026, Rethinking the Trust Region (arXiv:2602.04879)"
)
def dppo_kl(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    cfg: RLConfig,
    aggregate: Aggregator,
) -> tuple[Tensor, dict[str, Tensor]]:
    """DPPO-Binary-KL (Qi et al. 2026, arXiv:2602.04879; verl ``compute_policy_loss_dppo_kl``): as
    ``dppo_tv``, the region bounding the binary KL ``p_old log(p_old/p) + (1-p_old) log((1-p_old)/(1-p))``
    instead (``eps_low``/``eps_high`` in nats; verl's example: 0.05); a token is masked only when
    it is outside and moved the way its advantage pushes (``p > p_old`` for ``A > 0``).
    """
    return _dppo(logprobs, old_logprobs, advantages, mask, cfg, aggregate, _inside_kl)


@POLICY_LOSSES.implements("topr", cites="TOPR: Le Roux et al. 2025, Tapered Off-Policy REINFORCE (arXiv:2503.14286)")
def topr(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    cfg: RLConfig,
    aggregate: Aggregator,
) -> tuple[Tensor, dict[str, Tensor]]:
    """TOPR (Le Roux et al. 2025, Tapered Off-Policy REINFORCE, arXiv:2503.14286): REINFORCE
    without importance weight where the advantage is positive, truncated importance sampling
    where it is negative: ``-sg(w_i) * A * log pi`` with ``w_i = 1`` for ``A >= 0`` and
    ``w_i = min(pi(y_i)/pi_old(y_i), 1)`` for ``A < 0``, the ratio of the whole sequence (the
    product of its token ratios, as the paper; Trinity-RFT's ``topr`` takes each token's; the
    paper's rewards are read as the harness's advantages).
    A negative sequence the policy already left behind pushes less. ``exp`` of a log-ratio
    capped at 0 cannot overflow. ``clip_frac``: tokens of negative rows whose ratio was capped.
    """
    log_ratio = token_log_ratio(logprobs, old_logprobs, mask)
    seq_log_ratio = log_ratio.sum(dim=1, keepdim=True)
    weight = torch.where(advantages >= 0, 1.0, torch.exp(torch.clamp(seq_log_ratio, max=0.0))).detach()
    capped = (advantages < 0) & (seq_log_ratio > 0)
    return aggregate(-weight * advantages * logprobs, mask), loss_metrics(clamped_ratio(log_ratio), capped, mask)


# issue 35: prime-rl's default loss
@POLICY_LOSSES.implements(
    "prime_rl",
    cites="prime-rl default loss: DPPO-Binary-TV, Qi et al. 2026 (arXiv:2602.04879), and the KL of Kimi K2.5 "
    "(arXiv:2602.02276); prime-rl src/prime_rl/trainer/rl/loss.py@559b447",
)
def prime_rl(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    cfg: RLConfig,
    aggregate: Aggregator,
) -> tuple[Tensor, dict[str, Tensor]]:
    """prime-rl's default loss (``default_loss_fn``, src/prime_rl/trainer/rl/loss.py@559b447, lines
    109-161; its docstring: "DPPO+KL loss"), per token:

        -m * adv_tau * A * r  +  kl_tau * (log r)^2,    r = pi / pi_old

    ``m`` is DPPO-Binary-TV's mask (Qi et al. 2026, arXiv:2602.04879), the one ``dppo_tv`` applies:
    0 where ``A > 0`` and ``p - p_old > eps_high`` (prime-rl's ``dppo_mask_high``) or ``A <= 0``
    and ``p - p_old < -eps_low`` (``dppo_mask_low``), 1 elsewhere. The second term, the KL of
    Kimi K2.5 (arXiv:2602.02276), pulls every token back towards ``pi_old``, masked or not.

    In prime-rl ``pi_old`` is always the inference engine's log-probs (``inference_logprobs``): the
    trainer never recomputes them, so the trust region and the KL are against the sampler, and
    cover both its mismatch with the trainer and its staleness. The ``prime_rl`` preset sets
    ``old_logprobs=sampler`` for the same; with ``recompute`` they are against the trainer's own.

    Against ``dppo_tv``: the ratio keeps its gradient (no stop-gradient, no cap), so a kept
    token's gradient, ``-A r grad log pi``, is ``dppo_tv``'s below its cap, and the loss's value
    is prime-rl's. prime-rl sums the terms and divides by the batch's loss tokens: the
    ``token_mean`` aggregation. Defaults (packages/prime-rl-configs/src/prime_rl/configs/trainer.py
    @559b447, ``DefaultLossConfig``): ``dppo_mask_low`` and ``dppo_mask_high`` 0.2 (lines 497,
    500), ``adv_tau`` 1.0 (503), ``kl_tau`` 1e-3 (506).

    The ratio's log-ratio is clamped to +-20 before ``exp`` (prime-rl does not clamp); the KL
    term squares it unclamped, as prime-rl, so it keeps pulling a token back from beyond the bound.
    ``clip_frac``: the masked tokens (prime-rl's ``is_masked``).
    """
    log_ratio = token_log_ratio(logprobs, old_logprobs, mask)
    ratio = clamped_ratio(log_ratio)
    with torch.no_grad():
        prob, old_prob = torch.exp(logprobs), torch.exp(old_logprobs)
        kept = _inside_tv(prob, old_prob, log_ratio, advantages > 0, cfg) & mask.bool()
    policy_term = torch.where(kept, -cfg.adv_tau * advantages * ratio, 0.0)
    per_token = policy_term + cfg.kl_tau * log_ratio.square()
    return aggregate(per_token, mask), loss_metrics(ratio, ~kept, mask)


# issue 35: TRL loss types
#: VESPO's sequence log-weight is clamped below to this, ``log(1e-8)`` (TRL's ``get_gamma_weights``)
VESPO_LOG_WEIGHT_MIN = math.log(1e-8)


@POLICY_LOSSES.implements(
    "vespo",
    cites="VESPO: Shen et al. 2026, Variational Sequence-Level Soft Policy Optimization (arXiv:2602.10693); "
    "TRL trl/trainer/grpo_trainer.py@f2cd577 (and 1.16.0) loss_type='vespo'",
)
def vespo(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    cfg: RLConfig,
    aggregate: Aggregator,
) -> tuple[Tensor, dict[str, Tensor]]:
    """VESPO (Shen et al. 2026, arXiv:2602.10693), as TRL 1.16's ``loss_type="vespo"``
    (``GRPOTrainer.get_gamma_weights`` and ``_compute_loss`` in ``trl/trainer/grpo_trainer.py``, the
    same at huggingface/trl f2cd577): ``-sg(phi(W)) * A * log pi`` with the gamma kernel

        phi(W) = W^k * exp(lambda * (1 - W)),   W = prod_t pi/pi_old  (the sequence's ratio)

    normalised so ``phi(1) = 1``, computed in log space: ``log W`` is the sum of the token
    log-ratios, each clamped to +-20, then clamped to ``[log 1e-8, 20]``. ``k, lambda`` are
    ``vespo_k_pos, vespo_lambda_pos`` where ``A >= 0`` and ``vespo_k_neg, vespo_lambda_neg`` where
    ``A < 0`` (TRL's defaults 2, 3 and 3, 2; the paper's ``c1, c2``). ``phi`` peaks at ``W = k/lambda``
    and falls to 0 on both sides, smoothly, where a clip cuts; no length normalisation of ``log W``.
    On-policy (``W = 1``) it is REINFORCE. No hard clip: ``clip_frac`` is 0.

    TRL folds vLLM's token importance weights (``pi_old/mu``) into ``W``; here a mismatch correction
    weighs each token's term instead, as for every loss (the TRL adapter refuses vespo with one).
    """
    log_ratio = token_log_ratio(logprobs, old_logprobs, mask)
    bounded = torch.clamp(log_ratio, -LOG_RATIO_BOUND, LOG_RATIO_BOUND).detach()
    log_w = torch.clamp(bounded.sum(dim=1, keepdim=True), VESPO_LOG_WEIGHT_MIN, LOG_RATIO_BOUND)
    nonneg = advantages >= 0
    k = torch.where(nonneg, advantages.new_tensor(cfg.vespo_k_pos), advantages.new_tensor(cfg.vespo_k_neg))
    lam = torch.where(nonneg, advantages.new_tensor(cfg.vespo_lambda_pos), advantages.new_tensor(cfg.vespo_lambda_neg))
    phi = torch.exp(lam + k * log_w - lam * torch.exp(log_w))
    per_token = -phi * advantages * logprobs
    return aggregate(per_token, mask), loss_metrics(clamped_ratio(log_ratio), never(mask), mask)
