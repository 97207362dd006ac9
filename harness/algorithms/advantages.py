"""Advantage estimators: from per-token rewards to per-token advantages.

Every registered estimator has the signature ``fn(inputs, cfg) -> AdvantageOutput``. Each one
computes only its own formula; the steps shared by all (zero on padding, optional whitening,
degenerate-group flags, DAPO's row filter) are applied once, by the registration wrapper. A group
is degenerate when its verifier scores are all equal (DAPO's filter, on accuracy): a KL penalty
in the reward makes the returns differ, but gives no signal about which answer is better.

Rows are ordered group by group: rows ``i*G .. (i+1)*G-1`` are prompt ``i``'s ``G`` samples.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from harness.algorithms.config import RLConfig
from harness.algorithms.parts import ADVANTAGES

DEGENERATE_TOL = 1e-6  # verifier scores closer than this count as equal


@dataclass
class AdvantageInputs:
    token_rewards: Tensor  # [B, T]: score on the last real token, plus any per-token KL penalty
    mask: Tensor  # [B, T] float: 1 on completion tokens (EOS included), 0 on padding
    group_size: int
    values: Tensor | None = None  # [B, T] critic values; only estimators that need a critic
    scores: Tensor = field(kw_only=True)  # [B] the verifier's score of each row, before any KL
    # [B, T] the policy's log-probs of the sampled tokens and the sum of its squared probabilities
    # over the vocabulary: only estimators that declare needs_token_probs (the step's own pass)
    token_logprobs: Tensor | None = field(default=None, kw_only=True)
    sum_pi_squared: Tensor | None = field(default=None, kw_only=True)


@dataclass
class AdvantageOutput:
    advantages: Tensor  # [B, T], exactly 0 on padding
    returns: Tensor | None  # [B, T] critic targets (GAE only), before any whitening
    degenerate: Tensor  # [n_groups] bool: every verifier score in the group is equal
    keep_rows: Tensor  # [B] bool: False for rows of degenerate groups under drop_degenerate


def compute_advantages(inputs: AdvantageInputs, cfg: RLConfig) -> AdvantageOutput:
    """Run the estimator ``cfg.advantage`` names."""
    return ADVANTAGES.get(cfg.advantage)(inputs, cfg)


def masked_whiten(x: Tensor, mask: Tensor, eps: float = 1e-8) -> Tensor:
    """``(x - mean) / std`` over the masked entries (Bessel std); 0 elsewhere."""
    on = mask.bool()
    vals = x[on]
    if vals.numel() < 2:
        return torch.zeros_like(x)
    return torch.where(on, (x - vals.mean()) / torch.sqrt(vals.var() + eps), 0.0)


def sequence_returns(inputs: AdvantageInputs) -> Tensor:
    """Each row's return: its token rewards summed over the mask, shape [B]."""
    return torch.where(inputs.mask.bool(), inputs.token_rewards, 0.0).sum(dim=1)


def _estimator(name: str, *, cites: str):
    """``core(inputs, cfg) -> (advantages, returns)`` wrapped with the shared steps, as the
    estimator ``name`` declared in ``parts.py`` (which says whether it needs groups or a critic),
    marked ``ADVANTAGES.implements(name, cites=cites)``."""
    implements = ADVANTAGES.implements(name, cites=cites)  # an undeclared name or another citation fails here
    meta = ADVANTAGES.meta(name)
    needs_groups, needs_critic, needs_probs = meta["needs_groups"], meta["needs_critic"], meta["needs_token_probs"]

    def decorate(core: Callable) -> Callable[[AdvantageInputs, RLConfig], AdvantageOutput]:
        @functools.wraps(core)
        def estimator(inputs: AdvantageInputs, cfg: RLConfig) -> AdvantageOutput:
            batch, group = inputs.mask.shape[0], inputs.group_size
            if batch % group:
                raise ValueError(f"{batch} rows do not split into groups of {group}")
            if needs_groups and group < 2:
                raise ValueError(f"advantage {name!r} needs group_size >= 2, got {group}")
            if needs_critic and inputs.values is None:
                raise ValueError(f"advantage {name!r} needs critic values")
            if needs_probs and (inputs.token_logprobs is None or inputs.sum_pi_squared is None):
                raise ValueError(
                    f"advantage {name!r} needs the policy's token log-probs and sum of squared probabilities"
                )
            advantages, returns = core(inputs, cfg)
            on = inputs.mask.bool()
            advantages = torch.where(on, advantages, 0.0)
            if cfg.whiten_advantages:
                advantages = masked_whiten(advantages, inputs.mask)
            degenerate = degenerate_groups(inputs.scores, group)
            dropped = degenerate.repeat_interleave(group) & cfg.drop_degenerate
            return AdvantageOutput(
                advantages=advantages,
                returns=None if returns is None else torch.where(on, returns, 0.0),
                degenerate=degenerate,
                keep_rows=~dropped,
            )

        return implements(estimator)

    return decorate


