"""An arm's algorithm and train settings as the keyword arguments of TRL 1.16's ``GRPOConfig`` or
``RLOOConfig``, and ``check_trl`` to refuse, before any work, a part TRL does not have.

Pure: no TRL import, so a study validates without it. Each part of the arm maps to the TRL field
that computes the same thing, read from TRL 1.16's source (``trl/trainer/grpo_trainer.py``,
``_compute_loss`` and ``_generate_and_score_completions``; ``rloo_trainer.py``):

- advantage: ``group_zscore`` is ``scale_rewards="group"``, ``group_mean`` (Dr. GRPO) is ``"none"``,
  ``group_mean_batch_std`` (Lite PPO) is ``"batch"``; TRL adds 1e-4 to the std, so ``adv_eps`` must
  be that. ``leave_one_out`` runs ``RLOOTrainer``.
- aggregation (GRPOTrainer's ``loss_type``): ``seq_mean_token_mean`` is ``"grpo"``,
  ``seq_mean_token_sum_norm`` is ``"dr_grpo"`` (TRL divides by ``max_completion_length``, so
  ``loss_norm_constant`` must be null or ``max_new_tokens``), ``token_mean`` is ``"bnpo"``: the
  token mean of the optimiser step's rows, which is the harness's per-minibatch token mean exactly
  because one optimiser step is one minibatch here (TRL's ``"dapo"`` divides by the whole
  generation batch's mean tokens per step instead, equal only when every minibatch has as many).
- policy loss: ``clipped`` is the clipped surrogate with ``epsilon``/``epsilon_high``; ``gspo`` the
  same on ``importance_sampling_level="sequence"``; ``cispo`` is ``loss_type="cispo"``, whose
  ``epsilon_high`` is the cap itself (``1 + eps_high``) and which has no lower bound (so
  ``eps_low >= 1``); ``sapo`` is ``loss_type="sapo"`` with its two temperatures.
- issue 35, TRL's newer options: ``seq_mean_token_sum`` is ``loss_type="luspo"`` (TRL 1.16 sums each
  row's masked terms and averages over rows: with ``gspo``, LUSPO; with ``clipped``, the token-level
  variant TRL warns about but computes the same way; huggingface/trl f2cd577 aggregates that one
  differently); ``vespo`` is ``loss_type="vespo"`` with its four numbers, on ``token_mean`` (TRL's
  normaliser is the generation's tokens per optimiser step, as its ``dapo``) and without a mismatch
  correction (TRL folds vLLM's weights into the sequence weight); ``two_sided_delta`` is ``delta``,
  and so is ``dual_clip = c`` when ``c >= 1 + eps_high`` (then ``min(min(r, c) A, clip(r) A)`` is the
  dual clip exactly; below that TRL's ``delta`` caps positive advantages' ratios too);
  ``off_policy_mask=opsm`` is ``off_policy_mask_threshold`` (against vLLM's log-probs with vLLM,
  else the old ones, as the builtin's against the sampler's).
- KL: in the loss, TRL's estimator is k3; ``use_bias_correction_kl`` multiplies it by the ratio,
  which is ``k3_unbiased`` (DeepSeek-V3.2), so plain ``k3`` sets it false. RLOOTrainer puts k1 in
  the reward.
- schedule: ``epochs`` is ``num_iterations``; ``minibatches`` is ``steps_per_generation``, with
  ``per_device_train_batch_size`` the rows of one minibatch and no gradient accumulation, so one
  generation is ``prompts_per_step x group_size`` completions and one harness step is
  ``epochs x minibatches`` TRL optimiser steps; constant learning rate, AdamW without weight decay,
  as the builtin learner.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.algorithms.config import DPOConfig, RLConfig
from harness.errors import ConfigError

#: TRL's fixed addition to the std of its reward scaling (``advantages / (std + 1e-4)``)
TRL_STD_EPS = 1e-4

_SCALE_REWARDS = {"group_zscore": "group", "group_mean": "none", "group_mean_batch_std": "batch"}
_LOSS_TYPES = {
    "seq_mean_token_mean": "grpo",
    "seq_mean_token_sum_norm": "dr_grpo",
    "token_mean": "bnpo",
    "seq_mean_token_sum": "luspo",  # issue 35
}
_RATIO_LEVELS = {"clipped": "token", "gspo": "sequence"}
_TRL_LOSSES = "clipped (token ratio), gspo (sequence ratio), cispo, sapo, vespo"
_TRL_ADVANTAGES = "group_zscore, group_mean, group_mean_batch_std (GRPOTrainer), leave_one_out (RLOOTrainer)"
_KL_IN_LOSS = {"k3": False, "k3_unbiased": True}  # estimator -> use_bias_correction_kl


@dataclass(frozen=True)
class TrlPlan:
    """Which TRL trainer runs the arm (``grpo`` or ``rloo``), its config's keyword arguments, and
    notes on settings left aside (printed by the adapter)."""

    trainer: str
    kwargs: dict[str, Any]
    notes: tuple[str, ...] = field(default=())


def check_trl(spec_or_algorithm: Any) -> None:
    """A ``ConfigError`` naming the first part of the arm TRL lacks and what TRL offers instead.

    Takes a ``TrialSpec`` (its algorithm and train settings are checked) or an algorithm config
    alone; nothing is returned: a spec that passes maps completely.
    """
    algorithm = getattr(spec_or_algorithm, "algorithm", spec_or_algorithm)
    train = getattr(spec_or_algorithm, "train", None)
    vllm = _vllm_settings(getattr(getattr(spec_or_algorithm, "trainer", None), "vllm", None))
    max_new_tokens = None if train is None else train.max_new_tokens
    algorithm_kwargs(algorithm, max_new_tokens=max_new_tokens, use_vllm=bool(vllm.get("use_vllm")))
    if train is not None:
        _check_train(train.model_dump() if hasattr(train, "model_dump") else dict(train), algorithm)
    task = getattr(spec_or_algorithm, "task", None)
    if task is not None and task.tools:
        raise ConfigError(
            "task.tools: the TRL adapter trains single-turn completions; run tool-calling tasks on the builtin trainer"
        )


def trainer_of(algorithm: RLConfig | DPOConfig) -> str:
    """``grpo`` or ``rloo``: the TRL trainer that runs ``algorithm`` (a ``ConfigError`` for DPO)."""
    if isinstance(algorithm, DPOConfig):
        raise ConfigError(
            "algorithm kind dpo: the TRL adapter maps RL algorithms only (TRL's DPOTrainer takes a preference set "
            "built beforehand, with a fixed number of pairs per optimiser step; the harness's DPO samples a group "
            "per prompt each step and keeps the prompts whose samples differ); run DPO on the builtin trainer"
        )
    return "rloo" if algorithm.advantage == "leave_one_out" else "grpo"


def algorithm_kwargs(
    algorithm: RLConfig | DPOConfig, *, max_new_tokens: int | None = None, use_vllm: bool = False
) -> dict[str, Any]:
    """The config fields ``algorithm``'s parts and numbers set, for the trainer ``trainer_of`` names."""
    trainer = trainer_of(algorithm)
    _refuse_common(algorithm, use_vllm)
    kwargs: dict[str, Any] = {
        "num_generations": algorithm.group_size,
        "learning_rate": algorithm.lr,
        "num_iterations": algorithm.epochs,
        "max_grad_norm": algorithm.max_grad_norm,
        "mask_truncated_completions": algorithm.truncated == "mask",
    }
    if trainer == "rloo":
        return kwargs | _rloo_kwargs(algorithm)
    kwargs |= _advantage_kwargs(algorithm) | _loss_kwargs(algorithm, max_new_tokens) | _kl_kwargs(algorithm)
    kwargs["entropy_coef"] = algorithm.entropy_coef
    if algorithm.off_policy_mask == "opsm":
        kwargs["off_policy_mask_threshold"] = algorithm.off_policy_mask_threshold
    if algorithm.token_filter == "top_entropy":
        kwargs["top_entropy_quantile"] = algorithm.entropy_top_share
    return kwargs | _mismatch_kwargs(algorithm, use_vllm)


