"""The study file's sections beside its arms: the tuning phase (``tuning:`` and its search space),
the self-checks and calibration conditions (``checks:``, ``calibration:``, ``placebo:``), the
sequential design (``sequential:``), the looks over compute (``compute_looks:``), where the
primary comparison reads each trial (``primary_at:``) and the fitted scaling curves
(``scaling:``); with the seed-list check the whole file uses. Every section is a
``harness.ground.strict.StrictModel``: an unknown key or a non-finite number is an error."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, PositiveInt, field_validator, model_validator

from harness.engine.spec import COMPUTE_METRICS
from harness.ground.strict import StrictModel
from harness.study.field_errors import FieldError, short_repr
from harness.study.overrides import (
    check_override_key,
    coerce_override,
    first_repeat,
    format_value,
    is_scalar,
    numeric_kind,
)


class SearchParam(StrictModel):
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
                if not is_scalar(c):
                    raise FieldError(("choices", i), f"must be a number, string or bool, got {short_repr(c)}")
            dup = first_repeat(self.choices)
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


class Tuning(StrictModel):
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
        return check_seed_list(v)

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
                param.choices = [coerce_override(key, c, (key, "choices", i)) for i, c in enumerate(param.choices)]
                continue
            if kind is None:
                raise FieldError((key,), "is not numeric: give {choices: [...]} instead of a low/high range")
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


class SelfChecks(StrictModel):
    """Checks that guard every study's verdicts, on by default."""

    seeds: bool = Field(
        True,
        description="before the first trial, sample the control's first step at its first seed twice and at "
        "the next seed once: the same seed must repeat (bitwise on a CPU) and two seeds must differ, else the run "
        "stops with the reason",
    )


#: the Lan-DeMets spending functions of ``harness.stats.sequential`` (a test keeps the two in step)
SPENDING_FUNCTIONS = ("obrien_fleming", "pocock")
#: the fewest seeds per arm a look can test at (a standard error needs two)
MIN_LOOK_SEEDS = 2


class Sequential(StrictModel):
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


#: what a compute look stops an arm against: the control, or the arm best at the look (selection)
COMPUTE_LOOK_REFERENCES = ("control", "best")


class ComputeLooks(StrictModel):
    """Looks over compute: every arm read at fractions of the primary comparison's budget
    (``primary_at``; under ``point: final``, of ``train.steps``), and an arm stopped once it is
    decided worse than the control (or the best arm) by more than ``catch_up``, with alpha spent
    across the looks (``harness.stats.compute_looks``)."""

    at: list[float] = Field(
        description="the looks as fractions of the budget, rising strictly, each in (0, 1], the last exactly 1 "
        "(e.g. [0.25, 0.5, 1.0])"
    )
    spending: Literal[SPENDING_FUNCTIONS] = Field(  # type: ignore[valid-type]
        "obrien_fleming",
        description="how alpha is spent over the compute fractions: obrien_fleming (little early) or pocock (evenly)",
    )
    catch_up: float | None = Field(
        None,
        ge=0,
        description="how much an arm may still gain on its reference between a look and the budget, in the "
        "metric's units (>= 0): an arm stops only when its whole interval trails by more than this, so a stop "
        "says 'worse at the budget' only for curves that cross by less. 0 means no crossing after a look. "
        "Default: the study's min_effect (a trailing arm is stopped only once it is decided worse by more than "
        "the smallest difference worth knowing about, so slow starters within it run on); required when the "
        "study has no min_effect",
    )
    against: Literal[COMPUTE_LOOK_REFERENCES] = Field(  # type: ignore[valid-type]
        "control",
        description="control: stop an arm decided worse than the control; best: than the arm best at the look "
        "(a selection study; every pair of conditions counts in the multiplicity)",
    )
    forecast: bool = Field(
        False,
        description="also call verdicts early from the fitted curve: at each look before the budget, each arm "
        "still running is forecast at the budget from its seeds' curves up to the look (saturating fit, seed "
        "and prompt jackknife, widened by an out-of-sample check on the curve's earlier part) and its "
        "comparison is called, and the arm stopped, only when that interval decides it. Each look's alpha is "
        "split evenly between the stop rule and the forecast. Needs evaluations along the curve (at least 3 "
        "past the start before a look); the report says every early call was a forecast",
    )

    def describe(self, primary_at: PrimaryAt, steps: int, min_effect: float | None) -> str:
        """One line: where the looks read, how they spend alpha, and what a stop saves."""
        axis, points = self.axis_points(primary_at, steps)
        at = ", ".join(f"{f:.0%}" for f in self.at)
        catch_up = f"{self.catch_up:g}" if self.catch_up is not None else f"{min_effect:g} (min_effect)"
        return (
            f"compute looks: at {at} of the budget ({', '.join(amount(p) for p in points)} {AXIS_UNITS[axis]}), "
            f"{self.spending} spending, catch-up {catch_up}, against the {self.against}"
            f"{', forecasts called from the fitted curve' if self.forecast else ''}; each trial runs in "
            f"{len(self.at)} segments and an arm decided worse stops at its look (the trials above are the most "
            "it runs)"
        )

    def axis_points(self, primary_at: PrimaryAt, steps: int) -> tuple[str, list[float]]:
        """Where the looks read a trial: the axis and each look's point on it, a fraction of
        ``primary_at``'s budget, or under ``point: final`` of ``steps`` on the step axis."""
        if primary_at.point == "final":
            return "step", [f * steps for f in self.at]
        return primary_at.axis, [f * primary_at.budget for f in self.at]

    @field_validator("at")
    @classmethod
    def _fractions(cls, v: list[float]) -> list[float]:
        if len(v) < 2:
            raise ValueError(f"needs a look before the budget and the budget itself, e.g. [0.5, 1.0]; got {v}")
        if any(not (0 < f <= 1) for f in v):
            raise ValueError(f"each look is a fraction of the budget in (0, 1]; got {v}")
        if any(b <= a for a, b in zip(v, v[1:])):
            raise ValueError(f"looks must rise strictly; got {v}")
        if v[-1] != 1:
            raise ValueError(f"the last look is the budget itself (1.0); got {v[-1]:g}")
        return [float(f) for f in v]


