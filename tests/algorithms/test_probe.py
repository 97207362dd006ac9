"""The no-op probe tells real ablations from differences that compute nothing."""

import pytest
import torch

from harness.algorithms.config import RLConfig
from harness.algorithms.presets import PRESETS, resolve_algorithm
from harness.algorithms.probe import probe

RL_PRESETS = [n for n, p in PRESETS.items() if isinstance(p.config, RLConfig)]
#: one-field ablations a study runs: each must change the loss or the gradient on the probe
ABLATIONS = [
    ("grpo", {"eps_high": 0.28}), ("grpo", {"eps_low": 0.1}), ("grpo", {"dual_clip": 3.0}),
    ("grpo", {"adv_eps": 1e-6}), ("grpo", {"kl_estimator": "k1"}), ("grpo", {"kl_coef": 0.01}),
    ("grpo", {"entropy_coef": 1e-3}), ("grpo", {"whiten_advantages": True}),
    ("grpo", {"drop_degenerate": True}), ("grpo", {"advantage": "group_mean"}),
    ("grpo", {"aggregation": "token_mean"}), ("grpo", {"policy_loss": "cispo"}),
    ("dr_grpo", {"loss_norm_constant": 4}), ("ppo", {"lam": 0.9}), ("ppo", {"value_clip": 0.5}),
    ("ppo", {"vf_coef": 0.1}), ("reinforce_pp", {"gamma": 0.9}), ("rloo", {"kl_placement": "loss"}),
]


def test_the_probe_is_deterministic_and_leaves_the_global_generator_alone():
    state = torch.random.get_rng_state()
    first, second = probe(PRESETS["grpo"].config, 8), probe(PRESETS["grpo"].config, 8)
    assert first.same_as(second) and first.loss == second.loss
    assert torch.equal(state, torch.random.get_rng_state())


def test_every_pair_of_presets_differs():
    results = {n: probe(PRESETS[n].config, 8) for n in RL_PRESETS}
    same = [(a, b) for i, a in enumerate(RL_PRESETS) for b in RL_PRESETS[i + 1:] if results[a].same_as(results[b])]
    assert same == []


@pytest.mark.parametrize("preset,overrides", ABLATIONS)
def test_each_one_field_ablation_changes_the_computation(preset, overrides):
    assert not probe(resolve_algorithm(preset, overrides), 8).same_as(probe(PRESETS[preset].config, 8))


def test_a_dual_clip_that_never_binds_is_a_no_op():
    assert probe(resolve_algorithm("grpo", {"dual_clip": 1000.0}), 8).same_as(probe(PRESETS["grpo"].config, 8))