def _refuse_common(cfg: RLConfig, use_vllm: bool) -> None:
    if cfg.critic != "none":
        raise ConfigError(
            f"critic {cfg.critic!r}: TRL's GRPO and RLOO trainers have no critic; use a critic-free advantage "
            f"({_TRL_ADVANTAGES}) or the builtin trainer"
        )
    if cfg.advantage not in _SCALE_REWARDS and cfg.advantage != "leave_one_out":
        raise ConfigError(f"advantage {cfg.advantage!r}: TRL has no such estimator; it offers {_TRL_ADVANTAGES}")
    if cfg.sampling != "once":
        raise ConfigError(
            f"sampling {cfg.sampling!r}: TRL draws each step's prompts once (no dynamic sampling); set sampling=once"
        )
    if cfg.drop_degenerate:
        raise ConfigError(
            "drop_degenerate (DAPO's dynamic sampling): TRL keeps groups with equal scores in the batch (their "
            "advantage is 0, their tokens still count in the loss's normaliser); set drop_degenerate=false"
        )
    if cfg.dual_clip is not None and cfg.dual_clip < 1 + cfg.eps_high:
        raise ConfigError(
            f"dual_clip {cfg.dual_clip}: TRL has no dual clip; its `delta` (INTELLECT-2's two-sided clip) is the dual "
            f"clip only for c >= 1 + eps_high ({1 + cfg.eps_high}), below that it caps positive advantages' ratios "
            "too; set dual_clip at least that, or two_sided_delta for TRL's delta itself"
        )
    # issue 35: on-policy distillation
    if cfg.distill != "none":
        raise ConfigError(
            f"distill {cfg.distill!r}: TRL's GRPO and RLOO trainers have no teacher (TRL distils in its "
            "DistillationTrainer and ServerDistillationTrainer, which the adapter does not run); set distill=none "
            "or use the builtin trainer"
        )
    if cfg.dual_clip is not None and cfg.two_sided_delta is not None:
        raise ConfigError("dual_clip with two_sided_delta: TRL has one cap, its `delta`; set one of them to null")


