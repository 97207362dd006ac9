import pytest
import torch

from harness.algorithms.aggregation import make_aggregator
from harness.algorithms.config import RLConfig
from harness.algorithms.parts import AGGREGATIONS

PER_TOKEN = torch.tensor([[1.0, 2.0, 3.0], [4.0, float("nan"), 99.0], [7.0, 7.0, 7.0]])
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])  # row 2: dropped


@pytest.mark.parametrize(
    "name, expected",
    [
        ("token_mean", 10 / 4),  # (1 + 2 + 3 + 4) / 4 tokens
        ("seq_mean_token_mean", (2 + 4) / 2),  # row means 2 and 4; the empty row is left out
        ("seq_mean_token_sum_norm", (6 / 4 + 4 / 4) / 2),  # row sums / constant 4
        ("seq_mean_token_sum", (6 + 4) / 2),  # row sums 6 and 4, mean over the two rows with tokens
        ("token_sum", 10),  # 1 + 2 + 3 + 4, no normaliser
    ],
)
def test_aggregations_by_hand(name, expected):
    assert AGGREGATIONS.get(name)(PER_TOKEN, MASK, 4).item() == pytest.approx(expected)


def test_make_aggregator_uses_the_configured_constant_or_the_budget():
    by_budget = make_aggregator(RLConfig(name="t", aggregation="seq_mean_token_sum_norm"), 8)
    assert by_budget(PER_TOKEN, MASK).item() == pytest.approx((6 / 8 + 4 / 8) / 2)
    fixed = make_aggregator(RLConfig(name="t", aggregation="seq_mean_token_sum_norm", loss_norm_constant=2), 8)
    assert fixed(PER_TOKEN, MASK).item() == pytest.approx((6 / 2 + 4 / 2) / 2)


def test_length_normalisation_is_what_separates_the_aggregations():
    # seeds/002 section 4.1: under 1/|o_i| each token of a long sequence weighs less; under a
    # constant every token weighs the same. Gradients per token show it.
    x = torch.ones(2, 4, requires_grad=True)
    mask = torch.tensor([[1.0, 1, 1, 1], [1, 0, 0, 0]])
    weights = {}
    for name in AGGREGATIONS.names():
        x.grad = None
        AGGREGATIONS.get(name)(x, mask, 4).backward()
        weights[name] = (x.grad[0, 0].item(), x.grad[1, 0].item())
    assert weights["token_mean"] == pytest.approx((1 / 5, 1 / 5))
    assert weights["seq_mean_token_mean"] == pytest.approx((1 / 8, 1 / 2))
    assert weights["seq_mean_token_sum_norm"] == pytest.approx((1 / 8, 1 / 8))
    assert weights["seq_mean_token_sum"] == pytest.approx((1 / 2, 1 / 2))
    assert weights["token_sum"] == pytest.approx((1.0, 1.0))


def test_trl_loss_types_are_one_aggregation_key_apart():
    # the same per-token terms under TRL's loss types, by the aggregation key alone: grpo =
    # seq_mean_token_mean, dapo = token_mean, dr_grpo = seq_mean_token_sum_norm (the constant: the
    # budget). TRL's bnpo is dapo normalised per micro-batch instead of per optimiser step; here
    # micro-batches add up to their minibatch exactly, so it is token_mean.
    x = torch.tensor([[2.0, 4.0, 0.0], [6.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    results = {name: AGGREGATIONS.get(name)(x, mask, 3).item() for name in AGGREGATIONS.names()}
    assert results == pytest.approx(
        {
            "seq_mean_token_mean": (3 + 6) / 2,
            "token_mean": 12 / 3,
            "seq_mean_token_sum_norm": (6 / 3 + 6 / 3) / 2,
            "seq_mean_token_sum": (6 + 6) / 2,
            "token_sum": 12,
        }
    )
