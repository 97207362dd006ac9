"""The study file as pydantic models: ``Study`` and its ``Arm`` entries (the other sections are in
``harness.study.sections``, the override keys in ``harness.study.overrides``).

Everything here is structural and needs no algorithm registry: types, names, seeds, which keys an
override, a grid or a search space may touch, and how the sections agree with each other. Checks
that need the presets (does ``arms[1].set`` make a valid GRPO?) live in ``harness.study.load``, which is
also where a file is read, its ``include:`` merged, and a study expanded into trials.

Every error carries the path of the field it is about; ``harness.study.field_errors`` turns a
pydantic ``ValidationError`` into the one line the CLI prints, e.g.
``arms[1].set.eps_hgh: unknown key; valid: adv_eps, advantage, ...``.
"""

from __future__ import annotations

import re
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from harness.engine.rollout_config import RolloutConfig
from harness.engine.spec import (
    METRIC_RANGES,
    BenchmarkConfig,
    EvalSubsetConfig,
    ModelConfig,
    TrainConfig,
    WarmStartConfig,
)
from harness.engine.task_config import TaskConfig
from harness.engine.trainer_config import TrainerConfig
from harness.ground.strict import StrictModel
from harness.study.field_errors import FieldError, short_repr
from harness.study.overrides import (
    check_override_key,
    coerce_override,
    first_repeat,
    format_value,
    is_scalar,
    set_keys,
    split_key,
    train_keys,
)
from harness.study.resources import EXECUTORS, Resources
from harness.study.sections import (
    AA,
    AA_SEED_OFFSET,
    CALIBRATION_SUFFIX,
    PLACEBO,
    ComputeLooks,
    PrimaryAt,
    Scaling,
    SelfChecks,
    Sequential,
    Tuning,
    check_seed_list,
)

# --------------------------------------------------------------------------------------------

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def check_name(value: Any, what: str) -> str:
    """Study and arm names become folder and file names: keep them to a safe alphabet."""
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, got {short_repr(value)}")
    if "/" in value or "\\" in value:
        raise ValueError(f"{what} {value!r} must not contain a path separator")
    if ".." in value:
        raise ValueError(f"{what} {value!r} must not contain '..'")
    if not NAME_PATTERN.fullmatch(value):
        raise ValueError(
            f"{what} {value!r} must match [A-Za-z0-9][A-Za-z0-9_.-]* "
            "(letters, digits, '_', '.', '-'; starting with a letter or digit)"
        )
    return value


#: Final metrics the trainer reports (listed in docs/study-reference.md); ``primary_metric`` must be one.
FINAL_METRICS: tuple[str, ...] = (
    "eval/accuracy",
    "eval/mean_reward",
    "eval/accuracy_start",
    "tokens/total",
    "time/total_s",
    "train/reward_mean",
    "train/reward_std_in_group",
    "train/frac_degenerate",
    "train/kl_ref",
    "train/entropy",
    "train/clip_frac",
    "train/ratio_mean",
    "train/completion_len",
    "train/loss",
    "train/grad_norm",
    "train/value_loss",
    "train/explained_var",
    "train/dpo_margin",
    "train/dpo_pair_acc",
)

#: pass@k and pass^k, final metrics when ``train.eval_pass_k`` includes k
PASS_METRIC = re.compile(r"eval/pass[@^]([1-9][0-9]*)")

#: The analyses a study may pre-register as its primary test ("auto": seed x prompt when
#: per-prompt scores are recorded, else the paired t when seed-matched, else Welch's t).
PRIMARY_TESTS = ("auto", "seed_prompt", "welch_t", "paired_t", "yuen")


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------


