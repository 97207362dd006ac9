"""The study file as pydantic models: ``Study``, ``Arm``, ``Tuning`` and its ``SearchParam`` entries.

Everything here is structural and needs no algorithm registry: types, names, seeds, which keys an
override, a grid or a search space may touch, and how the sections agree with each other. Checks
that need the presets (does ``arms[1].set`` make a valid GRPO?) live in ``harness.study.load``, which is
also where a file is read, its ``include:`` merged, and a study expanded into trials.

Every error carries the path of the field it is about; ``harness.study.field_errors`` turns a
pydantic ``ValidationError`` into the one line the CLI prints, e.g.
``arms[1].set.eps_hgh: unknown key; valid: adv_eps, advantage, ...``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from harness.algorithms.config import CONFIG_TYPES
from harness.engine.spec import ModelConfig, TaskConfig, TrainConfig, WarmStartConfig
from harness.study.field_errors import (
    FieldError,
    Loc,
    field_error,
    short_repr,
    unwrap_type,
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


# --------------------------------------------------------------------------------------------
# Override keys: which fields an arm, a grid or a search space may set
# --------------------------------------------------------------------------------------------

#: Algorithm config fields that identify a preset rather than configure it.
_NOT_OVERRIDABLE = frozenset({"name", "kind"})

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

#: The range of the final metrics that have one, for "failures: worst" and bounded report bands.
METRIC_RANGES: dict[str, tuple[float, float]] = {
    "eval/accuracy": (0.0, 1.0),
    "eval/accuracy_start": (0.0, 1.0),
    "train/frac_degenerate": (0.0, 1.0),
    "train/clip_frac": (0.0, 1.0),
    "train/dpo_pair_acc": (0.0, 1.0),
}

#: The analyses a study may pre-register as its primary test ("auto": seed x prompt when
#: per-prompt scores are recorded, else the paired t when seed-matched, else Welch's t).
PRIMARY_TESTS = ("auto", "seed_prompt", "welch_t", "paired_t", "yuen")


def _algorithm_fields() -> dict[str, FieldInfo]:
    """The fields of every algorithm config type (RL and DPO), in declaration order."""
    fields: dict[str, FieldInfo] = {}
    for config_type in CONFIG_TYPES.values():
        fields.update({k: v for k, v in config_type.model_fields.items() if k not in fields})
    return fields


def algorithm_keys() -> list[str]:
    """Keys an arm's ``set:`` may override: fields of an algorithm config (which of them a given
    preset reads is checked when the arm resolves)."""
    return [k for k in _algorithm_fields() if k not in _NOT_OVERRIDABLE]


def train_keys() -> list[str]:
    return list(TrainConfig.model_fields)


def override_keys() -> list[str]:
    """Keys a grid or a search space may vary: algorithm config fields and ``train.<field>``."""
    return algorithm_keys() + [f"train.{k}" for k in train_keys()]


def split_key(key: str) -> tuple[Literal["algorithm", "train"], str]:
    """``'lr'`` -> ``('algorithm', 'lr')``; ``'train.steps'`` -> ``('train', 'steps')``."""
    if key.startswith("train."):
        return "train", key[len("train.") :]
    return "algorithm", key


def _field_info(key: str) -> FieldInfo:
    section, name = split_key(key)
    return TrainConfig.model_fields[name] if section == "train" else _algorithm_fields()[name]


@cache
def _adapter(key: str) -> TypeAdapter:
    info = _field_info(key)
    finite = ConfigDict(allow_inf_nan=False)
    if not info.metadata:
        return TypeAdapter(info.annotation, config=finite)
    return TypeAdapter(Annotated[info.annotation, *info.metadata], config=finite)


def check_override_key(key: Any) -> str:
    if not isinstance(key, str) or key not in override_keys():
        raise FieldError((str(key),), "unknown key; valid: " + ", ".join(override_keys()))
    return key


def coerce_override(key: str, value: Any, loc: Loc) -> Any:
    """Validate one value for an override key against the field's type and bounds."""
    try:
        return _adapter(key).validate_python(value)
    except ValidationError as err:
        raise field_error(err, loc) from None


def numeric_kind(key: str) -> Literal["int", "float"] | None:
    """Whether a field holds an int, a float, or neither (a name, a flag)."""
    tp = unwrap_type(_field_info(key).annotation)
    if tp is bool:
        return None
    if tp is int:
        return "int"
    if tp is float:
        return "float"
    return None


