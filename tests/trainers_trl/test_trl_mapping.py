"""The arm -> TRL config mapping: each mappable preset against kwargs checked by hand from TRL 1.16's
loss code, TRL's own config classes accepting them, and a one-line error for each part TRL lacks."""

from __future__ import annotations

import dataclasses

import pytest

from harness.algorithms.presets import resolve_algorithm
from harness.errors import ConfigError
from harness.trainers.trl_mapping import algorithm_kwargs, check_trl, no_grad_passes, plan, trainer_of, vllm_kwargs

COMMON = {"num_generations": 8, "learning_rate": 1e-4, "num_iterations": 1, "max_grad_norm": 1.0}
CLIPPED = {"importance_sampling_level": "token", "epsilon": 0.2, "epsilon_high": 0.2}

#: preset (with overrides) -> the parts' kwargs, worked out from grpo_trainer.py's _compute_loss
EXPECTED = {
    ("grpo", ()): {
        "scale_rewards": "group",
        "loss_type": "grpo",
        **CLIPPED,
        "beta": 0.04,
        "use_bias_correction_kl": False,
    },
    ("dr_grpo", ()): {
        "scale_rewards": "none",
        "loss_type": "dr_grpo",
        **CLIPPED,
        "beta": 0.04,
        "use_bias_correction_kl": False,
    },
    ("dapo", (("drop_degenerate", False),)): {
        "scale_rewards": "group",
        "loss_type": "bnpo",
        "importance_sampling_level": "token",
        "epsilon": 0.2,
        "epsilon_high": 0.28,
        "beta": 0.0,
    },
    ("lite_ppo", ()): {"scale_rewards": "batch", "loss_type": "bnpo", **CLIPPED, "beta": 0.0},
    ("cispo", ()): {"scale_rewards": "group", "loss_type": "cispo", "epsilon": 1.0, "epsilon_high": 5.0, "beta": 0.0},
    ("gspo", ()): {
        "scale_rewards": "group",
        "loss_type": "grpo",
        "importance_sampling_level": "sequence",
        "epsilon": 3e-4,
        "epsilon_high": 4e-4,
        "beta": 0.0,
    },
    ("sapo", ()): {
        "scale_rewards": "group",
        "loss_type": "sapo",
        "sapo_temperature_pos": 1.0,
        "sapo_temperature_neg": 1.05,
        "beta": 0.0,
    },
    ("grpo", (("kl_estimator", "k3_unbiased"), ("epochs", 2))): {
        "scale_rewards": "group",
        "loss_type": "grpo",
        **CLIPPED,
        "beta": 0.04,
        "use_bias_correction_kl": True,
        "num_iterations": 2,
    },
    ("grpo", (("token_filter", "top_entropy"), ("truncated", "mask"), ("entropy_coef", 0.01))): {
        "scale_rewards": "group",
        "loss_type": "grpo",
        **CLIPPED,
        "beta": 0.04,
        "use_bias_correction_kl": False,
        "top_entropy_quantile": 0.2,
        "mask_truncated_completions": True,
        "entropy_coef": 0.01,
    },
    # issue 35: TRL GRPOTrainer's newer options (TRL 1.16 grpo_trainer.py: loss types luspo and vespo,
    # delta on the clipped branches, off_policy_mask_threshold)
    ("luspo", ()): {
        "scale_rewards": "group",
        "loss_type": "luspo",
        "importance_sampling_level": "sequence",
        "epsilon": 2e-3,
        "epsilon_high": 2.5e-3,
        "beta": 0.0,
    },
    ("vespo", ()): {
        "scale_rewards": "group",
        "loss_type": "vespo",
        "importance_sampling_level": "token",
        "vespo_k_pos": 2.0,
        "vespo_lambda_pos": 3.0,
        "vespo_k_neg": 3.0,
        "vespo_lambda_neg": 2.0,
        "beta": 0.0,
    },
    ("grpo", (("two_sided_delta", 4.0),)): {
        "scale_rewards": "group",
        "loss_type": "grpo",
        **CLIPPED,
        "delta": 4.0,
        "beta": 0.04,
        "use_bias_correction_kl": False,
    },
    ("grpo", (("dual_clip", 3.0),)): {  # c >= 1 + eps_high: TRL's delta is the dual clip
        "scale_rewards": "group",
        "loss_type": "grpo",
        **CLIPPED,
        "delta": 3.0,
        "beta": 0.04,
        "use_bias_correction_kl": False,
    },
    ("gspo", (("two_sided_delta", 1.5), ("off_policy_mask", "opsm"))): {
        "scale_rewards": "group",
        "loss_type": "grpo",
        "importance_sampling_level": "sequence",
        "epsilon": 3e-4,
        "epsilon_high": 4e-4,
        "delta": 1.5,
        "beta": 0.0,
        "off_policy_mask_threshold": 0.5,
    },
    (
        "grpo",
        (("aggregation", "seq_mean_token_sum"), ("off_policy_mask", "opsm"), ("off_policy_mask_threshold", 1.0)),
    ): {
        "scale_rewards": "group",
        "loss_type": "luspo",
        **CLIPPED,
        "beta": 0.04,
        "use_bias_correction_kl": False,
        "off_policy_mask_threshold": 1.0,
    },
}