def check_seed_list(values: list[Any]) -> list[int]:
    if not values:
        raise ValueError("must list at least one seed")
    for i, s in enumerate(values):
        if isinstance(s, bool) or not isinstance(s, int):
            raise ValueError(f"seed at index {i} must be an integer, got {short_repr(s)}")
        if s < 0:
            raise ValueError(f"seed at index {i} is negative ({s}); seeds are non-negative integers")
    dup = first_repeat(values)
    if dup is not None:
        raise ValueError(f"duplicate seed {values[dup]} at index {dup}; seeds must be distinct")
    return list(values)


#: where the primary comparison reads each trial: its last evaluation, its curve at a budget,
#: or the mean of its curve up to a budget
PRIMARY_POINTS = ("final", "budget", "auc")
#: what a budget is counted in: a compute column of every history row, or the step
PRIMARY_AXES = (*COMPUTE_METRICS, "step")


class PrimaryAt(StrictModel):
    """Where the pre-registered primary comparison reads each trial: at its final evaluation, on
    its curve at a budget of the axis (interpolated linearly between the two evaluations that
    bracket it, never extrapolated), or as the area under its curve from 0 to the budget divided
    by the budget (a mean score over the axis, in the metric's units). A trial whose last
    evaluation falls short of the budget has no value there."""

    point: Literal[PRIMARY_POINTS] = Field(  # type: ignore[valid-type]
        "final",
        description="final: the last evaluation; budget: each trial's curve read at `budget` on `axis` "
        "(linear interpolation between evaluations, never extrapolation); auc: the area under the curve "
        "from 0 to `budget` divided by `budget` (a mean score over the axis, in the metric's units)",
    )
    axis: Literal[PRIMARY_AXES] = Field(  # type: ignore[valid-type]
        "compute/flops",
        description="what the budget is counted in: compute/flops (estimated), compute/generated_tokens, "
        "compute/trained_tokens, compute/wall_s (seconds: not reproducible, it changes with the machine "
        "and its load) or step",
    )
    budget: float | None = Field(
        None,
        gt=0,
        description="required for budget and auc, in the axis's units (> 0); not allowed with final",
    )

    @model_validator(mode="after")
    def _budget(self) -> PrimaryAt:
        if self.point == "final" and self.budget is not None:
            raise FieldError(
                ("budget",), "not allowed with point: final (the last evaluation); use point: budget or auc"
            )
        if self.point != "final" and self.budget is None:
            raise FieldError(("budget",), f"required with point: {self.point}, in {AXIS_UNITS[self.axis]} (> 0)")
        return self

    def describe(self, metric: str) -> str:
        """One line: where the comparison reads ``metric``."""
        if self.point == "final":
            return f"{metric} at the final evaluation"
        at = f"{amount(self.budget)} {AXIS_UNITS[self.axis]}"
        if self.point == "budget":
            return f"{metric} at {at} (interpolated between evaluations)"
        return f"{metric} averaged over 0 to {at} (area under the curve / budget)"


def amount(value: float) -> str:
    """A budget as a reader says it: 2.0e9, 350000 -> 3.5e5, 60."""
    if abs(value) < 1e4:
        return f"{value:g}"
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


#: how each axis is read out in a sentence
AXIS_UNITS = {
    "step": "steps",
    "compute/flops": "FLOPs",
    "compute/generated_tokens": "generated tokens",
    "compute/trained_tokens": "trained tokens",
    "compute/wall_s": "wall seconds",
}


class Scaling(StrictModel):
    """Fitted saturating curves of the primary metric against ``primary_at.axis``."""

    fit: Literal["auto", "on", "off"] = Field(
        "auto", description="auto: fit when every completed trial has >= 6 evaluations; on: always; off: never"
    )
    efficiency_margin: float = Field(
        1.25, gt=1, description="C_mid ratios within [1/m, m] count as equal efficiency (m > 1)"
    )