def format_value(value: Any) -> str:
    """Values in condition names: ``0.001``, ``8``, ``true``, ``group_mean``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _distinct(values: Sequence[Any]) -> int | None:
    """Index of the first repeated value (``True`` and ``1`` count as different), else None."""
    seen: set[tuple[type, Any]] = set()
    for i, v in enumerate(values):
        token = (type(v), v)
        if token in seen:
            return i
        seen.add(token)
    return None


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Arm(_Strict):
    """One thing being compared: a preset, with optional algorithm and train overrides."""

    name: str = Field(description="the arm's name, used in condition names, trial ids and reports")
    algorithm: str = Field(description="preset name (see harness.algorithms.presets)")
    description: str = Field("", description="free text for the file's readers")
    set: dict[str, Any] = Field(default_factory=dict, description="algorithm config overrides")
    train: dict[str, Any] = Field(default_factory=dict, description="TrainConfig overrides")

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
            if key not in algorithm_keys():
                hint = " (the preset, and with it the kind, is chosen by `algorithm`)" if key in ("name", "kind") else ""
                raise FieldError((key,), "unknown key; valid: " + ", ".join(algorithm_keys()) + hint)
        return {key: coerce_override(key, value, (key,)) for key, value in v.items()}

    @field_validator("train")
    @classmethod
    def _train(cls, v: dict[str, Any]) -> dict[str, Any]:
        for key in v:
            if key not in train_keys():
                raise FieldError((key,), "unknown key; valid: " + ", ".join(train_keys()))
        return {key: coerce_override(f"train.{key}", value, (key,)) for key, value in v.items()}


class SearchParam(_Strict):
    """One search-space entry: a range ``{low, high[, log][, step]}`` or ``{choices: [...]}``."""

    low: float | None = Field(None, description="lower end of the range")
    high: float | None = Field(None, description="upper end of the range")
    log: bool = Field(False, description="sample the range log-uniformly (needs low > 0)")
    step: float | None = Field(None, gt=0, description="sample only low, low + step, ... (not with log)")
    choices: list[Any] | None = Field(None, description="the values to pick from, instead of a range")

    @model_validator(mode="after")
    def _shape(self) -> SearchParam:
        ranged = self.low is not None or self.high is not None
        if self.choices is not None:
            if ranged or self.log or self.step is not None:
                raise ValueError("give either {low, high[, log, step]} or {choices: [...]}, not both")
            if not self.choices:
                raise FieldError(("choices",), "must list at least one value")
            for i, c in enumerate(self.choices):
                if not _is_scalar(c):
                    raise FieldError(("choices", i), f"must be a number, string or bool, got {short_repr(c)}")
            dup = _distinct(self.choices)
            if dup is not None:
                raise FieldError(("choices", dup), f"duplicate choice {self.choices[dup]!r}")
            return self
        if self.low is None or self.high is None:
            missing = "low" if self.low is None else "high"
            raise FieldError((missing,), "required: give {low, high[, log, step]} or {choices: [...]}")
        for end in ("low", "high"):
            if not math.isfinite(getattr(self, end)):
                raise FieldError((end,), "must be a finite number")
        if not self.low < self.high:
            raise FieldError(("low",), f"low ({self.low:g}) must be less than high ({self.high:g})")
        if self.log and self.low <= 0:
            raise FieldError(("low",), f"a log-uniform range needs low > 0, got {self.low:g}")
        if self.log and self.step is not None:
            raise FieldError(("step",), "cannot be combined with log: true")
        return self

    def describe(self) -> str:
        if self.choices is not None:
            return "one of [" + ", ".join(format_value(c) for c in self.choices) + "]"
        kind = "log-uniform" if self.log else "uniform"
        step = f" step {self.step:g}" if self.step is not None else ""
        return f"{kind}[{self.low:g}, {self.high:g}]{step}"


class Tuning(_Strict):
    """An Optuna tuning phase: the same number of trials for every arm, on its own seeds."""

    n_trials: PositiveInt = Field(description="tuning trials per arm")
    seeds: list[int] = Field(description="seeds used while tuning; disjoint from the study's seeds")
    sampler_seed: int = Field(0, ge=0, description="seed of Optuna's TPE sampler")
    search_space: dict[str, SearchParam] = Field(
        description="override key -> a range {low, high[, log][, step]} or {choices: [...]}"
    )

    @field_validator("seeds", mode="before")
    @classmethod
    def _seeds(cls, v: Any) -> list[int]:
        if not isinstance(v, list):
            raise ValueError(f"expected a list of distinct non-negative integers, got {short_repr(v)}")
        return _check_seed_list(v)

    @field_validator("search_space", mode="before")
    @classmethod
    def _space_keys(cls, v: Any) -> Any:
        if isinstance(v, dict):
            if not v:
                raise ValueError("must name at least one parameter to tune")
            for key in v:
                check_override_key(key)
        return v

    @field_validator("search_space")
    @classmethod
    def _space_values(cls, v: dict[str, SearchParam]) -> dict[str, SearchParam]:
        for key, param in v.items():
            kind = numeric_kind(key)
            if param.choices is not None:
                param.choices = [
                    coerce_override(key, c, (key, "choices", i)) for i, c in enumerate(param.choices)
                ]
                continue
            if kind is None:
                raise FieldError(
                    (key,), "is not numeric: give {choices: [...]} instead of a low/high range"
                )
            for end in ("low", "high"):
                value = getattr(param, end)
                if kind == "int":
                    if value != int(value):
                        raise FieldError((key, end), f"{key} is an integer field; got {value:g}")
                    value = int(value)
                coerce_override(key, value, (key, end))
            if kind == "int" and param.step is not None and param.step != int(param.step):
                raise FieldError((key, "step"), f"{key} is an integer field; got {param.step:g}")
        return v


#: calibration conditions: the control's copy on disjoint seeds (A/A) and the control trained
#: on a reward with no signal (placebo); their names are the control's with these suffixes
AA, PLACEBO = "aa", "placebo"
CALIBRATION_SUFFIX = {AA: "-aa", PLACEBO: "-placebo"}
#: added to the study's seeds for the A/A copy's seeds
AA_SEED_OFFSET = 1_000_000

class SelfChecks(_Strict):
    """Checks that guard every study's verdicts, on by default."""

    seeds: bool = Field(
        True, description="before the first trial, sample the control's first step at its first seed twice and at "
        "the next seed once: the same seed must repeat (bitwise on a CPU) and two seeds must differ, else the run "
        "stops with the reason",
    )


