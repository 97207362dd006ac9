"""What one trial needs to run (``TrialSpec``) and what it gives back (``TrialResult``).

Every section is strict: an unknown key is an error that names the field path.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    SerializerFunctionWrapHandler,
    create_model,
    field_validator,
    model_serializer,
    model_validator,
)

from harness.algorithms.config import AlgorithmConfig, identity
from harness.engine.rollout_config import RolloutConfig
from harness.engine.task_config import TaskConfig
from harness.engine.trainer_config import TrainerConfig
from harness.ground.strict import StrictModel


class TinyModelConfig(StrictModel):
    hidden_size: PositiveInt = Field(64, description="hidden width of the built-in model (model.name: tiny only)")
    layers: PositiveInt = Field(2, description="decoder layers of the built-in model")
    heads: PositiveInt = Field(4, description="attention heads of the built-in model")
    intermediate_size: PositiveInt = Field(128, description="MLP width of the built-in model")


class LoraConfig(StrictModel):
    r: PositiveInt = Field(8, description="LoRA rank")
    alpha: PositiveInt = Field(16, description="LoRA alpha (peft's lora_alpha; the update is scaled by alpha / r)")
    dropout: float = Field(0.0, ge=0, lt=1, description="dropout on the LoRA branch")
    target_modules: list[str] | str = Field(
        "all-linear", description="module names to adapt, or all-linear (every linear layer but the output head)"
    )


class ModelConfig(StrictModel):
    name: str = Field(
        "tiny",
        description="'tiny' (built offline), a hub id, a local folder, a .gguf file, or package:<distribution> for "
        "the one .gguf an installed package ships (a GGUF is converted once into <cache_dir>/models/)",
    )
    tiny: TinyModelConfig = Field(
        TinyModelConfig(), description="the built-in model's size; read only when model.name is tiny"
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="weights' dtype; auto: bfloat16 on CUDA, float32 on the CPU"
    )
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="auto: CUDA when one is visible, else the CPU")
    lora: LoraConfig | None = Field(
        None,
        description="null trains every weight; a LoRA block trains a peft adapter only (the reference is the "
        "base model with the adapter off)",
    )
    chat_template: Literal["auto"] | bool = Field(
        "auto",
        description="wrap prompts in the tokenizer's chat template: auto, when the tokenizer has one; true, always "
        "(a tokenizer without one is an error); false, never (the tiny model has none and ignores this)",
    )

    @field_validator("chat_template", mode="before")
    @classmethod
    def _auto_true_or_false(cls, v: Any) -> Any:
        if v == "auto" or isinstance(v, bool):
            return v
        raise ValueError(f"{v!r} is not one of auto, true, false")

    def keyed(self) -> dict[str, Any]:
        """The settings as trial ids and cache keys hash them: ``chat_template: auto`` as ``true``,
        the default of the bool this key was before ``auto`` existed. The two run alike wherever
        both run (``true`` only refuses a tokenizer without a template), so the trials and warm
        starts of existing studies keep their ids and cache keys."""
        out = self.model_dump(mode="json")
        if out["chat_template"] == "auto":
            out["chat_template"] = True
        return out


class WarmStartConfig(StrictModel):
    enabled: bool = Field(True, description="run supervised fine-tuning on the task's worked solutions before RL")
    steps: NonNegativeInt = Field(1000, description="the most SFT steps (it stops earlier at target_accuracy)")
    batch_size: PositiveInt = Field(32, description="SFT examples per step")
    lr: PositiveFloat = Field(3e-3, description="SFT learning rate")
    target_accuracy: float = Field(
        0.4, gt=0, le=1, description="stop SFT once greedy accuracy on train-validation prompts reaches this"
    )
    seed: NonNegativeInt = Field(0, description="warm starts are shared across trial seeds")


class TrainConfig(StrictModel):
    steps: PositiveInt = Field(60, description="RL steps per trial")
    prompts_per_step: PositiveInt = Field(8, description="prompts per RL step, each sampled group_size times")
    max_new_tokens: PositiveInt = Field(
        8,
        description="the most tokens a completion may have, in training and evaluation; in a tool-calling "
        "episode, each turn",
    )
    temperature: PositiveFloat = Field(
        1.0, description="sampling temperature of training rollouts and of evaluation's sampled completions"
    )
    eval_every: NonNegativeInt = Field(
        10, description="evaluate every this many steps (and at the start and the end); 0: start and end only"
    )
    eval_samples: PositiveInt = Field(4, description="sampled completions per held-out prompt, for eval/mean_reward")
    eval_pass_k: list[PositiveInt] = Field(
        [],
        description="also score eval/pass@k and eval/pass^k (the unbiased estimators from the eval_samples "
        "sampled answers) for each k here, per prompt and as their means; each k <= eval_samples; needs 0/1 rewards",
    )
    max_eval_prompts: PositiveInt | None = Field(
        None, description="score at most this many held-out prompts; null: all of task.n_eval"
    )
    threads: PositiveInt | None = Field(None, description="torch CPU threads; null keeps torch's")
    micro_batch_size: PositiveInt | None = Field(
        None,
        description="rows (DPO: pairs) per forward pass: the reference, old-log-prob and critic passes run over "
        "micro-batches of this many rows, and each update accumulates its minibatch's gradient over them: less "
        "memory, the same gradient and metrics to rounding. null: the whole batch at once",
    )
    gradient_checkpointing: bool = Field(
        False,
        description="recompute the policy's decoder-layer activations in the backward pass of its updates instead "
        "of keeping them: less memory, for one more forward pass of the trunk per update",
    )
    mask_tool_tokens: bool = Field(
        True,
        description="tool-calling episodes: keep the tokens a tool (and the chat template around it) wrote out of the "
        "loss, the KL, the entropy and the length normalisation; false trains on them too (an ablation)",
    )
    placebo_reward: bool = Field(
        False,
        description="train on the verifier's rewards shuffled across each batch (the same mean and spread, no link "
        "to the completion): the study's placebo arm (placebo: random_reward) sets it",
    )

    @model_validator(mode="after")
    def _pass_k(self) -> TrainConfig:
        too_big = [k for k in self.eval_pass_k if k > self.eval_samples]
        if too_big:
            raise ValueError(
                f"eval_pass_k asks for k={too_big[0]} but eval_samples is {self.eval_samples}: each k must be at most "
                "eval_samples (raise train.eval_samples or drop that k)"
            )
        if len(set(self.eval_pass_k)) != len(self.eval_pass_k):
            raise ValueError(f"eval_pass_k repeats a k: {self.eval_pass_k}")
        return self


class EvalSubsetConfig(StrictModel):
    """Intermediate evaluations on a fixed stratified subset of the held-out prompts; the start
    and the last evaluation score them all (``harness.engine.eval_subset``).

    The subset is drawn once, from the start evaluation: the held-out prompts are ordered by
    their score there (the warm-started policy's, before any update: the same for every arm and
    seed of a study, as the warm start and the evaluation's draws are), cut into ``strata``
    strata of near-equal size, and ``size`` of them drawn from the strata in proportion to their
    size, by the pre-registered ``seed``. Every arm and seed of the study evaluates the same
    prompts, and an interval read at a subset evaluation carries the subset's sampling variance
    (``harness.stats.eval_subset``)."""

    size: PositiveInt | Annotated[float, Field(gt=0, lt=1)] = Field(
        description="the subset: a count of held-out prompts, or a fraction of them in (0, 1)"
    )
    strata: PositiveInt = Field(4, description="strata of start-point difficulty the subset is drawn from")
    by: Literal["start_difficulty"] = Field(
        "start_difficulty",
        description="what the strata cut: start_difficulty, each prompt's sampled mean reward at the start "
        "evaluation (ties by its greedy score, then by the seed's draw)",
    )
    seed: NonNegativeInt = Field(0, description="the pre-registered seed of the draw (ties and the sample)")

    def count(self, prompts: int) -> int:
        """The subset's size out of ``prompts`` held-out prompts (a fraction rounded, at least 1)."""
        return self.size if isinstance(self.size, int) else max(1, round(self.size * prompts))


#: A benchmark's name becomes part of its metric names (``eval/<name>/accuracy``): this alphabet.
BENCHMARK_NAME = re.compile(r"[a-z][a-z0-9_]*")
#: The overall verdict's name across benchmarks (MLflow tag ``verdict.overall.<arm>``): no benchmark's.
OVERALL = "overall"
#: The per-benchmark metrics, by the short name a study gives (``metric: accuracy``).
BENCHMARK_METRICS = ("accuracy", "mean_reward")


#: the task keys a benchmark may set: a benchmark is scored by its verifier on single-turn completions
BENCHMARK_TASK_KEYS = ("name", "reasoning_gym", "n_train", "n_eval", "min_digits", "max_digits", "path", "eval_path")

BenchmarkTaskConfig = create_model(
    "BenchmarkTaskConfig",
    __base__=StrictModel,
    __doc__="A benchmark's task: the study task's keys a verifier-scored, single-turn task reads.",
    **{key: (TaskConfig.model_fields[key].annotation, TaskConfig.model_fields[key]) for key in BENCHMARK_TASK_KEYS},
    reward=(
        str | None,
        Field(None, description="registered reward name or `module:function` scoring it; default: the task's own"),
    ),
)


class BenchmarkConfig(StrictModel):
    """One named held-out benchmark: a task whose held-out prompts every evaluation also scores
    (greedy accuracy and the mean reward of ``train.eval_samples`` samples, as the study's own),
    recorded per prompt under the metric names ``eval/<name>/accuracy`` and
    ``eval/<name>/mean_reward``. Its training prompts are never used."""

    name: str = Field(description="the benchmark's name, [a-z][a-z0-9_]*: its metrics are eval/<name>/<metric>")
    task: BenchmarkTaskConfig = Field(
        description="the task its held-out prompts come from (the study task's keys but tools and learned "
        "rewards; its size is task.n_eval, at most: prompts that are also among the study's training prompts "
        "are left out)"
    )
    metric: Literal[BENCHMARK_METRICS] | None = Field(  # type: ignore[valid-type]
        None,
        description="the metric its verdicts are decided on: accuracy (greedy) or mean_reward (sampled); "
        "default: the study's primary metric's (accuracy unless it is eval/mean_reward)",
    )
    min_effect: float | None = Field(
        None, gt=0, description="smallest difference worth knowing about on this benchmark; default: the study's"
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not BENCHMARK_NAME.fullmatch(v):
            raise ValueError(f"benchmark name {v!r} must match [a-z][a-z0-9_]* (it becomes part of metric names)")
        if v == OVERALL:
            raise ValueError(f"benchmark name {v!r} is reserved for the overall verdict across benchmarks")
        return v

    def task_config(self) -> TaskConfig:
        """Its task as the task builder reads it (a reasoning_gym block names its task, as in the study's)."""
        return TaskConfig(**self.task.model_dump(exclude_unset=self.task.reasoning_gym is not None))

    def primary_metric(self, study_primary: str) -> str:
        """The full name of the metric its verdicts are decided on (``eval/<name>/accuracy``):
        ``metric``, else the study's primary metric's kind."""
        kind = self.metric or ("mean_reward" if study_primary == SAMPLED_METRIC else "accuracy")
        return benchmark_metric(self.name, kind)


def benchmark_metric(benchmark: str, metric: str) -> str:
    """``eval/<benchmark>/<metric>``: a benchmark's metric names (the study's own task keeps ``eval/<metric>``)."""
    return f"eval/{benchmark}/{metric}"


def metric_name(metric: str, benchmark: str | None) -> str:
    """``eval/accuracy`` as the study's task names it, or ``eval/<benchmark>/accuracy``."""
    return metric if benchmark is None else benchmark_metric(benchmark, metric.removeprefix("eval/"))


#: The compute axis on every row of a trial's history, cumulative from the start evaluation
#: (step 0: all 0); ``harness.engine.compute`` says how each is counted.
COMPUTE_METRICS = ("compute/flops", "compute/generated_tokens", "compute/trained_tokens", "compute/wall_s")
#: What a trial's looks are counted in: a compute column of every history row, or the step
LOOK_AXES = (*COMPUTE_METRICS, "step")


class LookPoints(StrictModel):
    """Pre-registered points of a trial's compute at which it is looked at (issue 38): the trial
    evaluates at the first step whose history row reaches each point (besides ``eval_every`` and
    the last step) and tags that row ``"look": k``; a trial may pause after a look and resume from
    it (``harness.engine.trial.run_trial``)."""

    axis: Literal[LOOK_AXES] = Field(  # type: ignore[valid-type]
        description="what the points are counted in: a cumulative column of every history row, compute/flops, "
        "compute/generated_tokens, compute/trained_tokens, compute/wall_s (not reproducible), or step"
    )
    at: list[float] = Field(
        min_length=1,
        description="the points, absolute values on the axis, finite, > 0 and rising strictly; the last is the budget",
    )
    run_to: NonNegativeInt | None = Field(
        None,
        description="a segment of the trial (a compute-look study runs its trials in segments): the 0-based look "
        "it trains to and pauses after, resuming from the look before it; the last look: to the budget. None: the "
        "trial in one piece",
    )

    @model_validator(mode="after")
    def _run_to_a_look(self) -> LookPoints:
        if self.run_to is not None and self.run_to >= len(self.at):
            raise ValueError(f"looks.run_to is {self.run_to}, but the looks are 0..{len(self.at) - 1}")
        return self

    @property
    def is_last(self) -> bool:
        """Whether the trial runs to the budget: in one piece, or its last segment."""
        return self.run_to is None or self.run_to == len(self.at) - 1

    @property
    def pause_after(self) -> int | None:
        """The look a segment pauses after (None: it runs to the budget)."""
        return None if self.is_last else self.run_to

    @property
    def resume_after(self) -> int | None:
        """The look a segment resumes from (None: it starts at step 0)."""
        return self.run_to - 1 if self.run_to else None

    @field_validator("at")
    @classmethod
    def _rising(cls, at: list[float]) -> list[float]:
        bad = next((x for x in at if x <= 0), None)  # (not finite: refused as every float field's)
        if bad is not None:
            raise ValueError(f"looks.at holds {bad}: every point must be a number > 0 on the axis")
        for before, after in zip(at, at[1:]):
            if after <= before:
                raise ValueError(f"looks.at must rise strictly: {after} follows {before}")
        return at


class TrialSpec(StrictModel):
    study: str = "adhoc"
    arm: str
    seed: NonNegativeInt = 0
    task: TaskConfig = TaskConfig()
    model: ModelConfig = ModelConfig()
    warmstart: WarmStartConfig = WarmStartConfig()
    train: TrainConfig = TrainConfig()
    algorithm: AlgorithmConfig
    benchmarks: list[BenchmarkConfig] = Field(
        default_factory=list, description="held-out benchmarks every evaluation scores besides the task's own"
    )
    trainer: TrainerConfig = Field(
        TrainerConfig(), description="the program that trains the trial: the builtin loop or one under the contract"
    )
    rollout: RolloutConfig = Field(
        RolloutConfig(), description="what samples the training rollouts (hf or a vLLM server) and how stale"
    )
    looks: LookPoints | None = Field(
        None, description="points of the compute axis the trial is evaluated at and may pause after (compute looks)"
    )
    eval_subset: EvalSubsetConfig | None = Field(
        None, description="intermediate evaluations on a fixed stratified subset of the held-out prompts"
    )
    cache_dir: str = ".cache/harness"

    @model_validator(mode="after")
    def _eval_subset_fits(self) -> TrialSpec:
        """The subset is drawn from the start evaluation inside the builtin loop, which must score
        the same prompts alike for every seed (a vLLM server draws its samples from the trial seed),
        and it must leave at least 2 prompts per stratum and some prompts out."""
        subset = self.eval_subset
        if subset is None:
            return self
        if not self.trainer.is_builtin or self.rollout.backend != "hf":
            raise ValueError(
                "eval_subset needs the builtin trainer and rollout.backend: hf (the subset is drawn from the start "
                "evaluation, which must score every seed alike); drop eval_subset or use them"
            )
        prompts = min(self.task.n_eval, self.train.max_eval_prompts or self.task.n_eval)
        n = subset.count(prompts)
        if not 2 * subset.strata <= n < prompts:
            raise ValueError(
                f"eval_subset: a subset of {n} of the {prompts} held-out prompts in {subset.strata} strata; it needs "
                f"at least 2 per stratum ({2 * subset.strata}) and fewer than all {prompts}: change size or strata"
            )
        return self

    @model_validator(mode="after")
    def _rollout_backend_fits(self) -> TrialSpec:
        """The vLLM backend samples single-turn completions for the builtin RL step; for a program
        trainer whose checkpoints the harness judges, it is the judge's backend."""
        if self.rollout.backend == "hf":
            return self
        refused = (
            "tool-calling episodes (task.tools) are sampled in the trial process only"
            if self.task.tools
            else "the built-in tiny model without a warm start has no model folder a server can load"
            if self.model.name == "tiny" and not self.warmstart.enabled
            else f"a {self.algorithm.kind} arm samples its pairs in the trial process"
            if self.algorithm.kind != "rl"
            else f"trainer {self.trainer.kind} samples with its own program (with scores: judge and max_staleness 0, "
            "vllm is the judge's backend)"
            if not self.trainer.is_builtin and (self.trainer.scores != "judge" or self.rollout.max_staleness)
            else None
        )
        if refused:
            raise ValueError(f"rollout.backend: vllm cannot be used here: {refused}; use rollout.backend: hf")
        return self

    @model_validator(mode="after")
    def _looks_need_the_builtin_loop(self) -> TrialSpec:
        """Only the builtin loop evaluates at a look's step and can pause there; a program trainer
        evaluates the checkpoints it writes."""
        if self.looks is not None and not self.trainer.is_builtin:
            raise ValueError(
                f"looks: trainer {self.trainer.kind} cannot be evaluated at compute looks nor paused after one; "
                "use trainer: builtin or drop the looks"
            )
        if self.looks is not None and self.looks.run_to is not None and self.rollout.backend != "hf":
            raise ValueError(
                f"looks: a trial run in segments resumes its training state from a checkpoint, which a "
                f"{self.rollout.backend} server's sampling cannot follow; use rollout.backend: hf with compute_looks"
            )
        return self

    @model_serializer(mode="wrap")
    def _without_defaults_added_later(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """No benchmarks, the builtin trainer, no reasoning-gym task, the hf rollout, no looks: the spec dumps (and
        hashes) as it did before those existed, so the trial ids of studies without them are unchanged."""
        out = handler(self)
        for task in (out["task"], *(benchmark["task"] for benchmark in out.get("benchmarks", ()))):
            if task.get("reasoning_gym", False) is None:  # none: dumped (and hashed) as before it existed
                del task["reasoning_gym"]
        if not self.benchmarks:
            out.pop("benchmarks", None)
        if self.trainer == TrainerConfig():
            out.pop("trainer", None)
        if self.rollout == RolloutConfig():
            out.pop("rollout", None)
        if self.looks is None:
            out.pop("looks", None)
        if self.eval_subset is None:
            out.pop("eval_subset", None)
        return out

    def config_hash(self) -> str:
        """Hash of everything that changes the result (not where it is written)."""
        payload = self.model_dump(mode="json", exclude={"cache_dir", "study", "algorithm"})
        payload["model"] = self.model.keyed()
        if not self.train.eval_pass_k:  # added later: trials that do not ask keep their ids
            del payload["train"]["eval_pass_k"]
        payload["algorithm"] = identity(self.algorithm)
        payload.pop("rollout", None)
        if self.rollout.keyed() is not None:  # added later: hf at staleness 0 keeps the ids it had
            payload["rollout"] = self.rollout.keyed()
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def trial_id(self) -> str:
        return f"{self.arm}-s{self.seed}-{self.config_hash()[:8]}"

    def segment(self, look: int) -> TrialSpec:
        """This trial's segment that trains to ``look`` (0-based) and pauses there (the last look:
        to the budget): a trial of its own, with its own id (``LookPoints.run_to``)."""
        if self.looks is None:
            raise ValueError(f"trial {self.trial_id} has no compute looks: it runs in one piece")
        looks = self.looks.model_copy(update={"run_to": look})
        return self.model_copy(update={"looks": LookPoints.model_validate(looks.model_dump())}, deep=True)

    def whole_trial_id(self) -> str:
        """The id of the design trial this spec is a segment of (its last segment's; its own where
        it runs to the budget): the name every segment of the trial keeps its checkpoints under."""
        if self.looks is None or self.looks.is_last:
            return self.trial_id
        return self.segment(len(self.looks.at) - 1).trial_id


#: How ``compute/flops`` is counted, stored in each record that has it (``TrialRecord.flops_counting``):
#: 1 (records without the field) charged the LM head on every prompt token and prefilled each
#: sample's prompt; 2 charges the head only where a pass computes logits and prefills a group's
#: prompt once, as the sampler does. Trials counted two ways are not on one axis.
FLOPS_COUNTING = 2

#: What every held-out evaluation reports: greedy accuracy, and the mean reward of k samples.
GREEDY_METRIC = "eval/accuracy"
SAMPLED_METRIC = "eval/mean_reward"

#: The range of the final metrics that have one, for "failures: worst" and bounded report bands
#: (a program's handed-in scores are checked against it too).
METRIC_RANGES: dict[str, tuple[float, float]] = {
    "eval/accuracy": (0.0, 1.0),
    "eval/accuracy_start": (0.0, 1.0),
    "train/frac_degenerate": (0.0, 1.0),
    "train/clip_frac": (0.0, 1.0),
    "train/dpo_pair_acc": (0.0, 1.0),
}


def pass_metrics(k: int) -> tuple[str, str]:
    """The names of pass@k and pass^k among the evaluation metrics."""
    return f"eval/pass@{k}", f"eval/pass^{k}"


class PromptScores(StrictModel):
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
    benchmark: str | None = Field(
        None, description="the benchmark these prompts belong to (``TrialSpec.benchmarks``); None: the study's task"
    )
    pass_rates: dict[str, list[float]] | None = Field(
        None,
        description="per-prompt eval/pass@k and eval/pass^k by metric name (train.eval_pass_k); None when not asked",
    )
    strata: list[NonNegativeInt] | None = Field(
        None,
        description="each scored prompt's stratum under the study's eval_subset (the start, the subset or the last "
        "evaluation); None without one",
    )
    stratum_sizes: list[PositiveInt] | None = Field(
        None, description="the held-out prompts in each stratum (by its index), with strata"
    )

    @property
    def is_subset(self) -> bool:
        """It scored a stratified subset of the held-out prompts, not all of them."""
        return self.stratum_sizes is not None and len(self.prompt_ids) < sum(self.stratum_sizes)

    @model_validator(mode="after")
    def _aligned(self) -> PromptScores:
        n = len(self.prompt_ids)
        if {len(self.greedy), len(self.sampled_mean), len(self.sampled_var)} != {n}:
            raise ValueError(f"step {self.step}: every per-prompt list must have one value per prompt id ({n})")
        if any(len(v) != n for v in (self.pass_rates or {}).values()):
            raise ValueError(f"step {self.step}: every pass rate list must have one value per prompt id ({n})")
        if len(set(self.prompt_ids)) != n:
            raise ValueError(f"step {self.step}: prompt ids repeat")
        if (self.strata is None) != (self.stratum_sizes is None):
            raise ValueError(f"step {self.step}: strata and stratum_sizes go together")
        if self.strata is not None and (
            len(self.strata) != n
            or any(h >= len(self.stratum_sizes) for h in self.strata)
            or any(self.strata.count(h) > size for h, size in enumerate(self.stratum_sizes))
        ):
            raise ValueError(f"step {self.step}: every prompt needs a stratum of stratum_sizes, within its size")
        return self


#: The codes that start a trial's warning lines (``TrialResult.warnings``).
WARMSTART_BELOW_TARGET = "warmstart_below_target"

#: What a trial process says on stderr while it builds something slow before training (its log
#: file, under a worker): a parent that waits on it (the seed check, say) shows these lines live.
WARMSTART_SAYS = "warm start:"
REWARD_MODEL_SAYS = "reward model:"
PROGRESS_PREFIXES = (WARMSTART_SAYS, REWARD_MODEL_SAYS)
NO_LEARNING_SIGNAL = "no_learning_signal"


class TrialResult(StrictModel):
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
    paused_at_look: NonNegativeInt | None = Field(
        None,
        description="the look after whose evaluation the trial paused with a checkpoint (run_trial's "
        "pause_after_look): history, prompts and final stop there; None: it ran to its last step (or failed)",
    )
