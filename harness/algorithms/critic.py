"""The PPO critic's loss and its fit diagnostic."""

from __future__ import annotations

import torch
from torch import Tensor

from harness.algorithms.aggregation import Aggregator


def value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    mask: Tensor,
    value_clip: float | None,
    aggregate: Aggregator,
) -> tuple[Tensor, dict[str, float]]:
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
    clip_frac = float((clipped & on).sum() / on.sum().clamp(min=1))
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