#: the Lan-DeMets spending functions of ``harness.stats.sequential`` (a test keeps the two in step)
SPENDING_FUNCTIONS = ("obrien_fleming", "pocock")
#: the fewest seeds per arm a look can test at (a standard error needs two)
MIN_LOOK_SEEDS = 2


class Sequential(_Strict):
    """Seeds bought look by look: at each look every undecided comparison is read on its repeated
    confidence interval (alpha spent across the looks), and an arm that is decided stops."""

    looks: list[int] | None = Field(None, description="seeds per arm at each look, rising, e.g. [3, 5, 8, 12, 20]")
    batch: PositiveInt | None = Field(None, description="with max_seeds: a look every `batch` seeds")
    max_seeds: PositiveInt | None = Field(None, description="with batch: the seeds per arm of the last look")
    spending: Literal[SPENDING_FUNCTIONS] = Field(  # type: ignore[valid-type]
        "obrien_fleming", description="how alpha is spent: obrien_fleming (little early) or pocock (evenly)"
    )

    @model_validator(mode="after")
    def _one_schedule(self) -> Sequential:
        if self.looks is not None and (self.batch is not None or self.max_seeds is not None):
            raise ValueError("give either looks: or batch: with max_seeds:, not both")
        if self.looks is None and (self.batch is None or self.max_seeds is None):
            raise ValueError("give either looks: [n1, n2, ...] or both batch: and max_seeds:")
        schedule = self.schedule()
        if schedule[0] < MIN_LOOK_SEEDS:
            raise ValueError(f"the first look needs at least {MIN_LOOK_SEEDS} seeds per arm; got {schedule[0]}")
        if any(b <= a for a, b in zip(schedule, schedule[1:])):
            raise ValueError(f"looks must rise strictly; got {schedule}")
        return self

    def schedule(self) -> list[int]:
        """Seeds per arm at each look."""
        if self.looks is not None:
            return list(self.looks)
        steps = list(range(self.batch, self.max_seeds + 1, self.batch))
        return steps if steps and steps[-1] == self.max_seeds else [*steps, self.max_seeds]


def _check_seed_list(values: list[Any]) -> list[int]:
    if not values:
        raise ValueError("must list at least one seed")
    for i, s in enumerate(values):
        if isinstance(s, bool) or not isinstance(s, int):
            raise ValueError(f"seed at index {i} must be an integer, got {short_repr(s)}")
        if s < 0:
            raise ValueError(f"seed at index {i} is negative ({s}); seeds are non-negative integers")
    dup = _distinct(values)
    if dup is not None:
        raise ValueError(f"duplicate seed {values[dup]} at index {dup}; seeds must be distinct")
    return list(values)


