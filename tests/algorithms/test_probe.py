"""The no-op probe tells real ablations from differences that compute nothing."""

import pytest
import torch

from harness.algorithms.config import RLConfig
from harness.algorithms.presets import PRESETS, resolve_algorithm
from harness.algorithms.probe import probe
from harness.algorithms.probe_result import UNPROBED

RL_PRESETS = [n for n, p in PRESETS.items() if isinstance(p.config, RLConfig)]
#: one-field ablations a study runs: each must change the loss or the gradient on the probe
ABLATIONS = [
    ("grpo", {"eps_high": 0.28}),
    ("grpo", {"eps_low": 0.1}),
    ("grpo", {"dual_clip": 3.0}),
    ("grpo", {"adv_eps": 1e-6}),
    ("grpo", {"kl_estimator": "k1"}),
    ("grpo", {"kl_coef": 0.01}),
    ("grpo", {"entropy_coef": 1e-3}),
    ("grpo", {"whiten_advantages": True}),
    ("grpo", {"drop_degenerate": True}),
    ("grpo", {"advantage": "group_mean"}),
    ("grpo", {"aggregation": "token_mean"}),
    ("grpo", {"policy_loss": "cispo"}),
    ("dr_grpo", {"loss_norm_constant": 4}),
    ("ppo", {"lam": 0.9}),
    ("ppo", {"value_clip": 0.5}),
    ("ppo", {"vf_coef": 0.1}),
    ("reinforce_pp", {"gamma": 0.9}),
    ("rloo", {"kl_placement": "loss"}),
    # the later parts: each key one ablation apart
    ("grpo", {"policy_loss": "sapo"}),
    ("sapo", {"sapo_tau_neg": 2.0}),
    ("grpo", {"policy_loss": "gmpo"}),
    ("gmpo", {"eps_high": 0.2}),
    ("grpo", {"policy_loss": "clip_cov", "clip_cov_lb": 0.0, "clip_cov_ratio": 0.1}),
    ("clip_cov", {"clip_cov_lb": 1.5}),
    ("clip_cov", {"clip_cov_ratio": 0.05}),
    ("grpo", {"policy_loss": "kl_cov"}),
    ("kl_cov", {"kl_cov_coef": 0.1}),
    ("kl_cov", {"kl_cov_ratio": 0.1}),
    ("grpo", {"policy_loss": "dppo_tv"}),
    ("dppo", {"policy_loss": "dppo_kl"}),
    ("dppo", {"dppo_ratio_cap": 2.0}),
    ("grpo", {"policy_loss": "topr"}),
    ("grpo", {"aggregation": "token_sum"}),
    ("grpo", {"aggregation": "seq_mean_token_sum"}),
    ("grpo", {"kl_estimator": "k1+"}),
    ("grpo", {"kl_estimator": "k3+"}),
    ("grpo", {"kl_estimator": "k3_unbiased"}),
    ("grpo", {"advantage": "reinforce_pp_baseline"}),
    ("grpo", {"advantage": "group_mean_batch_std"}),
    ("grpo", {"advantage": "group_passk"}),
    ("grpo", {"mismatch": "token_truncate"}),
    ("grpo", {"mismatch": "sequence_truncate"}),
    ("grpo", {"mismatch": "token_mask"}),
    ("grpo", {"mismatch": "sequence_mask"}),
    ("grpo", {"mismatch": "token_mask", "mismatch_floor": 0.8}),
    ("grpo", {"mismatch": "token_truncate", "mismatch_cap": 1.1}),
    ("grpo", {"token_filter": "top_entropy"}),
    ("grpo", {"token_filter": "top_entropy", "entropy_top_share": 0.5}),
    # issue 35: on-policy distillation
    ("grpo", {"distill": "advantage"}),
    ("grpo", {"distill": "loss"}),
    ("on_policy_distill", {"distill_coef": 0.5}),
    ("on_policy_distill", {"distill_discount": 0.9}),
    ("on_policy_distill", {"distill_task_reward": True}),
    ("trl_server_distillation", {"distill_coef": 0.5}),
    ("trl_server_distillation", {"distill_task_reward": True}),
    # issue 35: TRL GRPOTrainer's newer options
    ("grpo", {"two_sided_delta": 3.0}),
    ("grpo", {"two_sided_delta": 1.1}),
    ("gspo", {"two_sided_delta": 1.0001}),
    ("grpo", {"policy_loss": "vespo"}),
    ("vespo", {"vespo_k_pos": 1.0}),
    ("vespo", {"vespo_lambda_pos": 1.5}),
    ("vespo", {"vespo_k_neg": 1.0}),
    ("vespo", {"vespo_lambda_neg": 1.5}),
    ("gspo", {"aggregation": "seq_mean_token_sum"}),
    ("grpo", {"off_policy_mask": "opsm", "off_policy_mask_threshold": 0.05}),
    # issue 35: advantage estimators
    ("grpo", {"advantage": "maxrl"}),
    ("maxrl", {"adv_eps": 1e-4}),
    ("grpo", {"advantage": "optimal_token_baseline"}),
]


def test_the_probe_is_deterministic_and_leaves_the_global_generator_alone():
    state = torch.random.get_rng_state()
    first, second = probe(PRESETS["grpo"].config, 8), probe(PRESETS["grpo"].config, 8)
    assert first.same_as(second) and first.loss == second.loss
    assert torch.equal(state, torch.random.get_rng_state())


def test_every_pair_of_presets_differs():
    results = {n: probe(PRESETS[n].config, 8) for n in RL_PRESETS}
    same = [(a, b) for i, a in enumerate(RL_PRESETS) for b in RL_PRESETS[i + 1 :] if results[a].same_as(results[b])]
    assert same == []


@pytest.mark.parametrize("preset,overrides", ABLATIONS)
def test_each_one_field_ablation_changes_the_computation(preset, overrides):
    assert not probe(resolve_algorithm(preset, overrides), 8).same_as(probe(PRESETS[preset].config, 8))


def test_a_two_sided_delta_above_the_clip_band_is_the_dual_clip():
    # min(min(r, c) A, clip(r) A) with c >= 1 + eps_high: TRL's delta is the dual clip, value and gradient
    assert probe(resolve_algorithm("grpo", {"two_sided_delta": 3.0}), 8).same_as(
        probe(resolve_algorithm("grpo", {"dual_clip": 3.0}), 8)
    )


def test_a_dual_clip_that_never_binds_is_a_no_op():
    assert probe(resolve_algorithm("grpo", {"dual_clip": 1000.0}), 8).same_as(probe(PRESETS["grpo"].config, 8))


@pytest.mark.parametrize(
    "overrides", [{"sampling": "dynamic"}, {"sampling": "dynamic", "max_draws": 9}, {"truncated": "mask"}]
)
def test_the_sampling_side_changes_the_data_not_the_formula(overrides):
    # like old_logprobs: the probe cannot see it, so arms that differ there are never called the same
    assert probe(resolve_algorithm("dapo", overrides), 8).same_as(probe(PRESETS["dapo"].config, 8))
    assert set(overrides) <= UNPROBED
