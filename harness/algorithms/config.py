"""The resolved configuration of one algorithm: which part fills each slot, and its numbers.

An RL algorithm and DPO are different config types, told apart by ``kind`` (a discriminated
union, ``AlgorithmConfig``): a DPO arm has no clip bounds and an RL arm no ``dpo_beta``. A preset
(see ``presets.py``) is one of these with published defaults; a study arm or ``--set key=value``
overrides its fields, never its ``name`` or ``kind``. Which RL fields a configuration may set
depends on its parts: each part declares the fields it reads (``parts.py``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt


class _Common(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    name: str = Field(description="preset this config started from")

    # --- sampling and optimisation ---
    group_size: PositiveInt = 8
    lr: PositiveFloat = 1e-3
    epochs: PositiveInt = 1
    minibatches: PositiveInt = 1
    max_grad_norm: PositiveFloat = 1.0


class RLConfig(_Common):
    """Policy-gradient algorithms: PPO, GRPO, Dr. GRPO, RLOO, REINFORCE++, CISPO, DAPO, GSPO and the
    presets built from the later parts (SAPO, GMPO, Clip-Cov, KL-Cov, DPPO, ...)."""

    kind: Literal["rl"] = "rl"

    # --- parts (registry names; see parts.SLOTS) ---
    advantage: str = "group_zscore"
    policy_loss: str = "clipped"
    aggregation: str = "token_mean"
    kl_estimator: str = "k3"
    kl_placement: str = "none"
    critic: str = "none"
    old_logprobs: str = Field(
        "auto", description="old log-probs of the ratio: sampler, recompute, or auto (recompute "
        "where the policy's weights are bf16/fp16, else sampler)",
    )
    mismatch: str = Field(
        "none", description="importance weights of the trainer's old log-probs against the sampler's, "
        "truncated (TIS) or masked (MIS, IcePop), per token or per sequence",
    )
    token_filter: str = Field("all", description="which tokens the policy loss reads (top_entropy: the 80/20 rule)")
    sampling: str = Field(
        "once", description="how a step draws its groups (dynamic: DAPO's, more prompts until the batch's "
        "groups have a spread of scores)",
    )
    truncated: str = Field("keep", description="what the loss does with completions the token budget cut off")

    entropy_coef: float = Field(0.0, ge=0)

    # --- policy loss numbers ---
    eps_low: PositiveFloat = 0.2
    eps_high: PositiveFloat = 0.2
    dual_clip: float | None = Field(None, gt=1.0)
    sapo_tau_pos: PositiveFloat = Field(1.0, description="SAPO's gate temperature for positive advantages")
    sapo_tau_neg: PositiveFloat = Field(1.05, description="SAPO's gate temperature for other advantages")
    clip_cov_ratio: float = Field(2e-4, gt=0, le=1, description="share of tokens Clip-Cov detaches")
    clip_cov_lb: float = Field(1.0, description="lower end of the covariance band Clip-Cov picks from")
    clip_cov_ub: float = Field(5.0, description="upper end of the covariance band Clip-Cov picks from")
    kl_cov_ratio: float = Field(2e-3, gt=0, le=1, description="share of tokens KL-Cov penalises")
    kl_cov_coef: PositiveFloat = Field(1.0, description="KL-Cov's weight of |log(pi/pi_old)| on its tokens")
    dppo_ratio_cap: PositiveFloat = Field(20.0, description="DPPO's cap on its stop-gradient ratio")

    # --- advantage numbers ---
    adv_eps: PositiveFloat = 1e-4
    whiten_advantages: bool = False
    drop_degenerate: bool = False
    gamma: float = Field(1.0, ge=0, le=1)
    lam: float = Field(0.95, ge=0, le=1)

    # --- KL to the frozen reference ---
    kl_coef: float = Field(0.0, ge=0)

    # --- the sampler-trainer mismatch, the token filter, dynamic sampling ---
    mismatch_cap: PositiveFloat = Field(2.0, description="upper bound C of the mismatch weight")
    mismatch_floor: float = Field(0.0, ge=0, description="lower bound of a *_mask correction's weight (0: none)")
    entropy_top_share: float = Field(
        0.2, gt=0, le=1, description="share of tokens, by entropy, the top_entropy filter keeps"
    )
    max_draws: PositiveInt = Field(4, description="dynamic sampling's draws of prompts per step at most")

    # --- aggregation ---
    loss_norm_constant: PositiveInt | None = Field(
        None, description="divisor of seq_mean_token_sum_norm; None means the generation budget"
    )

    # --- PPO critic ---
    vf_coef: float = Field(0.5, ge=0)
    value_clip: PositiveFloat | None = 0.2
    critic_lr: PositiveFloat | None = None


class DPOConfig(_Common):
    """Direct preference optimisation on best-vs-worst pairs of sampled completions."""

    kind: Literal["dpo"] = "dpo"
    pairs_from: str = Field(
        "reference", description="who samples the pairs: reference (offline, the frozen warm "
        "start) or policy (online, the policy being trained)",
    )
    dpo_beta: PositiveFloat = 0.1


AlgorithmConfig = Annotated[RLConfig | DPOConfig, Field(discriminator="kind")]

#: kind -> its config type
CONFIG_TYPES: dict[str, type[RLConfig] | type[DPOConfig]] = {"rl": RLConfig, "dpo": DPOConfig}
