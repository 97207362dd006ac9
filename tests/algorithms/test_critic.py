import math

import pytest
import torch

from harness.algorithms.critic import explained_variance, value_loss


def total(per_token, mask):
    return torch.where(mask.bool(), per_token, 0.0).sum()


def test_clipped_value_loss_takes_the_larger_error():
    # old V 0.5, new V 1.0, return 1.0, clip 0.2: unclipped error 0, clipped V 0.7 -> 0.09.
    values = torch.tensor([[1.0, 0.6]], requires_grad=True)
    old, returns, mask = torch.tensor([[0.5, 0.5]]), torch.tensor([[1.0, 1.0]]), torch.ones(1, 2)
    loss, metrics = value_loss(values, old, returns, mask, 0.2, total)
    # token 1: V 0.6 inside the clip range, error 0.16 both ways
    assert loss.item() == pytest.approx(0.5 * 0.09 + 0.5 * 0.16)
    assert metrics == {"value_clip_frac": 0.5}
    loss.backward()
    assert values.grad[0].tolist() == pytest.approx([0.0, -0.4])  # clipped branch: no gradient


def test_value_clip_none_is_plain_half_squared_error():
    values = torch.tensor([[1.0, 0.6, 42.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    loss, metrics = value_loss(values, torch.full((1, 3), 0.5), torch.ones(1, 3), mask, None, total)
    assert loss.item() == pytest.approx(0.5 * 0.16)
    assert metrics == {"value_clip_frac": 0.0}


def test_explained_variance():
    returns = torch.tensor([[1.0, 2.0, 3.0, 100.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    assert explained_variance(returns.clone(), returns, mask) == pytest.approx(1.0)
    assert explained_variance(torch.full((1, 4), 2.0), returns, mask) == pytest.approx(0.0)
    # residual (0, 0, 1): variance 2/9 against 2/3
    assert explained_variance(torch.tensor([[1.0, 2.0, 2.0, 0.0]]), returns, mask) == pytest.approx(
        1 - (2 / 9) / (2 / 3)
    )
    assert math.isnan(explained_variance(returns, torch.ones(1, 4), mask))
