"""What one trial needs to run (``TrialSpec``) and what it gives back (``TrialResult``).

Every section is strict: an unknown key is an error that names the field path.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    model_validator,
)

from harness.algorithms.config import AlgorithmConfig


class _Strict(BaseModel):
    """Unknown keys are errors, and so are infinite or NaN numbers where a setting is meant."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class TaskConfig(_Strict):
    name: str = "addition"
    n_train: PositiveInt = 2000
    n_eval: PositiveInt = 128
    min_digits: PositiveInt = 1
    max_digits: PositiveInt = 2
    path: str | None = Field(None, description="JSONL file for file-backed tasks (gsm8k_jsonl)")
    eval_path: str | None = Field(None, description="held-out JSONL; default: a split of `path`")
    reward: str | None = Field(
        None, description="registered reward name or `module:function`; default: the task's own"
    )


class TinyModelConfig(_Strict):
    hidden_size: PositiveInt = 64
    layers: PositiveInt = 2
    heads: PositiveInt = 4
    intermediate_size: PositiveInt = 128


class LoraConfig(_Strict):
    r: PositiveInt = 8
    alpha: PositiveInt = 16
    dropout: float = Field(0.0, ge=0, lt=1)
    target_modules: list[str] | str = "all-linear"


class ModelConfig(_Strict):
    name: str = Field("tiny", description="'tiny' (built offline), a hub id, or a local folder")
    tiny: TinyModelConfig = TinyModelConfig()
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    device: Literal["auto", "cpu", "cuda"] = "auto"
    lora: LoraConfig | None = None
    chat_template: bool = Field(True, description="wrap prompts in the tokenizer's chat template")


class WarmStartConfig(_Strict):
    enabled: bool = True
    steps: NonNegativeInt = 1000
    batch_size: PositiveInt = 32
    lr: PositiveFloat = 3e-3
    target_accuracy: float = Field(
        0.4, gt=0, le=1, description="stop SFT once greedy accuracy on train-validation prompts reaches this"
    )
    seed: NonNegativeInt = Field(0, description="warm starts are shared across trial seeds")


class TrainConfig(_Strict):
    steps: PositiveInt = 60
    prompts_per_step: PositiveInt = 8
    max_new_tokens: PositiveInt = 8
    temperature: PositiveFloat = 1.0
    eval_every: NonNegativeInt = 10
    eval_samples: PositiveInt = 4
    max_eval_prompts: PositiveInt | None = None
    threads: PositiveInt | None = Field(None, description="torch CPU threads; None keeps torch's")
    micro_batch_size: PositiveInt | None = Field(
        None,
        description="rows (DPO: pairs) per forward pass: the reference, old-log-prob and critic passes run over "
        "micro-batches of this many rows, and each update accumulates its minibatch's gradient over them: less "
        "memory, the same gradient and metrics to rounding. None: the whole batch at once",
    )
    gradient_checkpointing: bool = Field(
        False,
        description="recompute the policy's decoder-layer activations in the backward pass of its updates instead "
        "of keeping them: less memory, for one more forward pass of the trunk per update",
    )
    placebo_reward: bool = Field(
        False,
        description="train on the verifier's rewards shuffled across each batch (the same mean and spread, no link "
        "to the completion): the study's placebo arm (placebo: random_reward) sets it",
    )


class TrialSpec(_Strict):
    study: str = "adhoc"
    arm: str
    seed: NonNegativeInt = 0
    task: TaskConfig = TaskConfig()
    model: ModelConfig = ModelConfig()
    warmstart: WarmStartConfig = WarmStartConfig()
    train: TrainConfig = TrainConfig()
    algorithm: AlgorithmConfig
    cache_dir: str = ".cache/harness"

    def config_hash(self) -> str:
        """Hash of everything that changes the result (not where it is written)."""
        payload = self.model_dump(mode="json", exclude={"cache_dir", "study"})
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def trial_id(self) -> str:
        return f"{self.arm}-s{self.seed}-{self.config_hash()[:8]}"


#: What every held-out evaluation reports: greedy accuracy, and the mean reward of k samples.
GREEDY_METRIC = "eval/accuracy"
SAMPLED_METRIC = "eval/mean_reward"


class PromptScores(_Strict):
    """One evaluation's score of each held-out prompt, columnar (in the task's eval order), so
    the statistics can split noise into seed, prompt and eval-sampling parts."""

    model_config = ConfigDict(allow_inf_nan=True)  # a custom reward may return NaN

    step: NonNegativeInt
    prompt_ids: list[str]
    greedy: list[float] = Field(description=f"greedy score per prompt; {GREEDY_METRIC} is their mean")
    sampled_mean: list[float] = Field(
        description=f"mean of the k sampled rewards per prompt; {SAMPLED_METRIC} is their mean"
    )
    sampled_var: list[float] = Field(description="sample variance (ddof=1) of the k rewards; 0 when k == 1")
    samples: PositiveInt = Field(description="k, the sampled completions per prompt")

    @model_validator(mode="after")
    def _aligned(self) -> "PromptScores":
        n = len(self.prompt_ids)
        if {len(self.greedy), len(self.sampled_mean), len(self.sampled_var)} != {n}:
            raise ValueError(f"step {self.step}: every per-prompt list must have one value per prompt id ({n})")
        if len(set(self.prompt_ids)) != n:
            raise ValueError(f"step {self.step}: prompt ids repeat")
        return self


#: The codes that start a trial's warning lines (``TrialResult.warnings``).
WARMSTART_BELOW_TARGET = "warmstart_below_target"
NO_LEARNING_SIGNAL = "no_learning_signal"


class TrialResult(_Strict):
    model_config = ConfigDict(allow_inf_nan=True)  # a metric may be NaN (explained variance, ...)

    trial_id: str
    status: Literal["completed", "failed"] = "completed"
    error: str | None = None
    final: dict[str, float] = {}
    history: list[dict[str, Any]] = Field(
        default_factory=list, description="one dict per logged step: {'step': n, metric: value, ...}"
    )
    wall_time_s: float = 0.0
    prompts: list[PromptScores] = Field(
        default_factory=list, description="per-prompt scores of every evaluation, step 0 included"
    )
    warnings: list[str] = Field(
        default_factory=list,
        description=f"one line each, '<code>: <what happened and what to do>', code {WARMSTART_BELOW_TARGET} or "
        f"{NO_LEARNING_SIGNAL}: the trial ran, but its result may not mean what it seems",
    )