class Study(_Strict):
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
    primary_metric: str = Field("eval/accuracy", description="the final metric the comparisons are decided on")
    direction: Literal["maximize", "minimize"] = Field("maximize", description="whether more of the metric is better")
    min_effect: float | None = Field(
        None, gt=0, description="smallest difference of the primary metric worth knowing about, in its units"
    )
    test: Literal[PRIMARY_TESTS] = Field(  # type: ignore[valid-type]
        "auto", description="the pre-registered primary test; auto: seed x prompt when per-prompt scores "
        "are recorded, else the paired t when seed-matched, else Welch's t"
    )
    failures: Literal["drop", "worst"] = Field(
        "drop", description="drop failed trials (with a warning) or score them at the metric's worst value"
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
    checks: SelfChecks = Field(SelfChecks(), description="self-checks run with the study (each can be switched off)")
    calibration: Literal["none", "aa"] = Field(
        "none", description="aa: add an A/A tripwire, a copy of the control on disjoint seeds compared with it like "
        "any arm but reported apart (a difference means the verdicts are not to be trusted)"
    )
    placebo: Literal["none", "random_reward"] = Field(
        "none", description="random_reward: add the control trained on its own rewards shuffled across each batch "
        "(the same mean, no signal), reported apart: a gain over it is not format or length drift"
    )
    sequential: Sequential | None = Field(
        None, description="buy seeds look by look and stop each comparison once decided (seeds: the pool, in order)"
    )

    #: the file it was loaded from (not part of the study; set by ``load_study``)
    _source: Path | None = PrivateAttr(None)

    @property
    def source(self) -> Path | None:
        return self._source

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
        if v not in FINAL_METRICS:
            raise ValueError(f"unknown metric {v!r}; valid: {', '.join(FINAL_METRICS)}")
        return v

    @field_validator("seeds", mode="before")
    @classmethod
    def _seeds(cls, v: Any) -> list[int]:
        if isinstance(v, int) and not isinstance(v, bool):
            if v < 1:
                raise ValueError(f"the number of seeds must be at least 1, got {v}")
            return list(range(v))
        if isinstance(v, list):
            return _check_seed_list(v)
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
                raise FieldError(
                    (i, "name"), f"duplicate arm name {arm.name!r} (also arms[{first[arm.name]}])"
                )
            first[arm.name] = i
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
                if not _is_scalar(value):
                    raise FieldError((key, i), f"must be a number, string or bool, got {short_repr(value)}")
            values = [coerce_override(key, value, (key, i)) for i, value in enumerate(values)]
            dup = _distinct(values)
            if dup is not None:
                raise FieldError((key, dup), f"duplicate value {values[dup]!r}")
            out[key] = values
        return out

    # -- cross-field checks -----------------------------------------------------------------

    @model_validator(mode="after")
    def _consistent(self) -> Study:
        names = [a.name for a in self.arms]
        if self.control is None:
            if len(self.arms) > 1:
                raise FieldError(
                    ("control",),
                    "required when the study has more than one arm; one of: " + ", ".join(names),
                )
            self.control = names[0]
        elif self.control not in names:
            raise FieldError(
                ("control",), f"{self.control!r} is not an arm; arms: " + ", ".join(names)
            )
        if self.failures == "worst" and self.primary_metric not in METRIC_RANGES:
            raise FieldError(
                ("failures",),
                f"'worst' needs a primary metric with a known range; {self.primary_metric} has none "
                f"(bounded: {', '.join(METRIC_RANGES)}); use 'drop'",
            )

        for role, on in ((AA, self.calibration == "aa"), (PLACEBO, self.placebo != "none")):
            name = self.control + CALIBRATION_SUFFIX[role]
            if on and name in names:
                raise FieldError(("calibration" if role == AA else "placebo",),
                                 f"adds the condition {name!r}, which is already an arm; rename that arm")
            if on and self.tuning is not None:
                raise FieldError(("calibration" if role == AA else "placebo",),
                                 "cannot be combined with tuning yet; run the tuned study without it")
        if self.sequential is not None:
            last = self.sequential.schedule()[-1]
            if len(self.seeds) < last:
                raise FieldError(
                    ("seeds",),
                    f"lists {len(self.seeds)} seeds but the last sequential look needs {last} per arm; "
                    f"give seeds: {last} (or more)",
                )
            if self.tuning is not None:
                raise FieldError(("sequential",), "cannot be combined with tuning yet; run the tuned study with fixed seeds")
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
            for i, arm in enumerate(self.arms):
                fixed = arm.set if section == "algorithm" else arm.train
                if field in fixed:
                    raise FieldError(
                        (*where.split("."), key),
                        f"also fixed by arms[{i}].{'set' if section == 'algorithm' else 'train'}"
                        f".{field}; a value cannot be both fixed and varied, remove one",
                    )
        return self

    # -- helpers ----------------------------------------------------------------------------

    def arm(self, name: str) -> Arm:
        for arm in self.arms:
            if arm.name == name:
                return arm
        raise KeyError(name)

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
            Condition(name=condition_name(self.control + CALIBRATION_SUFFIX[role], cell), arm=self.control,
                      cell=cell, role=role)
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
