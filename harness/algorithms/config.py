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
    """Policy-gradient algorithms: PPO, GRPO, Dr. GRPO, RLOO, REINFORCE++, CISPO, DAPO, GSPO."""

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

    entropy_coef: float = Field(0.0, ge=0)

    # --- policy loss numbers ---
    eps_low: PositiveFloat = 0.2
    eps_high: PositiveFloat = 0.2
    dual_clip: float | None = Field(None, gt=1.0)

    # --- advantage numbers ---
    adv_eps: PositiveFloat = 1e-4
    whiten_advantages: bool = False
    drop_degenerate: bool = False
    gamma: float = Field(1.0, ge=0, le=1)
    lam: float = Field(0.95, ge=0, le=1)

    # --- KL to the frozen reference ---
    kl_coef: float = Field(0.0, ge=0)

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
