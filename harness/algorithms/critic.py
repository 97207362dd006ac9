"""PPO's critic: the kinds (their registry is in ``parts.py``), the value module, its loss and
its fit diagnostic.

A kind builds the critic for a policy: ``none`` (no critic), ``value_head`` (a linear head on
the policy's own last hidden state) or ``value_model`` (the head on a separate copy of the
policy). The engine gives the critic the hidden states of its trunk (``trunk is None``: the
policy's); ``values(hidden, mask)`` is V(s_t) at each completion position.
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor, nn

from harness.algorithms.aggregation import Aggregator
from harness.algorithms.config import RLConfig
from harness.algorithms.parts import CRITICS


class ValueCritic(nn.Module):
    def __init__(self, policy: nn.Module, *, own_trunk: bool):
        super().__init__()
        self.trunk = copy.deepcopy(policy) if own_trunk else None
        self.head = nn.Linear(policy.config.hidden_size, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)
        self.head.to(next(policy.parameters()).device)

    def values(self, hidden: Tensor, mask: Tensor) -> Tensor:
        return self.head(hidden.float()).squeeze(-1) * mask


@CRITICS.implements("none", cites="no critic")
def no_critic(policy: nn.Module) -> ValueCritic | None:
    return None


@CRITICS.implements("value_head", cites="PPO: Schulman et al. 2017 (arXiv:1707.06347), a head on the policy's trunk")
def value_head(policy: nn.Module) -> ValueCritic | None:
    return ValueCritic(policy, own_trunk=False)


@CRITICS.implements("value_model", cites="PPO-RLHF: Ouyang et al. 2022 (arXiv:2203.02155), a separate value model")
def value_model(policy: nn.Module) -> ValueCritic | None:
    return ValueCritic(policy, own_trunk=True)


def build_critic(cfg: RLConfig, policy: nn.Module) -> ValueCritic | None:
    return CRITICS.get(cfg.critic)(policy)


def value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    mask: Tensor,
    value_clip: float | None,
    aggregate: Aggregator,
) -> tuple[Tensor, dict[str, Tensor]]:
    """``0.5 * max((V - R)^2, (V_clip - R)^2)`` with ``V_clip = V_old + clip(V - V_old, +-c)``
    (PPO as in Schulman et al.'s baselines and verl); ``value_clip=None`` is the plain error.
    Metrics: ``value_clip_frac`` (share of tokens where the clipped error won).
    """
    error = (values - returns) ** 2
    if value_clip is None:
        per_token, clipped = error, torch.zeros_like(mask, dtype=torch.bool)
    else:
        clipped_values = old_values + torch.clamp(values - old_values, -value_clip, value_clip)
        clipped_error = (clipped_values - returns) ** 2
        per_token, clipped = torch.maximum(error, clipped_error), clipped_error > error
    on = mask.bool()
    clip_frac = (clipped & on).sum() / on.sum().clamp(min=1)
    return aggregate(0.5 * per_token, mask), {"value_clip_frac": clip_frac}


def explained_variance(values: Tensor, returns: Tensor, mask: Tensor) -> float:
    """``1 - Var[R - V] / Var[R]`` over masked tokens: 1 is a perfect critic, 0 no better than
    a constant; NaN when the returns do not vary.
    """
    on = mask.bool()
    target, residual = returns[on].detach(), (returns - values)[on].detach()
    if target.numel() == 0 or target.var(unbiased=False) == 0:
        return float("nan")
    return float(1 - residual.var(unbiased=False) / target.var(unbiased=False))
