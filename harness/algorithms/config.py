"""The resolved configuration of one algorithm: which part fills each slot, and its numbers.

An RL algorithm and DPO are different config types, told apart by ``kind`` (a discriminated
union, ``AlgorithmConfig``): a DPO arm has no clip bounds and an RL arm no ``dpo_beta``. A preset
(see ``presets.py``) is one of these with published defaults; a study arm or ``--set key=value``
overrides its fields, never its ``name`` or ``kind``. Which RL fields a configuration may set
depends on its parts: each part declares the fields it reads (``parts.py``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, PositiveFloat, PositiveInt

from harness.ground.strict import StrictModel


class _Common(StrictModel):
    model_config = ConfigDict(validate_assignment=True)

    name: str = Field(description="preset this config started from")

    # --- sampling and optimisation ---
    group_size: PositiveInt = Field(
        8, description="completions sampled per prompt (the group of group-relative advantages)"
    )
    lr: PositiveFloat = Field(1e-3, description="policy learning rate (AdamW)")
    epochs: PositiveInt = Field(1, description="passes of updates over each step's samples")
    minibatches: PositiveInt = Field(
        1, description="optimiser steps per pass (the samples split into this many minibatches)"
    )
    max_grad_norm: PositiveFloat = Field(1.0, description="gradient-norm clip before each optimiser step")


class RLConfig(_Common):
    """Policy-gradient algorithms: PPO, GRPO, Dr. GRPO, RLOO, REINFORCE++, CISPO, DAPO, GSPO and the
    presets built from the later parts (SAPO, GMPO, Clip-Cov, KL-Cov, DPPO, ...)."""

    kind: Literal["rl"] = "rl"

    # --- parts (registry names; see parts.SLOTS) ---
    advantage: str = Field("group_zscore", description="advantage estimator")
    policy_loss: str = Field("clipped", description="policy loss")
    aggregation: str = Field("token_mean", description="how per-token loss terms become one number")
    kl_estimator: str = Field("k3", description="estimator of KL(policy || reference)")
    kl_placement: str = Field("none", description="where the KL term goes: none, the reward, or the loss")
    critic: str = Field("none", description="value function: none, a head on the policy, or a separate value model")
    old_logprobs: str = Field(
        "auto",
        description="old log-probs of the ratio: sampler, recompute, or auto (recompute "
        "where the policy's weights are bf16/fp16, else sampler)",
    )
    mismatch: str = Field(
        "none",
        description="importance weights of the trainer's old log-probs against the sampler's, "
        "truncated (TIS) or masked (MIS, IcePop), per token or per sequence",
    )
    token_filter: str = Field("all", description="which tokens the policy loss reads (top_entropy: the 80/20 rule)")
    sampling: str = Field(
        "once",
        description="how a step draws its groups (dynamic: DAPO's, more prompts until the batch's "
        "groups have a spread of scores)",
    )
    truncated: str = Field("keep", description="what the loss does with completions the token budget cut off")

    entropy_coef: float = Field(0.0, ge=0, description="weight of the entropy bonus in the loss")

    # --- policy loss numbers ---
    eps_low: PositiveFloat = Field(
        0.2,
        description="clip band below a ratio of 1: ratios under 1 - eps_low are clipped (gmpo: a bound on "
        "the log-ratio; dppo, prime_rl: the limit of its mask)",
    )
    eps_high: PositiveFloat = Field(
        0.2,
        description="clip band above a ratio of 1: ratios over 1 + eps_high are clipped (DAPO's clip-higher; "
        "gmpo: a bound on the log-ratio; dppo, prime_rl: the limit of its mask)",
    )
    dual_clip: float | None = Field(
        None, gt=1.0, description="dual-clip bound c: a negative advantage's term is at most c times it; null: off"
    )
    sapo_tau_pos: PositiveFloat = Field(1.0, description="SAPO's gate temperature for positive advantages")
    sapo_tau_neg: PositiveFloat = Field(1.05, description="SAPO's gate temperature for other advantages")
    clip_cov_ratio: float = Field(2e-4, gt=0, le=1, description="share of tokens Clip-Cov detaches")
    clip_cov_lb: float = Field(1.0, description="lower end of the covariance band Clip-Cov picks from")
    clip_cov_ub: float = Field(5.0, description="upper end of the covariance band Clip-Cov picks from")
    kl_cov_ratio: float = Field(2e-3, gt=0, le=1, description="share of tokens KL-Cov penalises")
    kl_cov_coef: PositiveFloat = Field(1.0, description="KL-Cov's weight of |log(pi/pi_old)| on its tokens")
    dppo_ratio_cap: PositiveFloat = Field(20.0, description="DPPO's cap on its stop-gradient ratio")
    # issue 35: prime-rl's default loss
    kl_tau: float = Field(
        1e-3,
        ge=0,
        description="prime_rl: weight of its KL term to the sampler, the squared log-ratio (prime-rl's kl_tau)",
    )
    adv_tau: float = Field(
        1.0, ge=0, description="prime_rl: scale of the advantage in its policy term (prime-rl's adv_tau)"
    )

    # --- advantage numbers ---
    adv_eps: PositiveFloat = Field(
        1e-4, description="added to the group's std (GRPO's z-score), or its mean (maxrl), before dividing"
    )
    whiten_advantages: bool = Field(False, description="whiten the advantages over the batch after the estimator")
    drop_degenerate: bool = Field(
        False, description="leave out groups whose verifier scores are all equal (DAPO's dynamic sampling)"
    )
    gamma: float = Field(1.0, ge=0, le=1, description="discount of the reward-to-go")
    lam: float = Field(0.95, ge=0, le=1, description="GAE's lambda")

    # --- KL to the frozen reference ---
    kl_coef: float = Field(0.0, ge=0, description="weight of the KL term")

    # --- the sampler-trainer mismatch, the token filter, dynamic sampling ---
    mismatch_cap: PositiveFloat = Field(2.0, description="upper bound C of the mismatch weight")
    mismatch_floor: float = Field(
        0.0,
        ge=0,
        description="lower bound of the mismatch weight: *_mask and seq_mask_tis mask below it, token_truncate "
        "clamps up to it (OpenRLHF's two-sided tis); 0: none",
    )
    entropy_top_share: float = Field(
        0.2, gt=0, le=1, description="share of tokens, by entropy, the top_entropy filter keeps"
    )
    max_draws: PositiveInt = Field(4, description="dynamic sampling's draws of prompts per step at most")
    # issue 35: verl's rollout correction (verl/trainer/config/algorithm.py RolloutCorrectionConfig, its names)
    rollout_is: Literal["none", "token", "sequence"] = Field(
        "sequence",
        description="rollout_corr's importance weights: per token, per sequence (verl's default), or none",
    )
    rollout_is_batch_normalize: bool = Field(
        False, description="rollout_corr: divide the truncated weights by their batch mean (verl's option)"
    )
    rollout_rs: Literal[
        "none",
        "token_k1",
        "token_k2",
        "token_k3",
        "seq_sum_k1",
        "seq_sum_k2",
        "seq_sum_k3",
        "seq_mean_k1",
        "seq_mean_k2",
        "seq_mean_k3",
        "seq_max_k2",
        "seq_max_k3",
    ] = Field(
        "none",
        description="rollout_corr's rejection: the statistic (k1 = -log r, k2, k3 of r = pi_old/mu, per token "
        "or a sequence's sum, mean or max) whose excess takes tokens or whole sequences out of the loss's mask",
    )
    rollout_rs_threshold: PositiveFloat | None = Field(
        None,
        description="rollout_corr's rejection bound: k2/k3 at most this; k1 within [1/this, this] "
        "(verl's presets: 0.01 for k3, 1.001 for seq_mean_k1)",
    )
    # issue 35: AReaL's objectives for asynchronous training
    m2_threshold: PositiveFloat = Field(
        0.04,
        description="M2PO's bound on the mean second moment (log pi_old/mu)^2 of the tokens it keeps: the "
        "largest are masked until the rest's mean is below it (AReaL m2_threshold; its example: 0.04)",
    )

    # --- aggregation ---
    loss_norm_constant: PositiveInt | None = Field(
        None, description="divisor of seq_mean_token_sum_norm; null: the generation budget"
    )

    # --- PPO critic ---
    vf_coef: float = Field(0.5, ge=0, description="weight of the value loss")
    value_clip: PositiveFloat | None = Field(
        0.2, description="clip of the value change per update (PPO); null: the plain squared error"
    )
    critic_lr: PositiveFloat | None = Field(None, description="critic learning rate; null: the policy's lr")

    # issue 35: on-policy distillation (parts.DISTILL, distill.py)
    distill: str = Field(
        "none",
        description="reverse KL to a teacher's log-probs on the sampled tokens: none, in the advantage "
        "(tinker-cookbook) or in the loss (TRL's server distillation, beta 1)",
    )
    teacher_model: str = Field(
        "tiny",
        description="the teacher: 'tiny' (the built-in model at twice the trial's width and depth, fine-tuned "
        "once for all of warmstart.steps, or to a perfect validation accuracy, and cached), a hub id or a local "
        "folder; it must share the policy's tokenizer",
    )
    distill_coef: float = Field(
        1.0, ge=0, description="weight of the reverse KL to the teacher (tinker-cookbook's kl_penalty_coef)"
    )
    distill_discount: float = Field(
        0.0,
        ge=0,
        le=1,
        description="discount of the future teacher terms summed into each token's advantage (tinker-cookbook's "
        "kl_discount_factor; 0: each token its own)",
    )
    distill_task_reward: bool = Field(
        True, description="keep the task reward's advantages beside the teacher's term (false: distillation alone)"
    )
    # --- issue 35: TRL GRPOTrainer's newer options (two-sided clip, VESPO, off-policy sequence masking) ---
    off_policy_mask: str = Field(
        "none",
        description="which sequences the policy loss leaves out (opsm: DeepSeek-V3.2's off-policy sequence "
        "masking of negative-advantage sequences far from the sampler)",
    )
    two_sided_delta: float | None = Field(
        None,
        gt=1.0,
        description="INTELLECT-2's two-sided clip (TRL's delta): the unclipped branch's ratio capped at this, "
        "bounding a negative advantage's term by delta times it; null: off",
    )
    vespo_k_pos: float = Field(2.0, ge=0, description="VESPO's power k of the sequence weight, advantages >= 0")
    vespo_lambda_pos: PositiveFloat = Field(
        3.0, description="VESPO's decay lambda of the sequence weight, advantages >= 0"
    )
    vespo_k_neg: float = Field(3.0, ge=0, description="VESPO's power k of the sequence weight, advantages < 0")
    vespo_lambda_neg: PositiveFloat = Field(
        2.0, description="VESPO's decay lambda of the sequence weight, advantages < 0"
    )
    off_policy_mask_threshold: PositiveFloat = Field(
        0.5,
        description="opsm's threshold on a sequence's mean log(sampler/policy) per token, above which a "
        "negative-advantage sequence is left out",
    )


class DPOConfig(_Common):
    """Direct preference optimisation on best-vs-worst pairs of sampled completions."""

    kind: Literal["dpo"] = "dpo"
    pairs_from: str = Field(
        "reference",
        description="who samples the pairs: reference (offline, the frozen warm "
        "start) or policy (online, the policy being trained)",
    )
    dpo_beta: PositiveFloat = Field(0.1, description="DPO's beta: how far the policy may move from the reference")


AlgorithmConfig = Annotated[RLConfig | DPOConfig, Field(discriminator="kind")]

#: Fields added after trials were first stored with this config. At their defaults they are left
#: out of a trial's identity (:func:`identity`, hence its config hash and trial id), so a part
#: added later never renames the trials that ran before it existed, nor turns them into an
#: "earlier design"; set to anything else, they count like every other field. A field added in a
#: later round joins this set.
LATER_FIELDS = frozenset(
    {
        "mismatch",
        "token_filter",
        "sampling",
        "truncated",
        "sapo_tau_pos",
        "sapo_tau_neg",
        "clip_cov_ratio",
        "clip_cov_lb",
        "clip_cov_ub",
        "kl_cov_ratio",
        "kl_cov_coef",
        "dppo_ratio_cap",
        "mismatch_cap",
        "mismatch_floor",
        "entropy_top_share",
        "max_draws",
        # issue 35: on-policy distillation
        "distill",
        "teacher_model",
        "distill_coef",
        "distill_discount",
        "distill_task_reward",
        # issue 35: prime-rl's default loss
        "kl_tau",
        "adv_tau",
        # issue 35: verl's rollout correction
        "rollout_is",
        "rollout_is_batch_normalize",
        "rollout_rs",
        "rollout_rs_threshold",
        # issue 35: AReaL's objectives for asynchronous training
        "m2_threshold",
        # issue 35: TRL GRPOTrainer's newer options
        "off_policy_mask",
        "two_sided_delta",
        "vespo_k_pos",
        "vespo_lambda_pos",
        "vespo_k_neg",
        "vespo_lambda_neg",
        "off_policy_mask_threshold",
    }
)


def identity(config: RLConfig | DPOConfig) -> dict:
    """``config`` as a trial's identity reads it: every field, but the :data:`LATER_FIELDS` left at
    their defaults."""
    payload = config.model_dump(mode="json")
    fields = type(config).model_fields
    for name in LATER_FIELDS & payload.keys():
        if getattr(config, name) == fields[name].get_default(call_default_factory=True):
            del payload[name]
    return payload


#: kind -> its config type
CONFIG_TYPES: dict[str, type[RLConfig] | type[DPOConfig]] = {"rl": RLConfig, "dpo": DPOConfig}