def _algorithm(name, overrides):
    return resolve_algorithm(name, dict(overrides))


@pytest.mark.parametrize(("preset", "overrides"), list(EXPECTED))
def test_parts_map_to_the_hand_checked_kwargs(preset, overrides):
    expected = {**COMMON, "mask_truncated_completions": False, "entropy_coef": 0.0, **EXPECTED[preset, overrides]}
    assert algorithm_kwargs(_algorithm(preset, overrides), max_new_tokens=8) == expected


def _trial(**train):
    return {
        "seed": 3,
        "output_dir": "out",
        "train": {"steps": 60, "prompts_per_step": 8, "max_new_tokens": 8, "temperature": 0.9, **train},
    }


@pytest.mark.parametrize(("preset", "overrides"), list(EXPECTED))
def test_trl_config_accepts_the_kwargs_and_keeps_them(preset, overrides):
    from trl import GRPOConfig

    mapped = plan(_trial(), _algorithm(preset, overrides), on_gpu=False)
    config = GRPOConfig(**mapped.kwargs)
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    assert set(mapped.kwargs) <= fields
    for key, value in mapped.kwargs.items():
        if key not in ("output_dir", "report_to"):  # TRL makes the folder absolute and "none" a []
            assert getattr(config, key) == value, key


def test_one_step_is_prompts_times_group_in_minibatches():
    from trl import GRPOConfig

    algorithm = resolve_algorithm("grpo", {"epochs": 2})  # the testbed's 4 minibatches
    mapped = plan(_trial(), algorithm, on_gpu=False)
    config = GRPOConfig(**mapped.kwargs)
    assert config.generation_batch_size == 8 * 8  # prompts_per_step x group_size completions per generation
    assert config.per_device_train_batch_size == 16 and config.steps_per_generation == 4
    assert config.gradient_accumulation_steps == 1
    assert config.max_steps == 60 * 4 * 2 and config.logging_steps == 4 * 2  # one harness step: epochs x minibatches
    assert (config.seed, config.temperature, config.max_completion_length) == (3, 0.9, 8)
    assert config.lr_scheduler_type == "constant" and config.weight_decay == 0.0 and config.use_cpu
    assert config.save_strategy == "no" and config.report_to == []


def test_rloo_on_policy_runs_trls_rloo_trainer():
    from trl import RLOOConfig

    algorithm = resolve_algorithm("rloo", {"minibatches": 1, "aggregation": "seq_mean_token_sum"})
    assert trainer_of(algorithm) == "rloo"
    mapped = plan(_trial(), algorithm, on_gpu=False)
    assert mapped.trainer == "rloo"
    assert mapped.kwargs["beta"] == 0.05 and mapped.kwargs["normalize_advantages"] is False
    config = RLOOConfig(**mapped.kwargs)
    assert config.beta == 0.05 and config.num_generations == 8


@pytest.mark.parametrize(
    ("preset", "overrides", "says"),
    [
        ("ppo", {}, "critic 'value_head': TRL's GRPO and RLOO trainers have no critic"),
        ("reinforce_pp", {}, "advantage 'reinforce_pp': TRL has no such estimator; it offers group_zscore"),
        ("gmpo", {}, "policy_loss 'gmpo': TRL's GRPOTrainer has no such loss; it offers clipped"),
        ("dapo", {}, "drop_degenerate (DAPO's dynamic sampling): TRL keeps groups"),
        ("grpo", {"kl_placement": "reward"}, "kl_placement 'reward': TRL's GRPOTrainer puts the KL in the loss"),
        ("grpo", {"kl_estimator": "k1"}, "kl_estimator 'k1': TRL's KL in the loss is k3"),
        ("grpo", {"aggregation": "token_sum"}, "aggregation 'token_sum': TRL's loss_type offers"),
        ("grpo", {"whiten_advantages": True}, "whiten_advantages: TRL's GRPOTrainer does not whiten"),
        ("grpo", {"adv_eps": 1e-6}, "adv_eps 1e-06: TRL adds a fixed 0.0001"),
        ("grpo", {"dual_clip": 1.1}, "dual_clip 1.1: TRL has no dual clip; its `delta`"),
        ("grpo", {"dual_clip": 3.0, "two_sided_delta": 4.0}, "TRL has one cap, its `delta`"),
        ("vespo", {"aggregation": "seq_mean_token_mean"}, "TRL's vespo averages over tokens only"),
        (
            "rloo",
            {
                "minibatches": 1,
                "aggregation": "seq_mean_token_sum",
                "policy_loss": "clipped",
                "off_policy_mask": "opsm",
            },
            "TRL's RLOOTrainer has no off-policy mask or two-sided clip",
        ),
        ("grpo", {"mismatch": "token_truncate", "old_logprobs": "recompute"}, "only with vLLM rollouts"),
        ("grpo", {"sampling": "dynamic"}, "sampling 'dynamic': TRL draws each step's prompts once"),
        ("cispo", {"eps_low": 0.5}, "TRL's cispo caps the weight above only"),
        ("rloo", {}, "advantage leave_one_out runs TRL's RLOOTrainer"),
        ("dpo", {}, "algorithm kind dpo: the TRL adapter maps RL algorithms only"),
        ("grpo", {"distill": "advantage"}, "distill 'advantage': TRL's GRPO and RLOO trainers have no teacher"),
    ],
)
def test_a_part_trl_lacks_is_one_line_naming_it(preset, overrides, says):
    with pytest.raises(ConfigError) as err:
        check_trl(resolve_algorithm(preset, overrides))
    assert says in str(err.value) and "\n" not in str(err.value)