class Arm(StrictModel):
    """One thing being compared: a preset, with optional algorithm, train and rollout overrides."""

    name: str = Field(description="the arm's name, used in condition names, trial ids and reports")
    algorithm: str = Field(description="preset name (see harness.algorithms.presets)")
    description: str = Field("", description="free text for the file's readers")
    set: dict[str, Any] = Field(
        default_factory=dict,
        description="algorithm config overrides, and rollout.backend / rollout.max_staleness (the study's rollout "
        "for this arm's trials)",
    )
    train: dict[str, Any] = Field(default_factory=dict, description="TrainConfig overrides")
    trainer: TrainerConfig | None = Field(
        None, description="the program that trains this arm's trials (see the study's `trainer`); default: the study's"
    )
    resources: Resources = Field(
        default_factory=Resources, description="this arm's resources per trial, over the study-wide `resources`"
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: Any) -> str:
        return check_name(v, "arm name")

    @field_validator("algorithm")
    @classmethod
    def _algorithm(cls, v: str) -> str:
        if not v:
            raise ValueError("preset name must not be empty")
        return v

    @field_validator("set")
    @classmethod
    def _set(cls, v: dict[str, Any]) -> dict[str, Any]:
        for key in v:
            if key not in set_keys():
                hint = (
                    " (the preset, and with it the kind, is chosen by `algorithm`)" if key in ("name", "kind") else ""
                )
                raise FieldError((key,), "unknown key; valid: " + ", ".join(set_keys()) + hint)
        return {key: coerce_override(key, value, (key,)) for key, value in v.items()}

    @field_validator("train")
    @classmethod
    def _train(cls, v: dict[str, Any]) -> dict[str, Any]:
        for key in v:
            if key not in train_keys():
                raise FieldError((key,), "unknown key; valid: " + ", ".join(train_keys()))
        return {key: coerce_override(f"train.{key}", value, (key,)) for key, value in v.items()}