def degenerate_groups(scores: Tensor, group_size: int) -> Tensor:
    """[n_groups] bool: every score of the group within ``DEGENERATE_TOL`` of the others (never
    for groups of one)."""
    if group_size == 1:
        return torch.zeros_like(scores, dtype=torch.bool)
    grouped = scores.view(-1, group_size)
    return (grouped.amax(dim=1) - grouped.amin(dim=1)) <= DEGENERATE_TOL


def _grouped_returns(inputs: AdvantageInputs) -> Tensor:
    return sequence_returns(inputs).view(-1, inputs.group_size)


def _per_token(seq_advantages: Tensor, inputs: AdvantageInputs) -> Tensor:
    """Broadcast one advantage per sequence ([n_groups, G]) to every token ([B, T])."""
    return seq_advantages.reshape(-1, 1).expand_as(inputs.mask)


def _discounted_sums(x: Tensor, mask: Tensor, discount: float) -> Tensor:
    """``out_t = x_t + discount * out_{t+1}`` over masked positions (unmasked ones are skipped)."""
    out = torch.zeros_like(x)
    running = torch.zeros_like(x[:, 0])
    for t in reversed(range(x.shape[1])):
        on = mask[:, t].bool()
        running = torch.where(on, x[:, t] + discount * running, running)
        out[:, t] = running
    return out


@_estimator("group_zscore", cites="GRPO: Shao et al. 2024, DeepSeekMath (arXiv:2402.03300)")
def group_zscore(inputs: AdvantageInputs, cfg: RLConfig):
    """GRPO (Shao et al. 2024, DeepSeekMath): ``(r - mean) / (std + adv_eps)`` within each group.

    Bessel-corrected std, as ``torch.std`` in verl and TRL.
    """
    r = _grouped_returns(inputs)
    mean, std = r.mean(dim=1, keepdim=True), r.std(dim=1, keepdim=True)
    return _per_token((r - mean) / (std + cfg.adv_eps), inputs), None


@_estimator("group_mean", cites="Dr. GRPO: Liu et al. 2025 (arXiv:2503.20783)")
def group_mean(inputs: AdvantageInputs, cfg: RLConfig):
    """Dr. GRPO (Liu et al. 2025, arXiv:2503.20783): ``r - mean`` within each group, no std."""
    r = _grouped_returns(inputs)
    return _per_token(r - r.mean(dim=1, keepdim=True), inputs), None


@_estimator("leave_one_out", cites="RLOO: Ahmadian et al. 2024 (arXiv:2402.14740)")
def leave_one_out(inputs: AdvantageInputs, cfg: RLConfig):
    """RLOO (Ahmadian et al. 2024): ``r_i`` minus the mean of the group's other ``G-1`` returns."""
    r = _grouped_returns(inputs)
    others_mean = (r.sum(dim=1, keepdim=True) - r) / (inputs.group_size - 1)
    return _per_token(r - others_mean, inputs), None


@_estimator("reinforce_pp", cites="REINFORCE++: Hu 2025 (arXiv:2501.03262)")
def reinforce_pp(inputs: AdvantageInputs, cfg: RLConfig):
    """REINFORCE++ (Hu 2025, arXiv:2501.03262): reward-to-go, whitened over the whole batch."""
    to_go = _discounted_sums(inputs.token_rewards, inputs.mask, cfg.gamma)
    return masked_whiten(to_go, inputs.mask), None