def test_check_trl_reads_a_specs_train_settings():
    from harness.engine.spec import TrialSpec

    spec = TrialSpec(arm="a", algorithm=resolve_algorithm("grpo"), train={"placebo_reward": True})
    with pytest.raises(ConfigError, match="train.placebo_reward"):
        check_trl(spec)
    spec = TrialSpec(arm="a", algorithm=resolve_algorithm("grpo", {"minibatches": 5}))
    with pytest.raises(ConfigError, match="minibatches 5 does not divide a step's 64 completions"):
        check_trl(spec)
    check_trl(TrialSpec(arm="a", algorithm=resolve_algorithm("grpo")))  # the testbed's GRPO maps


def test_vllm_settings_pass_through_on_a_gpu_and_are_ignored_on_the_cpu():
    assert vllm_kwargs({"use_vllm": True, "mode": "server", "server_port": 8001}) == {
        "use_vllm": True,
        "vllm_mode": "server",
        "vllm_server_port": 8001,
    }
    trial = {**_trial(), "trainer": {"kind": "trl", "vllm": {"use_vllm": True, "mode": "colocate"}}}
    on_gpu = plan(trial, resolve_algorithm("grpo"), on_gpu=True)
    assert on_gpu.kwargs["use_vllm"] and on_gpu.kwargs["vllm_mode"] == "colocate"
    assert on_gpu.kwargs["vllm_importance_sampling_correction"] is False  # mismatch: none
    on_cpu = plan(trial, resolve_algorithm("grpo"), on_gpu=False)
    assert "use_vllm" not in on_cpu.kwargs and "ignored: no GPU" in on_cpu.notes[0]


def test_a_mismatch_correction_maps_to_trls_vllm_importance_sampling():
    algorithm = resolve_algorithm("grpo", {"mismatch": "token_mask", "mismatch_floor": 0.5, "mismatch_cap": 5.0})
    kwargs = algorithm_kwargs(algorithm, use_vllm=True)
    assert kwargs["vllm_importance_sampling_mode"] == "token_mask"
    assert (kwargs["vllm_importance_sampling_clip_min"], kwargs["vllm_importance_sampling_clip_max"]) == (0.5, 5.0)


# issue 35: the corrections TRL has no counterpart for are refused in one line, not passed on as a mode
@pytest.mark.parametrize(
    "overrides",
    [
        {"mismatch": "rollout_corr"},
        {"mismatch": "seq_mask_tis"},
        {"mismatch": "token_truncate", "mismatch_floor": 0.5, "mismatch_cap": 5.0},
    ],
)
def test_a_correction_trl_lacks_is_refused(overrides):
    with pytest.raises(ConfigError, match="TRL's corrections are token_truncate and sequence_truncate without a floor"):
        algorithm_kwargs(resolve_algorithm("grpo", overrides), use_vllm=True)


def test_vespo_with_a_mismatch_correction_is_refused_under_vllm():
    # TRL folds vLLM's token weights into vespo's sequence weight; the builtin weighs each token's term
    algorithm = resolve_algorithm("vespo", {"mismatch": "token_truncate"})
    with pytest.raises(ConfigError, match="TRL's vespo folds vLLM's importance weights") as err:
        algorithm_kwargs(algorithm, use_vllm=True)
    assert "\n" not in str(err.value)
    assert algorithm_kwargs(resolve_algorithm("vespo"), use_vllm=True)["vllm_importance_sampling_correction"] is False


def test_the_no_grad_passes_are_the_ones_trl_runs():
    grpo = plan(_trial(), resolve_algorithm("grpo"), on_gpu=False)  # the reference, and old log-probs: 4 minibatches
    assert no_grad_passes("grpo", grpo.kwargs) == 2
    on_policy = plan(_trial(), resolve_algorithm("dapo", {"drop_degenerate": False, "minibatches": 1}), on_gpu=False)
    assert no_grad_passes("grpo", on_policy.kwargs) == 0  # no KL, one optimiser step per generation
    rloo = plan(
        _trial(), resolve_algorithm("rloo", {"minibatches": 1, "aggregation": "seq_mean_token_sum"}), on_gpu=False
    )
    assert no_grad_passes("rloo", rloo.kwargs) == 2  # RLOOTrainer always computes the old log-probs