class Study(StrictModel):
    """A pre-registered comparison: arms x (grid cells) x seeds, against a control arm.

    ``seeds`` is always a list after validation (``seeds: 3`` means ``[0, 1, 2]``).
    """

    name: str = Field(description="the study's name: its folder under runs/ and reports/")
    description: str = Field("", description="free text, shown in the report")
    output_dir: str | None = Field(None, description="default: runs/<name>, relative to the CWD")
    task: TaskConfig = Field(TaskConfig(), description="the verifiable task every trial trains and is scored on")
    model: ModelConfig = Field(ModelConfig(), description="the policy model, its dtype, device and LoRA")
    warmstart: WarmStartConfig = Field(
        WarmStartConfig(), description="supervised fine-tuning before RL, shared by every trial (cached)"
    )
    train: TrainConfig = Field(TrainConfig(), description="the RL budget and evaluation schedule of every trial")
    rollout: RolloutConfig = Field(
        RolloutConfig(),
        description="what samples every trial's training rollouts: hf (in the trial process) or a vLLM server, "
        "and how many steps stale a sample may be",
    )
    primary_metric: str = Field("eval/accuracy", description="the final metric the comparisons are decided on")
    direction: Literal["maximize", "minimize"] = Field("maximize", description="whether more of the metric is better")
    min_effect: float | None = Field(
        None, gt=0, description="smallest difference of the primary metric worth knowing about, in its units"
    )
    test: Literal[PRIMARY_TESTS] = Field(  # type: ignore[valid-type]
        "auto",
        description="the pre-registered primary test; auto: seed x prompt when per-prompt scores "
        "are recorded, else the paired t when seed-matched, else Welch's t",
    )
    failures: Literal["drop", "worst"] = Field(
        "drop", description="drop failed trials (with a warning) or score them at the metric's worst value"
    )
    trainer: TrainerConfig = Field(
        TrainerConfig(),
        description="the program that trains every arm's trials unless the arm names its own: builtin, command or "
        "trl (a bare kind, or {kind, command, env, scores, vllm}; docs/trainers.md)",
    )
    control: str | None = Field(None, description="required with more than one arm")
    seeds: list[int] = Field(
        description="the trial seeds of every condition: a count n (seeds 0..n-1) or a list of distinct integers"
    )
    arms: list[Arm] = Field(description="the things compared, each a preset with optional overrides")
    grid: dict[str, list[Any]] = Field(
        default_factory=dict, description="override key -> values; every arm runs at every combination"
    )
    tuning: Tuning | None = Field(None, description="tune each arm with Optuna before the comparison")
    executor: Literal[EXECUTORS] | None = Field(  # type: ignore[valid-type]
        None,
        description="where trials run: local (this machine's pool, the default), slurm or ray; "
        "`harness run --executor` overrides it",
    )
    resources: Resources = Field(
        default_factory=Resources, description="every trial's resources (an arm's own `resources` overrides them)"
    )
    checks: SelfChecks = Field(SelfChecks(), description="self-checks run with the study (each can be switched off)")
    calibration: Literal["none", "aa"] = Field(
        "none",
        description="aa: add an A/A tripwire, a copy of the control on disjoint seeds compared with it like "
        "any arm but reported apart (a difference means the verdicts are not to be trusted)",
    )
    placebo: Literal["none", "random_reward"] = Field(
        "none",
        description="random_reward: add the control trained on its own rewards shuffled across each batch "
        "(the same mean, no signal), reported apart: a gain over it is not format or length drift",
    )
    sequential: Sequential | None = Field(
        None, description="buy seeds look by look and stop each comparison once decided (seeds: the pool, in order)"
    )
    compute_looks: ComputeLooks | None = Field(
        None,
        description="look at fractions of the primary comparison's budget and stop an arm once it is decided worse "
        "than the control (or the best arm) by more than `catch_up`; every other verdict at the budget",
    )
    benchmarks: list[BenchmarkConfig] = Field(
        default_factory=list,
        description="named held-out benchmarks every evaluation also scores (each {name, task, metric, "
        "min_effect}); the report gives a verdict per arm per benchmark and an overall one per arm",
    )
    primary_at: PrimaryAt = Field(
        PrimaryAt(),
        description="where the pre-registered primary comparison reads each trial: its final evaluation, "
        "its curve at a compute budget, or the mean of its curve up to one",
    )
    scaling: Scaling = Field(
        Scaling(), description="fitted saturating curves of the primary metric against primary_at.axis"
    )
    eval_subset: EvalSubsetConfig | None = Field(
        None,
        description="evaluate the steps between the start and the last on a fixed subset of the held-out prompts "
        "({size, strata, by: start_difficulty, seed}: stratified by the start evaluation's scores, one for every arm "
        "and seed); the start and the last evaluation score them all, and an interval read at a subset evaluation "
        "carries the subset's sampling variance",
    )

    #: the file it was loaded from (not part of the study; set by ``load_study``)
    _source: Path | None = PrivateAttr(None)

    @property
    def source(self) -> Path | None:
        return self._source

    @source.setter
    def source(self, path: Path) -> None:
        self._source = path

    # -- field checks -----------------------------------------------------------------------

    @field_validator("name")
    @classmethod
    def _name(cls, v: Any) -> str:
        return check_name(v, "study name")

    @field_validator("output_dir")
    @classmethod
    def _output_dir(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("must not be empty (leave it out for runs/<name>)")
        return v

    @field_validator("primary_metric")
    @classmethod
    def _metric(cls, v: str) -> str:
        if v not in FINAL_METRICS and not PASS_METRIC.fullmatch(v):
            raise ValueError(
                f"unknown metric {v!r}; valid: {', '.join(FINAL_METRICS)}, or eval/pass@k / eval/pass^k "
                "with k in train.eval_pass_k"
            )
        return v

    @field_validator("seeds", mode="before")
    @classmethod
    def _seeds(cls, v: Any) -> list[int]:
        if isinstance(v, int) and not isinstance(v, bool):
            if v < 1:
                raise ValueError(f"the number of seeds must be at least 1, got {v}")
            return list(range(v))
        if isinstance(v, list):
            return check_seed_list(v)
        raise ValueError(
            f"expected a number of seeds (n means 0..n-1) or a list of distinct non-negative "
            f"integers, got {short_repr(v)}"
        )

    @field_validator("arms")
    @classmethod
    def _arms(cls, v: list[Arm]) -> list[Arm]:
        if not v:
            raise ValueError("at least one arm is required")
        first: dict[str, int] = {}
        for i, arm in enumerate(v):
            if arm.name in first:
                raise FieldError((i, "name"), f"duplicate arm name {arm.name!r} (also arms[{first[arm.name]}])")
            first[arm.name] = i
        return v

    @field_validator("benchmarks")
    @classmethod
    def _benchmarks(cls, v: list[BenchmarkConfig]) -> list[BenchmarkConfig]:
        first: dict[str, int] = {}
        for i, benchmark in enumerate(v):
            if benchmark.name in first:
                raise FieldError(
                    (i, "name"),
                    f"duplicate benchmark name {benchmark.name!r} (also benchmarks[{first[benchmark.name]}])",
                )
            first[benchmark.name] = i
        return v

    @field_validator("grid", mode="before")
    @classmethod
    def _grid_keys(cls, v: Any) -> Any:
        if isinstance(v, dict):
            for key, values in v.items():
                check_override_key(key)
                if not isinstance(values, list):
                    raise FieldError((key,), f"expected a list of values, got {short_repr(values)}")
        return v

    @field_validator("grid")
    @classmethod
    def _grid_values(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        out = {}
        for key, values in v.items():
            if not values:
                raise FieldError((key,), "must list at least one value")
            for i, value in enumerate(values):
                if not is_scalar(value):
                    raise FieldError((key, i), f"must be a number, string or bool, got {short_repr(value)}")
            values = [coerce_override(key, value, (key, i)) for i, value in enumerate(values)]
            dup = first_repeat(values)
            if dup is not None:
                raise FieldError((key, dup), f"duplicate value {values[dup]!r}")
            out[key] = values
        return out

    # -- cross-field checks -----------------------------------------------------------------

    @model_validator(mode="after")
    def _consistent(self) -> Study:
        names = [a.name for a in self.arms]
        self._check_control(names)
        self._check_primary_metric()
        self._check_calibration_arms(names)
        self._check_sequential()
        self._check_compute_looks()
        self._check_varied_keys()
        return self

    def _check_control(self, names: list[str]) -> None:
        """The control is one of the arms; a study of one arm may leave it out."""
        if self.control is None:
            if len(self.arms) > 1:
                raise FieldError(
                    ("control",),
                    "required when the study has more than one arm; one of: " + ", ".join(names),
                )
            self.control = names[0]
        elif self.control not in names:
            raise FieldError(("control",), f"{self.control!r} is not an arm; arms: " + ", ".join(names))

    def _check_primary_metric(self) -> None:
        """The primary metric is scored: pass@k only when evaluated and not handed in by a program,
        and failures scored as the worst only on a metric with a known range."""
        pass_k = PASS_METRIC.fullmatch(self.primary_metric)
        if pass_k and int(pass_k[1]) not in self.train.eval_pass_k:
            raise FieldError(
                ("primary_metric",),
                f"{self.primary_metric} is scored only when train.eval_pass_k includes {pass_k[1]} "
                f"(it is {self.train.eval_pass_k}); add it there",
            )
        handed_in = [a.name for a in self.arms if self.arm_trainer(a).scores == "program"]
        if pass_k and handed_in:
            raise FieldError(
                ("primary_metric",),
                f"{self.primary_metric} is not among the scores a program hands in (arm {handed_in[0]} has "
                "trainer.scores: program); decide on eval/accuracy or eval/mean_reward, or let the harness judge",
            )
        if self.failures == "worst" and self.primary_metric not in METRIC_RANGES:
            raise FieldError(
                ("failures",),
                f"'worst' needs a primary metric with a known range; {self.primary_metric} has none "
                f"(bounded: {', '.join(METRIC_RANGES)}); use 'drop'",
            )

    def _check_calibration_arms(self, names: list[str]) -> None:
        """The A/A and placebo conditions the study adds: a builtin control for the placebo, names
        that no arm has, and no tuning."""
        if self.placebo != "none" and not self.arm_trainer(self.arm(self.control)).is_builtin:
            raise FieldError(
                ("placebo",),
                f"needs the control on the builtin trainer: {self.control} runs a program, which does not read "
                "train.placebo_reward; drop placebo or make the control builtin",
            )
        for role, on in ((AA, self.calibration == "aa"), (PLACEBO, self.placebo != "none")):
            name = self.control + CALIBRATION_SUFFIX[role]
            if on and name in names:
                raise FieldError(
                    ("calibration" if role == AA else "placebo",),
                    f"adds the condition {name!r}, which is already an arm; rename that arm",
                )
            if on and self.tuning is not None:
                raise FieldError(
                    ("calibration" if role == AA else "placebo",),
                    "cannot be combined with tuning yet; run the tuned study without it",
                )

    def _check_sequential(self) -> None:
        """Enough seeds for the last sequential look, and no tuning."""
        if self.sequential is not None:
            last = self.sequential.schedule()[-1]
            if len(self.seeds) < last:
                raise FieldError(
                    ("seeds",),
                    f"lists {len(self.seeds)} seeds but the last sequential look needs {last} per arm; "
                    f"give seeds: {last} (or more)",
                )
            if self.tuning is not None:
                raise FieldError(
                    ("sequential",), "cannot be combined with tuning yet; run the tuned study with fixed seeds"
                )

    def _check_compute_looks(self) -> None:
        """Looks over compute: not with seed looks yet, a catch-up allowance to read them with, a
        forecast only of a value at the budget (not an area), and under ``point: final`` one step
        budget for every trial (the looks are fractions of it)."""
        looks = self.compute_looks
        if looks is None:
            return
        if self.sequential is not None:
            raise FieldError(
                ("compute_looks",), "not both yet: compute_looks cannot be combined with sequential:; drop one"
            )
        if looks.catch_up is None and self.min_effect is None:
            raise FieldError(
                ("compute_looks", "catch_up"),
                "required when the study has no min_effect: how much an arm may still gain after a look, "
                "in the metric's units (0: no crossing)",
            )
        if looks.forecast and self.primary_at.point == "auc":
            raise FieldError(
                ("compute_looks", "forecast"),
                "a forecast predicts the value at the budget, and this study reads the area under the curve "
                "(primary_at.point auc): read it at the budget (point: budget) or leave forecast off",
            )
        varied = [a.name for a in self.arms if "steps" in a.train] + (["grid"] if "train.steps" in self.grid else [])
        if self.primary_at.point == "final" and varied:
            raise FieldError(
                ("compute_looks",),
                f"under primary_at.point final the looks are fractions of train.steps, which {varied[0]} changes; "
                "give primary_at a budget on an axis every arm shares, or one train.steps",
            )

    def _check_varied_keys(self) -> None:
        """Grid or tuning, not both; tuning seeds apart from the comparison seeds; and no key both
        varied (grid or search space) and fixed by an arm."""
        varied: dict[str, str] = {k: "grid" for k in self.grid}
        if self.tuning is not None:
            if self.grid:
                raise FieldError(
                    ("tuning",),
                    "cannot be combined with grid; tune those keys in tuning.search_space instead",
                )
            shared = sorted(set(self.tuning.seeds) & set(self.seeds))
            if shared:
                raise FieldError(
                    ("tuning", "seeds"),
                    f"{', '.join(map(str, shared))} also in the study's seeds; tuning seeds must "
                    "be disjoint from the comparison seeds",
                )
            varied = {k: "tuning.search_space" for k in self.tuning.search_space}
        for key, where in varied.items():
            section, field = split_key(key)
            fixed, name = ("train", field) if section == "train" else ("set", key)  # set: rollout.x as the grid's
            for i, arm in enumerate(self.arms):
                if name in getattr(arm, fixed):
                    raise FieldError(
                        (*where.split("."), key),
                        f"also fixed by arms[{i}].{fixed}.{name}; a value cannot be both fixed and varied, remove one",
                    )

    # -- helpers ----------------------------------------------------------------------------

    @cached_property
    def _arms_by_name(self) -> tuple[list[Arm], dict[str, Arm]]:
        """The arms list the index was built from, and the index (kept out of the fields: not
        compared, dumped or validated)."""
        return self.arms, {arm.name: arm for arm in reversed(self.arms)}  # reversed: the first of a name wins

    def arm(self, name: str) -> Arm:
        """The arm called ``name``, looked up in an index: a study of thousands of arms asks for
        its arm for each of its conditions, and a scan for each was quadratic."""
        arms, by_name = self._arms_by_name
        if arms is not self.arms:  # replaced since (model_copy(update=...), assignment): index them again
            del self.__dict__["_arms_by_name"]
            arms, by_name = self._arms_by_name
        arm = by_name.get(name)
        if arm is not None and arm.name == name:
            return arm
        for arm in self.arms:  # added or renamed in place since the index was built
            if arm.name == name:
                return arm
        raise KeyError(name)

    def arm_trainer(self, arm: Arm) -> TrainerConfig:
        """The trainer of ``arm``'s trials: its own, else the study's."""
        return arm.trainer if arm.trainer is not None else self.trainer

    def resources_of(self, arm: str) -> Resources:
        """What each trial of ``arm`` asks for: its own resources over the study-wide ones."""
        return self.arm(arm).resources.over(self.resources)

    def grid_cells(self) -> list[dict[str, Any]]:
        """Every combination of grid values (keys sorted); ``[{}]`` without a grid."""
        keys = sorted(self.grid)
        cells: list[dict[str, Any]] = [{}]
        for key in keys:
            cells = [{**cell, key: value} for cell in cells for value in self.grid[key]]
        return cells

    def iter_conditions(self) -> list[Condition]:
        """(arm, grid cell) pairs in order: arms as listed, then grid cells; then the calibration
        conditions (the control's A/A copy, its placebo) at each cell."""
        extra = [role for role, on in ((AA, self.calibration == "aa"), (PLACEBO, self.placebo != "none")) if on]
        return [
            Condition(name=condition_name(arm.name, cell), arm=arm.name, cell=cell)
            for arm in self.arms
            for cell in self.grid_cells()
        ] + [
            Condition(
                name=condition_name(self.control + CALIBRATION_SUFFIX[role], cell),
                arm=self.control,
                cell=cell,
                role=role,
            )
            for role in extra
            for cell in self.grid_cells()
        ]

    def condition_seeds(self, condition: Condition) -> list[int]:
        """A condition's seeds: the study's, or for the A/A copy the same ones moved by
        ``AA_SEED_OFFSET`` (disjoint, so it is not the control's run repeated)."""
        if condition.role == AA:
            return [AA_SEED_OFFSET + s for s in self.seeds]
        return list(self.seeds)

    def conditions(self) -> list[str]:
        """Condition names: the arm name, or ``arm[key=value,...]`` with a grid (keys sorted)."""
        return [c.name for c in self.iter_conditions()]


class Condition(BaseModel):
    """One arm at one grid cell; ``TrialSpec.arm`` holds ``name``. ``role`` is "arm" for the
    study's own arms, or a calibration condition built from the control (see ``Study``)."""

    model_config = ConfigDict(frozen=True)

    name: str
    arm: str
    cell: dict[str, Any] = {}
    role: Literal["arm", "aa", "placebo"] = "arm"


def condition_name(arm: str, cell: dict[str, Any]) -> str:
    if not cell:
        return arm
    return arm + "[" + ",".join(f"{k}={format_value(cell[k])}" for k in sorted(cell)) + "]"