@_estimator("gae", cites="GAE: Schulman et al. 2016 (arXiv:1506.02438)")
def gae(inputs: AdvantageInputs, cfg: RLConfig):
    """GAE (Schulman et al. 2016, arXiv:1506.02438): ``A_t = sum_l (gamma*lam)^l delta_{t+l}``.

    ``delta_t = r_t + gamma * V_{t+1} - V_t``, with ``V = 0`` after the last real token.
    Returns (the critic's targets) are ``A + V``.
    """
    rewards, values, mask = inputs.token_rewards, inputs.values, inputs.mask
    next_values = torch.zeros_like(values)
    running = torch.zeros_like(values[:, 0])
    for t in reversed(range(values.shape[1])):
        next_values[:, t] = running
        running = torch.where(mask[:, t].bool(), values[:, t], running)
    deltas = rewards + cfg.gamma * next_values - values
    advantages = _discounted_sums(deltas, mask, cfg.gamma * cfg.lam)
    return advantages, advantages + values


@_estimator("reinforce_pp_baseline", cites="REINFORCE++-baseline: Hu 2025 (arXiv:2501.03262), as OpenRLHF and verl")
def reinforce_pp_baseline(inputs: AdvantageInputs, cfg: RLConfig):
    """REINFORCE++-baseline (Hu 2025, arXiv:2501.03262; OpenRLHF ``reinforce_baseline``, verl
    ``reinforce_plus_plus_baseline``): each row's score minus its group's mean score, on the last
    real token with any per-token KL reward, then the reward-to-go (``gamma``), whitened over the
    whole batch's tokens. With ``gamma = 1`` and no KL in the reward every token of row ``i`` holds
    ``r_i - mean_group(r)`` before the whitening, as verl's.
    """
    scores = inputs.scores.view(-1, inputs.group_size)
    baseline = scores.mean(dim=1, keepdim=True).expand_as(scores).reshape(-1)
    last = (inputs.mask.cumsum(1) == inputs.mask.sum(1, keepdim=True)) & inputs.mask.bool()
    centred = inputs.token_rewards - last.to(inputs.token_rewards.dtype) * baseline[:, None]
    return masked_whiten(_discounted_sums(centred, inputs.mask, cfg.gamma), inputs.mask), None


@_estimator(
    "group_mean_batch_std",
    cites="Lite PPO: Liu et al. 2025, Tricks or Traps (arXiv:2508.08221); TRL scale_rewards='batch'",
)
def group_mean_batch_std(inputs: AdvantageInputs, cfg: RLConfig):
    """Group mean, batch standard deviation: ``(r - mean_group(r)) / (std_batch(r) + adv_eps)``,
    the std over every row of the batch (Bessel), not the group's (Liu et al. 2025, Tricks or
    Traps, arXiv:2508.08221, "Lite PPO"; TRL ``scale_rewards='batch'``). A group with little
    spread keeps its small advantages instead of being blown up to unit scale.
    """
    r = _grouped_returns(inputs)
    return _per_token((r - r.mean(dim=1, keepdim=True)) / (r.std() + cfg.adv_eps), inputs), None


@_estimator(
    "group_passk",
    cites="pass@k group advantage: verl grpo_passk (arXiv:2503.19595), verl/trainer/ppo/core_algos.py@b178a3c",
)
def group_passk(inputs: AdvantageInputs, cfg: RLConfig):
    """A pass@k group advantage (verl ``grpo_passk``, after arXiv:2503.19595): only the group's
    best row gets an advantage, ``(r_max - r_second) / (std_group(r) + adv_eps)`` (Bessel std; the
    first best on ties, where it is 0); every other row gets 0. Under pass@k only the best sample
    of a group counts, and the gap to the runner-up is what it adds.

    Checked against ``compute_grpo_passk_outcome_advantage`` in verl's
    verl/trainer/ppo/core_algos.py@b178a3c (lines 360-422): the same formula with verl's default
    ``norm_adv_by_std_in_grpo=True`` (line 389); verl's ``epsilon`` is 1e-6 (line 365), the
    ``grpo_passk`` preset's ``adv_eps``. verl refuses a group of one as this does; on a tie verl's
    ``topk`` may pick another of the tied rows, whose advantage is 0 either way. verl's option of
    no std division is not offered here.
    """
    r = _grouped_returns(inputs)
    top2 = torch.topk(r, 2, dim=1).values
    gain = (top2[:, :1] - top2[:, 1:]) / (r.std(dim=1, keepdim=True) + cfg.adv_eps)
    best = torch.zeros_like(r, dtype=torch.bool).scatter_(1, r.argmax(dim=1, keepdim=True), True)
    return _per_token(torch.where(best, gain, 0.0), inputs), None


# issue 35: advantage estimators (maxrl, optimal_token_baseline)