def _advantage_kwargs(cfg: RLConfig) -> dict[str, Any]:
    if cfg.whiten_advantages:
        raise ConfigError(
            "whiten_advantages: TRL's GRPOTrainer does not whiten advantages over the batch (its scale_rewards "
            "offers group, batch or none); set whiten_advantages=false or advantage=group_mean_batch_std"
        )
    if cfg.advantage in ("group_zscore", "group_mean_batch_std") and cfg.adv_eps != TRL_STD_EPS:
        raise ConfigError(
            f"adv_eps {cfg.adv_eps}: TRL adds a fixed {TRL_STD_EPS} to the std it divides by; set adv_eps={TRL_STD_EPS}"
        )
    return {"scale_rewards": _SCALE_REWARDS[cfg.advantage]}


def _loss_kwargs(cfg: RLConfig, max_new_tokens: int | None) -> dict[str, Any]:
    loss, agg = cfg.policy_loss, cfg.aggregation
    if loss == "cispo":
        if agg != "token_mean":
            raise ConfigError(
                f"policy_loss cispo with aggregation {agg!r}: TRL's cispo averages over tokens only; "
                "set aggregation=token_mean"
            )
        if cfg.eps_low < 1:
            raise ConfigError(
                f"policy_loss cispo with eps_low {cfg.eps_low}: TRL's cispo caps the weight above only (its "
                "epsilon_high is the cap); set eps_low=1.0 (a lower bound of 0, i.e. none)"
            )
        return {"loss_type": "cispo", "epsilon": cfg.eps_low, "epsilon_high": 1 + cfg.eps_high}
    if loss == "vespo":
        if agg != "token_mean":
            raise ConfigError(
                f"policy_loss vespo with aggregation {agg!r}: TRL's vespo averages over tokens only; "
                "set aggregation=token_mean"
            )
        return {
            "loss_type": "vespo",
            "importance_sampling_level": "token",
            "vespo_k_pos": cfg.vespo_k_pos,
            "vespo_lambda_pos": cfg.vespo_lambda_pos,
            "vespo_k_neg": cfg.vespo_k_neg,
            "vespo_lambda_neg": cfg.vespo_lambda_neg,
        }
    if loss == "sapo":
        if agg != "seq_mean_token_mean":
            raise ConfigError(
                f"policy_loss sapo with aggregation {agg!r}: TRL's sapo takes the mean over each sequence's "
                "tokens, then over sequences; set aggregation=seq_mean_token_mean"
            )
        return {
            "loss_type": "sapo",
            "sapo_temperature_pos": cfg.sapo_tau_pos,
            "sapo_temperature_neg": cfg.sapo_tau_neg,
        }
    if loss not in _RATIO_LEVELS:
        raise ConfigError(f"policy_loss {loss!r}: TRL's GRPOTrainer has no such loss; it offers {_TRL_LOSSES}")
    if agg not in _LOSS_TYPES:
        raise ConfigError(
            f"aggregation {agg!r}: TRL's loss_type offers seq_mean_token_mean (grpo), seq_mean_token_sum_norm "
            "(dr_grpo), token_mean (bnpo) and seq_mean_token_sum (luspo); choose one of those"
        )
    if agg == "seq_mean_token_sum_norm" and cfg.loss_norm_constant not in (None, max_new_tokens):
        raise ConfigError(
            f"loss_norm_constant {cfg.loss_norm_constant}: TRL's dr_grpo divides by max_completion_length "
            f"(train.max_new_tokens); set loss_norm_constant=null"
        )
    kwargs = {
        "loss_type": _LOSS_TYPES[agg],
        "importance_sampling_level": _RATIO_LEVELS[loss],
        "epsilon": cfg.eps_low,
        "epsilon_high": cfg.eps_high,
    }
    delta = cfg.two_sided_delta if cfg.two_sided_delta is not None else cfg.dual_clip
    return kwargs if delta is None else kwargs | {"delta": delta}


