import math

import pytest
import torch

from harness.algorithms.dpo import build_pairs, dpo_loss, pair_sampler
from harness.algorithms.parts import PAIR_SOURCES
from harness.algorithms.presets import PRESETS, check_algorithm, resolve_algorithm
from harness.errors import ConfigError


def test_dpo_loss_by_hand():
    # seeds/002 eq. (8), beta 0.1. Pair 0: policy moved +1 on chosen, -1 on rejected -> implicit
    # rewards 0.1 and -0.1, margin 0.2. Pair 1: -1.5 on chosen, +1 on rejected -> -0.15 and
    # 0.1, margin -0.25.
    loss, metrics = dpo_loss(
        torch.tensor([-1.0, -5.0]),
        torch.tensor([-3.0, -1.0]),
        torch.tensor([-2.0, -3.5]),
        torch.tensor([-2.0, -2.0]),
        beta=0.1,
    )
    softplus = lambda x: math.log1p(math.exp(x))  # noqa: E731  -log sigmoid(m) = softplus(-m)
    assert loss.item() == pytest.approx((softplus(-0.2) + softplus(0.25)) / 2)
    assert metrics == pytest.approx(
        {
            "dpo_margin": (0.2 - 0.25) / 2,
            "dpo_pair_acc": 0.5,
            "dpo_chosen_reward": (0.1 - 0.15) / 2,
            "dpo_rejected_reward": (-0.1 + 0.1) / 2,
        }
    )


def test_dpo_gradient_raises_chosen_and_lowers_rejected():
    chosen, rejected = torch.zeros(3, requires_grad=True), torch.zeros(3, requires_grad=True)
    loss, _ = dpo_loss(chosen, rejected, torch.zeros(3), torch.zeros(3), beta=0.5)
    loss.backward()
    # at margin 0: d/dchosen = -beta * sigmoid(0) / n_pairs
    assert chosen.grad.tolist() == pytest.approx([-0.5 * 0.5 / 3] * 3)
    assert rejected.grad.tolist() == pytest.approx([0.5 * 0.5 / 3] * 3)


def test_build_pairs_takes_best_against_worst_with_lowest_index_on_ties():
    rewards = torch.tensor(
        [
            [0.0, 1.0, 0.5, 1.0],  # best: index 1 (ties with 3), worst: index 0
            [0.2, 0.2, 0.2, 0.2],  # all equal: no pair
            [1.0, 0.0, 0.0, 1.0],  # best 0, worst 1
            [0.3, 0.9, 0.1, 0.1],  # best 1, worst 2
        ]
    )
    assert build_pairs(rewards) == [(0, 1, 0), (2, 0, 1), (3, 1, 2)]
    assert build_pairs(torch.zeros(3, 2)) == []


def test_pair_sources_pick_the_reference_or_the_policy():
    assert PAIR_SOURCES.names() == ["reference", "policy"]
    assert pair_sampler("reference", policy="pi", reference="ref") == "ref"
    assert pair_sampler("policy", policy="pi", reference="ref") == "pi"
    with pytest.raises(ConfigError, match="unknown DPO pair source 'warmstart'; valid: policy, reference"):
        pair_sampler("warmstart", policy="pi", reference="ref")


def test_the_dpo_preset_is_offline_and_pairs_from_is_a_dpo_field():
    assert PRESETS["dpo"].config.pairs_from == "reference"
    assert resolve_algorithm("dpo", {"pairs_from": "policy"}).pairs_from == "policy"
    with pytest.raises(ConfigError, match="unknown DPO pair source 'online'"):
        resolve_algorithm("dpo", {"pairs_from": "online"})
    with pytest.raises(ConfigError, match="'pairs_from' belongs to DPO algorithms"):
        resolve_algorithm("grpo", {"pairs_from": "policy"})
    with pytest.raises(ConfigError, match="unknown DPO pair source 'nope'"):
        check_algorithm(PRESETS["dpo"].config.model_copy(update={"pairs_from": "nope"}))
