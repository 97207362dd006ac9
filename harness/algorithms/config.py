"""The resolved configuration of one algorithm: which part fills each slot, and its numbers.

A preset (see ``presets.py``) is an ``AlgorithmConfig`` with published defaults; a study arm or
``--set key=value`` overrides any field. Part names are checked against the registries when the
config is resolved, so an unknown name fails before any work with the list of valid names.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt


class AlgorithmConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    name: str = Field(description="preset this config started from")
    kind: Literal["rl", "dpo"] = "rl"

    # --- parts (registry names) ---
    advantage: str = "group_zscore"
    policy_loss: str = "clipped"
    aggregation: str = "token_mean"
    kl_estimator: Literal["k1", "k2", "k3"] = "k3"
    kl_placement: Literal["reward", "loss", "none"] = "none"
    critic: Literal["none", "value_head", "value_model"] = "none"

    # --- sampling and optimisation ---
    group_size: PositiveInt = 8
    lr: PositiveFloat = 1e-3
    epochs: PositiveInt = 1
    minibatches: PositiveInt = 1
    max_grad_norm: PositiveFloat = 1.0
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

    # --- DPO ---
    dpo_beta: PositiveFloat = 0.1