def _kl_kwargs(cfg: RLConfig) -> dict[str, Any]:
    if cfg.kl_placement == "none":
        return {"beta": 0.0}
    if cfg.kl_placement != "loss":
        raise ConfigError(
            f"kl_placement {cfg.kl_placement!r}: TRL's GRPOTrainer puts the KL in the loss (RLOOTrainer, with "
            "advantage leave_one_out, puts k1 in the reward); set kl_placement=loss or none"
        )
    if cfg.kl_estimator not in _KL_IN_LOSS:
        raise ConfigError(
            f"kl_estimator {cfg.kl_estimator!r}: TRL's KL in the loss is k3, or k3 times the ratio "
            "(k3_unbiased, its use_bias_correction_kl); set kl_estimator=k3 or k3_unbiased"
        )
    return {"beta": cfg.kl_coef, "use_bias_correction_kl": _KL_IN_LOSS[cfg.kl_estimator]}


def _mismatch_kwargs(cfg: RLConfig, use_vllm: bool) -> dict[str, Any]:
    if not use_vllm:
        if cfg.mismatch != "none":
            raise ConfigError(
                f"mismatch {cfg.mismatch!r}: TRL corrects the sampler-trainer mismatch only with vLLM rollouts; "
                "set trainer.vllm.use_vllm=true or mismatch=none"
            )
        return {}
    if cfg.mismatch == "none":
        return {"vllm_importance_sampling_correction": False}
    if cfg.mismatch in ("rollout_corr", "seq_mask_tis") or (cfg.mismatch == "token_truncate" and cfg.mismatch_floor):
        raise ConfigError(
            f"mismatch {cfg.mismatch!r} (mismatch_floor {cfg.mismatch_floor:g}): TRL's corrections are "
            "token_truncate and sequence_truncate without a floor, token_mask and sequence_mask; choose one of them"
        )
    if cfg.policy_loss == "vespo":
        raise ConfigError(
            f"policy_loss vespo with mismatch {cfg.mismatch!r}: TRL's vespo folds vLLM's importance weights into its "
            "sequence weight, the builtin weighs each token's term; set mismatch=none"
        )
    floor = cfg.mismatch_floor if cfg.mismatch.endswith("_mask") and cfg.mismatch_floor > 0 else None
    return {
        "vllm_importance_sampling_correction": True,
        "vllm_importance_sampling_mode": cfg.mismatch,
        "vllm_importance_sampling_clip_max": cfg.mismatch_cap,
        "vllm_importance_sampling_clip_min": floor,
    }