@_estimator(
    "maxrl",
    cites="MaxRL: Tajwar et al. 2026, Maximum Likelihood RL (arXiv:2602.02710); SkyRL maxrl, "
    "skyrl/backends/skyrl_train/utils/ppo_utils.py@a956457",
)
def maxrl(inputs: AdvantageInputs, cfg: RLConfig):
    """MaxRL (Tajwar et al. 2026, Maximum Likelihood Reinforcement Learning, arXiv:2602.02710;
    SkyRL ``maxrl``): ``(r - mean_group(r)) / (mean_group(r) + adv_eps)``, the group-centred
    return divided by the group's mean instead of its std. With 0/1 rewards and ``K`` of ``N``
    rows correct this is ``N r / K - 1``: the gradient of ``log p`` (the likelihood of a correct
    answer) rather than of ``p``, so prompts the policy rarely solves weigh ``1/p`` more; a group
    with no correct row gets 0.

    As ``compute_maxrl_advantage`` in SkyRL's skyrl/backends/skyrl_train/utils/ppo_utils.py@a956457
    (lines 1396-1428; its ``epsilon`` 1e-6, line 1401, is the ``maxrl`` preset's ``adv_eps``). The
    formula assumes rewards >= 0: a group mean near 0 from mixed signs blows the advantage up,
    in SkyRL too. Where SkyRL hands a group of one its raw return, this refuses group_size 1 as
    every group estimator here does.
    """
    r = _grouped_returns(inputs)
    mean = r.mean(dim=1, keepdim=True)
    return _per_token((r - mean) / (mean + cfg.adv_eps), inputs), None


#: verl's fixed ``epsilon`` of the optimal token baseline's denominator
#: (verl/trainer/ppo/core_algos.py@b178a3c, line 767; its trainer does not set it)
OTB_EPS = 1e-8


@_estimator(
    "optimal_token_baseline",
    cites="Optimal Token Baseline: verl optimal_token_baseline (verl PR #4678, docs/algo/otb.md), "
    "verl/trainer/ppo/core_algos.py@b178a3c",
)
def optimal_token_baseline(inputs: AdvantageInputs, cfg: RLConfig):
    """verl's Optimal Token Baseline (``optimal_token_baseline``; ``compute_optimal_token_baseline_
    advantage`` in verl/trainer/ppo/core_algos.py@b178a3c, lines 758-873; docs/algo/otb.md there):
    a baseline per token position ``t`` within each group, ``B_t = sum_i G_t^i W_t^i / (sum_i
    W_t^i + 1e-8)`` over the group's rows with a token at ``t``, and ``A_t = G_t - B_t`` on real
    tokens. ``G_t`` is the reward-to-go (undiscounted), ``W_t = sum_{j <= t} (1 - 2 pi_j +
    sum_v pi_v^2)`` the path's accumulated "realized energy": ``pi_j`` the policy's probability of
    the sampled token and ``sum_v pi_v^2`` its squared probabilities summed over the vocabulary.
    A group of one gets no baseline (``A = G``), as verl's. The returns (critic targets) are not
    kept: no critic reads them.

    It reads the policy's own pass (``needs_token_probs``): its log-probs of the sampled tokens
    (verl's recomputed ``old_log_probs``) and ``sum_pi_squared`` (verl's
    ``actor.calculate_sum_pi_squared``), which the step computes from the full-vocabulary logits.
    verl's ``rollout_is_weights ** 2`` scaling of ``W`` (the harness weighs the mismatch in the
    loss, after the advantages) and its ``handle_zero_tail`` option (off by default, line 766)
    are not reproduced. Padding is left out with ``where`` (NaN there changes nothing), where verl
    multiplies by the mask.
    """
    on = inputs.mask.bool()
    returns = torch.where(on, inputs.token_rewards, 0.0).flip(-1).cumsum(-1).flip(-1)
    if inputs.group_size == 1:
        return returns, None
    per_token = 1 - 2 * inputs.token_logprobs.exp() + inputs.sum_pi_squared
    energy = torch.where(on, per_token, 0.0).cumsum(-1)
    shape = (-1, inputs.group_size, inputs.mask.shape[1])
    weight = torch.where(on, energy, 0.0).view(shape)
    numerator = (torch.where(on, returns, 0.0).view(shape) * weight).sum(dim=1, keepdim=True)
    baseline = numerator / (weight.sum(dim=1, keepdim=True) + OTB_EPS)
    return returns - baseline.expand(shape).reshape_as(returns), None
