"""A study becomes trials: each condition (arm x grid cell) at each seed is one ``TrialSpec``.

``expand(study)`` gives the comparison trials, seed-major: for seed in seeds, for condition in
conditions. A study stopped early therefore has every condition at its lowest seeds. A study
with a tuning phase has no fixed comparison trials; ``tuning_specs`` builds its tuning trials
and ``apply_best`` the comparison trials once each arm's best parameters are known.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import ValidationError

from harness.algorithms.config import DPOConfig, RLConfig
from harness.algorithms.presets import resolve_algorithm
from harness.engine.rollout_config import RolloutConfig, VllmConfig
from harness.engine.spec import LookPoints, TrainConfig, TrialSpec
from harness.errors import ConfigError
from harness.study.field_errors import FieldError, format_validation_error
from harness.study.overrides import coerce_override, split_key
from harness.study.schema import Arm, Condition, Study, condition_name
from harness.study.sections import AA, PLACEBO


class Overrides(NamedTuple):
    """Override keys (an arm's ``set``, a grid cell, a search-space point) by section, each
    without its section's prefix."""

    algorithm: dict[str, Any]
    train: dict[str, Any]
    rollout: dict[str, Any]


def split_params(params: Mapping[str, Any]) -> Overrides:
    """Grid-cell, search-space or ``set`` keys, split by the section they override."""
    out = Overrides({}, {}, {})
    for key, value in params.items():
        section, name = split_key(key)
        getattr(out, section)[name] = value
    return out


def resolve_arm(arm: Arm, extra: Mapping[str, Any], where: str) -> RLConfig | DPOConfig:
    """The arm's preset with its ``set`` and ``extra`` (algorithm keys) applied; errors are prefixed ``where``."""
    try:
        return resolve_algorithm(arm.algorithm, {**split_params(arm.set).algorithm, **extra})
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from None


def arm_rollout(study: Study, arm: Arm, extra: Mapping[str, Any], where: str) -> RolloutConfig:
    """The study's rollout with the arm's ``set`` and ``extra`` (rollout fields) applied; errors
    are prefixed ``where``. An arm on ``hf`` in a study on ``vllm`` drops the server's settings
    (``rollout.vllm``), which only the vLLM backend reads."""
    overrides = {**split_params(arm.set).rollout, **extra}
    if not overrides:
        return study.rollout.model_copy(deep=True)
    fields = {**study.rollout.model_dump(), **overrides}
    if fields["backend"] == "hf":
        fields["vllm"] = VllmConfig().model_dump()
    try:
        return RolloutConfig.model_validate(fields)
    except ValidationError as err:
        raise ConfigError(f"{where}: {format_validation_error(err, RolloutConfig)}") from None


def arm_train(study: Study, arm: Arm, extra: Mapping[str, Any], where: str) -> TrainConfig:
    try:
        train = TrainConfig.model_validate({**study.train.model_dump(), **arm.train, **extra})
    except ValidationError as err:
        raise ConfigError(f"{where}: {format_validation_error(err, TrainConfig)}") from None
    if not train.mask_tool_tokens and not study.task.tools:
        raise ConfigError(
            f"{where}: train.mask_tool_tokens is read only by tool-calling episodes; "
            "add task.tools (e.g. [calculator]) or drop it"
        )
    return train


#: The folder that holds a study's outputs when it names no ``output_dir`` (relative to the CWD).
RUNS_ROOT = Path("runs")


def study_dir(study: Study) -> Path:
    """Where the study's records, logs and storages live: ``output_dir`` or ``runs/<name>``."""
    return Path(study.output_dir) if study.output_dir else RUNS_ROOT / study.name


def _spec(study: Study, arm: Arm, name: str, params: Mapping[str, Any], seed: int, where: str) -> TrialSpec:
    try:
        return _trial_spec(study, arm, name, split_params(params), seed, where)
    except ValidationError as err:  # a check across sections (the rollout backend against the task)
        raise ConfigError(f"{where}: {format_validation_error(err, TrialSpec)}") from None


def _trial_spec(study: Study, arm: Arm, name: str, overrides: Overrides, seed: int, where: str) -> TrialSpec:
    train = arm_train(study, arm, overrides.train, where)
    return TrialSpec(
        study=study.name,
        arm=name,
        seed=seed,
        task=study.task.model_copy(deep=True),
        model=study.model.model_copy(deep=True),
        warmstart=study.warmstart.model_copy(deep=True),
        train=train,
        algorithm=resolve_arm(arm, overrides.algorithm, where),
        benchmarks=[b.model_copy(deep=True) for b in study.benchmarks],
        trainer=study.arm_trainer(arm).model_copy(deep=True),
        rollout=arm_rollout(study, arm, overrides.rollout, where),
        eval_subset=study.eval_subset.model_copy() if study.eval_subset is not None else None,
        looks=look_points(study, train),
    )


def look_points(study: Study, train: TrainConfig) -> LookPoints | None:
    """A compute-look study's trial: its looks' points, run to the last (the design trial;
    ``TrialSpec.segment`` gives each segment before it); None without ``compute_looks``."""
    if study.compute_looks is None:
        return None
    axis, at = study.compute_looks.axis_points(study.primary_at, train.steps)
    return LookPoints(axis=axis, at=at, run_to=len(at) - 1)


def condition_spec(study: Study, condition: str | Condition, seed: int) -> TrialSpec:
    """The comparison trial of one condition (by name) at one seed."""
    if isinstance(condition, str):
        by_name = {c.name: c for c in study.iter_conditions()}
        if condition not in by_name:
            raise ConfigError(f"unknown condition {condition!r}; valid: {', '.join(by_name)}")
        condition = by_name[condition]
    return _spec(study, study.arm(condition.arm), condition.name, condition_params(condition), seed, condition.name)


def condition_params(condition: Condition) -> dict[str, Any]:
    """A condition's overrides of its arm: its grid cell, and what a placebo sets (its reward)."""
    return {**condition.cell, **({PLACEBO_TRAIN_KEY: True} if condition.role == PLACEBO else {})}


#: what makes the placebo condition the control trained on shuffled rewards (``harness.engine.learner``)
PLACEBO_TRAIN_KEY = "train.placebo_reward"


def expand(study: Study) -> list[TrialSpec]:
    """The comparison trials, seed-major (for seed in seeds: for condition in conditions)."""
    if study.tuning is not None:
        raise ConfigError(
            f"study {study.name!r} has a tuning phase: its comparison trials are known only "
            "after tuning; build them with apply_best(study, best)"
        )
    return specs_at_positions(study, study.iter_conditions(), range(len(study.seeds)))


def specs_at_positions(study: Study, conditions: Sequence[Condition], positions: Sequence[int]) -> list[TrialSpec]:
    """The trials of ``conditions`` at the given positions of each one's seed list, seed-major
    (a sequential study's look takes some positions: ``harness.decide.sequential.pools``)."""
    first = [(condition_spec(study, c, study.seeds[0]), study.condition_seeds(c)) for c in conditions]
    return [spec.model_copy(update={"seed": seeds[i]}, deep=True) for i in positions for spec, seeds in first]


def condition_configs(study: Study) -> dict[str, str | None]:
    """Each condition's configuration, hashed as its trials' specs hash it
    (``TrialSpec.config_hash``) with the seed left out (taken at seed 0) and the compute looks'
    points too (the rule names a change of the looks as such): what a sequential study's rule
    fixes of its conditions (``harness.decide.sequential.rule``); None for a condition whose
    trials no longer build."""
    out: dict[str, str | None] = {}
    for condition in study.iter_conditions():
        try:
            out[condition.name] = condition_spec(study, condition, 0).model_copy(update={"looks": None}).config_hash()
        except ConfigError:
            out[condition.name] = None
    return out


def comparisons(study: Study) -> list[tuple[str, str]]:
    """Pre-registered comparisons: (condition, the control arm's condition at the same cell)."""
    return [
        (c.name, condition_name(study.control, c.cell))
        for c in study.iter_conditions()
        if c.arm != study.control and c.role == "arm"
    ]


def calibration_comparisons(study: Study) -> list[tuple[str, str, str]]:
    """(condition, what it is compared with, role): the A/A copy against the control, and every
    arm of a cell (the control included) against its placebo. Reported apart, never in the family."""
    out = []
    for c in study.iter_conditions():
        control = condition_name(study.control, c.cell)
        if c.role == AA:
            out.append((c.name, control, AA))
        elif c.role == PLACEBO:
            out += [
                (other.name, c.name, PLACEBO)
                for other in study.iter_conditions()
                if other.role == "arm" and other.cell == c.cell
            ]
    return out


def _tuning_params(study: Study, params: Mapping[str, Any], where: str) -> dict[str, Any]:
    if study.tuning is None:
        raise ConfigError(f"study {study.name!r} has no tuning section")
    space = study.tuning.search_space
    if not isinstance(params, Mapping):
        raise ConfigError(f"{where}: expected a mapping of parameter values, got {params!r}")
    out = {}
    for key, value in params.items():
        if key not in space:
            raise ConfigError(f"{where}.{key}: not in tuning.search_space; valid: {', '.join(space)}")
        try:
            out[key] = coerce_override(key, value, ())
        except FieldError as err:
            raise ConfigError(f"{where}.{key}: {err.msg}") from None
    return out


def _arm_or_error(study: Study, arm_name: str, where: str) -> Arm:
    try:
        return study.arm(arm_name)
    except KeyError:
        valid = ", ".join(a.name for a in study.arms)
        raise ConfigError(f"{where}: unknown arm {arm_name!r}; valid: {valid}") from None


def tuning_specs(study: Study, arm_name: str, params: Mapping[str, Any], seed: int) -> TrialSpec:
    """One tuning trial: ``arm_name`` with sampled ``params`` (search-space keys) at a tuning seed.

    ``TrialSpec.arm`` is the arm name; the record's ``phase`` ("tune") tells tuning trials apart,
    and the parameters are part of the config hash, so every sampled point has its own trial id.
    """
    arm = _arm_or_error(study, arm_name, "arm")
    values = _tuning_params(study, params, "params")
    if seed not in study.tuning.seeds:
        raise ConfigError(f"seed: {seed} is not a tuning seed; tuning.seeds: {study.tuning.seeds}")
    return _spec(study, arm, arm.name, values, seed, f"tuning trial of {arm.name}")


def tuned_spec(study: Study, arm_name: str, params: Mapping[str, Any], seed: int) -> TrialSpec:
    """One comparison trial of a tuned study: ``arm_name`` at ``params`` (search-space keys)."""
    arm = _arm_or_error(study, arm_name, "arm")
    values = _tuning_params(study, params, "params")
    return _spec(study, arm, arm.name, values, seed, f"best.{arm.name}")


def apply_best(study: Study, best: Mapping[str, Mapping[str, Any]]) -> list[TrialSpec]:
    """Comparison trials of a tuned study: each arm at its best parameters, over ``seeds``.

    ``best`` maps every arm name to its chosen parameters (search-space keys). Seed-major order,
    like ``expand``.
    """
    if study.tuning is None:
        raise ConfigError(f"study {study.name!r} has no tuning section; use expand(study)")
    for name in best:
        _arm_or_error(study, name, "best")
    missing = [a.name for a in study.arms if a.name not in best]
    if missing:
        raise ConfigError(f"best: no parameters for arm(s) {', '.join(missing)}")
    params = {a.name: _tuning_params(study, best[a.name], f"best.{a.name}") for a in study.arms}
    return [tuned_spec(study, arm.name, params[arm.name], seed) for seed in study.seeds for arm in study.arms]