def _rloo_kwargs(cfg: RLConfig) -> dict[str, Any]:
    """RLOOTrainer: leave-one-out advantages, k1 KL in the reward, and a clipped ratio of the whole
    sequence's probability (a product over tokens) on the sum of its log-probs, averaged over
    sequences. No harness loss is that ratio; on-policy (one epoch, one minibatch) every ratio is 1,
    where it is the importance-sampled (or clipped) REINFORCE of seq_mean_token_sum."""
    if cfg.policy_loss not in ("is", "clipped") or cfg.epochs != 1 or cfg.minibatches != 1:
        raise ConfigError(
            "advantage leave_one_out runs TRL's RLOOTrainer, whose ratio is the sequence's probability ratio (no "
            "harness loss); run it on-policy: policy_loss=is or clipped, epochs=1, minibatches=1"
        )
    if cfg.aggregation != "seq_mean_token_sum":
        raise ConfigError(
            f"aggregation {cfg.aggregation!r}: TRL's RLOOTrainer sums each sequence's log-probs and averages over "
            "sequences; set aggregation=seq_mean_token_sum"
        )
    if cfg.token_filter != "all" or cfg.entropy_coef or cfg.mismatch != "none":
        raise ConfigError(
            "TRL's RLOOTrainer has no token filter, entropy bonus or mismatch correction; set token_filter=all, "
            "entropy_coef=0, mismatch=none"
        )
    if cfg.off_policy_mask != "none" or cfg.two_sided_delta is not None or cfg.dual_clip is not None:
        raise ConfigError(
            "TRL's RLOOTrainer has no off-policy mask or two-sided clip; set off_policy_mask=none, "
            "two_sided_delta=null, dual_clip=null"
        )
    if cfg.kl_placement == "loss" or (cfg.kl_placement == "reward" and cfg.kl_estimator != "k1"):
        raise ConfigError(
            f"kl_placement {cfg.kl_placement} with kl_estimator {cfg.kl_estimator}: TRL's RLOOTrainer puts k1 in "
            "the reward; set kl_placement=reward and kl_estimator=k1, or kl_placement=none"
        )
    kwargs = {
        "beta": cfg.kl_coef if cfg.kl_placement == "reward" else 0.0,
        "normalize_advantages": cfg.whiten_advantages,
    }
    if cfg.policy_loss == "clipped":
        return kwargs | {"epsilon": cfg.eps_low, "epsilon_high": cfg.eps_high}
    return kwargs


def _check_train(train: Mapping[str, Any], algorithm: RLConfig) -> None:
    if train.get("placebo_reward"):
        raise ConfigError("train.placebo_reward: the TRL adapter trains on the task's reward only; drop it")
    rows = train["prompts_per_step"] * algorithm.group_size
    if rows % algorithm.minibatches:
        raise ConfigError(
            f"minibatches {algorithm.minibatches} does not divide a step's {rows} completions "
            "(prompts_per_step x group_size): TRL splits the generation into equal optimiser steps"
        )


def _vllm_settings(vllm: Any) -> dict[str, Any]:
    if vllm is None:
        return {}
    return dict(vllm.model_dump() if hasattr(vllm, "model_dump") else vllm)


def vllm_kwargs(vllm: Mapping[str, Any] | None) -> dict[str, Any]:
    """``trainer.vllm`` as config fields: ``use_vllm`` as is, ``mode`` as ``vllm_mode``, any other key
    with ``vllm_`` in front unless it has it (``gpu_memory_utilization`` -> ``vllm_gpu_memory_utilization``)."""
    out = {}
    for key, value in (vllm or {}).items():
        if key == "use_vllm" or key.startswith("vllm_"):
            out[key] = value
        else:
            out[f"vllm_{key}"] = value
    return out


def no_grad_passes(trainer: str, kwargs: Mapping[str, Any]) -> int:
    """The no-grad passes TRL 1.16 runs over each sampled row besides sampling: the reference's when
    ``beta`` is not 0, and the old log-probs' (RLOOTrainer always; GRPOTrainer when one generation
    feeds several optimiser steps, or for vLLM's importance correction). The compute estimate counts
    them as the builtin trainer counts its own."""
    passes = int(kwargs.get("beta", 0.0) != 0.0)
    if trainer == "rloo":
        return passes + 1
    reused = kwargs["gradient_accumulation_steps"] % (kwargs["steps_per_generation"] * kwargs["num_iterations"]) != 0
    corrected = kwargs.get("use_vllm", False) and kwargs.get("vllm_importance_sampling_correction", True)
    return passes + int(reused or corrected)


def plan(trial: Mapping[str, Any], algorithm: RLConfig | DPOConfig, *, on_gpu: bool) -> TrlPlan:
    """The TRL trainer and config kwargs of the trial file ``trial`` (its algorithm already parsed)."""
    train = trial["train"]
    vllm = dict((trial.get("trainer") or {}).get("vllm") or {})
    notes = []
    if vllm and not on_gpu:
        notes.append(f"trainer.vllm ({', '.join(sorted(vllm))}) ignored: no GPU, rollouts use model.generate")
        vllm = {}
    kwargs = algorithm_kwargs(algorithm, max_new_tokens=train["max_new_tokens"], use_vllm=bool(vllm.get("use_vllm")))
    _check_train(train, algorithm)
    if train.get("micro_batch_size"):
        notes.append("train.micro_batch_size ignored: each optimiser step reads its minibatch in one pass")
    rows = train["prompts_per_step"] * algorithm.group_size
    updates_per_step = algorithm.minibatches * algorithm.epochs
    kwargs |= {
        "per_device_train_batch_size": rows // algorithm.minibatches,
        "steps_per_generation": algorithm.minibatches,
        "gradient_accumulation_steps": 1,
        "max_steps": train["steps"] * updates_per_step,
        "logging_steps": updates_per_step,
        "temperature": train["temperature"],
        "max_completion_length": train["max_new_tokens"],
        "gradient_checkpointing": bool(train.get("gradient_checkpointing")),
        "seed": trial["seed"],
        "output_dir": trial["output_dir"],
        "lr_scheduler_type": "constant",
        "warmup_steps": 0,
        "weight_decay": 0.0,
        "optim": "adamw_torch",
        "bf16": False,
        "fp16": False,
        "use_cpu": not on_gpu,
        "report_to": "none",
        "save_strategy": "no",
        "logging_strategy": "steps",
        "disable_tqdm": True,
        "remove_unused_columns": False,
        **vllm_kwargs(vllm),
    }
    return TrlPlan(trainer_of(algorithm), kwargs, tuple(notes))
