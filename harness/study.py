"""Study files: read (with ``include:``), check, and expand into trials.

``load_study(path)`` reads YAML safely (duplicate keys are errors; ``1e-4`` is a float, as in
YAML 1.2), merges included files, validates the result strictly (``harness.config.Study``), then
resolves every condition's algorithm through the presets, so an unknown preset, an override the
preset cannot take or a contradiction fails here, before anything runs, with one line naming
the field: ``arms[1].set.eps_hgh: unknown key; valid: ...``.

``expand(study)`` gives the comparison trials, seed-major: for seed in seeds, for condition in
conditions. A study stopped early therefore has every condition at its lowest seeds. A study
with a tuning phase has no fixed comparison trials; ``tuning_specs`` builds its tuning trials
and ``apply_best`` the comparison trials once each arm's best parameters are known.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from harness.algorithms.config import AlgorithmConfig
from harness.config import (
    Arm,
    Condition,
    Study,
    coerce_override,
    condition_name,
    format_value,
    numeric_kind,
    split_key,
)
from harness.errors import ConfigError
from harness.field_errors import FieldError, format_validation_error
from harness.spec import TrainConfig, TrialSpec

__all__ = [
    "Study",
    "load_study",
    "parse_study",
    "read_study_data",
    "expand",
    "comparisons",
    "study_dir",
    "condition_spec",
    "tuning_specs",
    "apply_best",
    "suggest_params",
    "search_distributions",
    "dump_study",
    "study_warnings",
    "check_task",
]


# --------------------------------------------------------------------------------------------
# Reading YAML: safe, strict about duplicate keys, YAML 1.2 floats
# --------------------------------------------------------------------------------------------


class _StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that rejects duplicate keys and reads ``1e-4`` as a float."""

    def construct_mapping(self, node, deep=False):  # noqa: D102
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # '<<: *anchor' keys may be overridden by explicit ones
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:
                continue  # unhashable: the base class reports it
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


# PyYAML follows YAML 1.1, where a float needs a dot: '1e-4' would be the string "1e-4".
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _display(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"study file not found: {_display(path)}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{_display(path)}: cannot read: {err}") from None
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err)
        raise ConfigError(f"{_display(path)}: invalid YAML{where}: {' '.join(problem.split())}") from None


def _deep_merge(base: dict, top: Mapping) -> dict:
    """``top`` over ``base``: mappings merge key by key; anything else (lists too) is replaced."""
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(dict(out[key]), value)
        else:
            out[key] = value
    return out


def _type_name(value: Any) -> str:
    return "nothing (empty file)" if value is None else type(value).__name__


def read_study_data(path: str | Path, _stack: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The study file as a mapping, its ``include:`` files merged in (local keys win).

    Includes are relative to the including file, apply in the order listed (later wins), and
    may include further files; a cycle or a missing file is an error naming ``include``.
    """
    path = Path(path).resolve()
    data = _read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(
            f"{_display(path)}: top level must be a mapping of study fields, got {_type_name(data)}"
        )
    include = data.pop("include", None)
    if include is None:
        return data
    if isinstance(include, str):
        include = [include]
    if not isinstance(include, list):
        raise ConfigError(f"include: expected a file name or a list of file names, got {include!r}")
    merged: dict[str, Any] = {}
    stack = (*_stack, path)
    for i, name in enumerate(include):
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"include[{i}]: expected a file name, got {name!r}")
        target = (path.parent / name).resolve()
        if target in stack:
            chain = " -> ".join(_display(p) for p in (*stack[stack.index(target) :], target))
            raise ConfigError(f"include: cycle {chain}")
        if not target.is_file():
            raise ConfigError(f"include: file not found: {name} (from {_display(path)})")
        merged = _deep_merge(merged, read_study_data(target, stack))
    return _deep_merge(merged, data)


# --------------------------------------------------------------------------------------------
# Loading and checking
# --------------------------------------------------------------------------------------------


def load_study(path: str | Path) -> Study:
    """Read, merge includes, validate and resolve a study file; ``ConfigError`` on any problem."""
    study = parse_study(read_study_data(path))
    study._source = Path(path)
    return study


def parse_study(data: Mapping[str, Any]) -> Study:
    """Validate a study mapping (includes already merged) and resolve all its conditions."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"top level must be a mapping of study fields, got {_type_name(data)}")
    if "include" in data:
        raise ConfigError("include: only study files can include others; use load_study(path)")
    try:
        study = Study.model_validate(dict(data))
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, Study)) from None
    _check_resolves(study)
    return study


def _resolve(arm: Arm, extra: Mapping[str, Any], where: str) -> AlgorithmConfig:
    """The arm's preset with its ``set`` and ``extra`` applied; errors are prefixed ``where``."""
    from harness.algorithms.presets import resolve_algorithm

    try:
        return resolve_algorithm(arm.algorithm, {**arm.set, **extra})
    except ValidationError as err:
        raise ConfigError(f"{where}: {format_validation_error(err, AlgorithmConfig)}") from None
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from None


def _train(study: Study, arm: Arm, extra: Mapping[str, Any], where: str) -> TrainConfig:
    try:
        return TrainConfig.model_validate({**study.train.model_dump(), **arm.train, **extra})
    except ValidationError as err:
        raise ConfigError(f"{where}: {format_validation_error(err, TrainConfig)}") from None


def _split_params(params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Grid-cell or search-space keys, split into (algorithm overrides, train overrides)."""
    algorithm, train = {}, {}
    for key, value in params.items():
        section, name = split_key(key)
        (train if section == "train" else algorithm)[name] = value
    return algorithm, train


#: At most this many corners of a tuning search space are checked at load time.
MAX_CORNERS = 1024


def _check_resolves(study: Study) -> None:
    """Every arm, grid value, condition and search-space end must make a valid config."""
    from harness.algorithms.presets import PRESETS
    from harness.tasks import TASKS

    if study.task.name not in TASKS:
        valid = ", ".join(sorted(TASKS.names()))
        raise ConfigError(f"task.name: unknown task {study.task.name!r}; valid: {valid}")

    for i, arm in enumerate(study.arms):
        if arm.algorithm not in PRESETS:
            valid = ", ".join(sorted(PRESETS))
            raise ConfigError(f"arms[{i}].algorithm: unknown algorithm {arm.algorithm!r}; valid: {valid}")
        _resolve(arm, {}, f"arms[{i}].set" if arm.set else f"arms[{i}] ({arm.name})")
        _train(study, arm, {}, f"arms[{i}].train")

    # each grid value alone, so an error can point at it; then each full combination
    for key, values in study.grid.items():
        for j, value in enumerate(values):
            algorithm, train = _split_params({key: value})
            for i, arm in enumerate(study.arms):
                where = f"grid.{key}[{j}] (with arms[{i}] {arm.name})"
                _resolve(arm, algorithm, where)
                _train(study, arm, train, where)
    if len(study.grid) > 1:
        for c in study.iter_conditions():
            algorithm, train = _split_params(c.cell)
            where = f"grid: condition {c.name}"
            _resolve(study.arm(c.arm), algorithm, where)
            _train(study, study.arm(c.arm), train, where)

    if study.tuning is not None:
        # the ends of each range and every choice, alone; then their combinations (the corners
        # of the search space), so a point the sampler may draw cannot contradict the preset
        corners: dict[str, list[Any]] = {}
        for key, param in study.tuning.search_space.items():
            if param.choices is not None:
                ends = [(f"choices[{j}]", c) for j, c in enumerate(param.choices)]
            else:
                cast = int if numeric_kind(key) == "int" else float
                ends = [("low", cast(param.low)), ("high", cast(param.high))]
            corners[key] = [value for _, value in ends]
            for end, value in ends:
                algorithm, train = _split_params({key: value})
                for i, arm in enumerate(study.arms):
                    where = f"tuning.search_space.{key}.{end} (with arms[{i}] {arm.name})"
                    _resolve(arm, algorithm, where)
                    _train(study, arm, train, where)
        if len(corners) > 1:
            for combo in itertools.islice(itertools.product(*corners.values()), MAX_CORNERS):
                point = dict(zip(corners, combo))
                algorithm, train = _split_params(point)
                for arm in study.arms:
                    where = (
                        f"tuning.search_space: {arm.name} at "
                        + ",".join(f"{k}={format_value(v)}" for k, v in point.items())
                    )
                    _resolve(arm, algorithm, where)
                    _train(study, arm, train, where)


def check_task(study: Study) -> tuple[int, int]:
    """Build the study's task once (reads its files, checks its sizes): (train, eval) prompts.

    Done by ``harness validate``; ``load_study`` checks only the task's name, which is cheap.
    """
    from harness.tasks import build_task

    try:
        task = build_task(study.task)
    except ConfigError as err:
        raise ConfigError(f"task: {err}") from None
    except (ValueError, OSError, KeyError) as err:
        raise ConfigError(f"task: {' '.join(str(err).split())}") from None
    return len(task.train), len(task.eval)


# --------------------------------------------------------------------------------------------
# Trials
# --------------------------------------------------------------------------------------------


def study_dir(study: Study) -> Path:
    """Where the study's records, logs and storages live: ``output_dir`` or ``runs/<name>``."""
    return Path(study.output_dir) if study.output_dir else Path("runs") / study.name


def _spec(
    study: Study, arm: Arm, name: str, params: Mapping[str, Any], seed: int, where: str
) -> TrialSpec:
    algorithm, train = _split_params(params)
    return TrialSpec(
        study=study.name,
        arm=name,
        seed=seed,
        task=study.task.model_copy(deep=True),
        model=study.model.model_copy(deep=True),
        warmstart=study.warmstart.model_copy(deep=True),
        train=_train(study, arm, train, where),
        algorithm=_resolve(arm, algorithm, where),
    )


def condition_spec(study: Study, condition: str | Condition, seed: int) -> TrialSpec:
    """The comparison trial of one condition (by name) at one seed."""
    if isinstance(condition, str):
        by_name = {c.name: c for c in study.iter_conditions()}
        if condition not in by_name:
            raise ConfigError(
                f"unknown condition {condition!r}; valid: {', '.join(by_name)}"
            )
        condition = by_name[condition]
    return _spec(study, study.arm(condition.arm), condition.name, condition.cell, seed, condition.name)


def expand(study: Study) -> list[TrialSpec]:
    """The comparison trials, seed-major (for seed in seeds: for condition in conditions)."""
    if study.tuning is not None:
        raise ConfigError(
            f"study {study.name!r} has a tuning phase: its comparison trials are known only "
            "after tuning; build them with apply_best(study, best)"
        )
    first = [condition_spec(study, c, study.seeds[0]) for c in study.iter_conditions()]
    return [spec.model_copy(update={"seed": seed}, deep=True) for seed in study.seeds for spec in first]


def comparisons(study: Study) -> list[tuple[str, str]]:
    """Pre-registered comparisons: (condition, the control arm's condition at the same cell)."""
    return [
        (c.name, condition_name(study.control, c.cell))
        for c in study.iter_conditions()
        if c.arm != study.control
    ]


def _tuning_params(study: Study, params: Mapping[str, Any], where: str) -> dict[str, Any]:
    if study.tuning is None:
        raise ConfigError(f"study {study.name!r} has no tuning section")
    space = study.tuning.search_space
    if not isinstance(params, Mapping):
        raise ConfigError(f"{where}: expected a mapping of parameter values, got {params!r}")
    out = {}
    for key, value in params.items():
        if key not in space:
            raise ConfigError(
                f"{where}.{key}: not in tuning.search_space; valid: {', '.join(space)}"
            )
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
        raise ConfigError(
            f"seed: {seed} is not a tuning seed; tuning.seeds: {study.tuning.seeds}"
        )
    return _spec(study, arm, arm.name, values, seed, f"tuning trial of {arm.name}")


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
    return [
        _spec(study, arm, arm.name, params[arm.name], seed, f"best.{arm.name}")
        for seed in study.seeds
        for arm in study.arms
    ]


def suggest_params(study: Study, trial: Any) -> dict[str, Any]:
    """Sample the search space through an Optuna ``Trial`` (suggest_float/int/categorical)."""
    if study.tuning is None:
        raise ConfigError(f"study {study.name!r} has no tuning section")
    out: dict[str, Any] = {}
    for key, p in study.tuning.search_space.items():
        if p.choices is not None:
            out[key] = trial.suggest_categorical(key, p.choices)
        elif numeric_kind(key) == "int":
            out[key] = trial.suggest_int(
                key, int(p.low), int(p.high), log=p.log, step=int(p.step or 1)
            )
        else:
            out[key] = trial.suggest_float(key, p.low, p.high, log=p.log, step=p.step)
    return out


def search_distributions(study: Study) -> dict[str, Any]:
    """The search space as Optuna distributions (for ``optuna_study.ask(distributions)``)."""
    import optuna.distributions as od

    if study.tuning is None:
        raise ConfigError(f"study {study.name!r} has no tuning section")
    out: dict[str, Any] = {}
    for key, p in study.tuning.search_space.items():
        if p.choices is not None:
            out[key] = od.CategoricalDistribution(p.choices)
        elif numeric_kind(key) == "int":
            out[key] = od.IntDistribution(int(p.low), int(p.high), log=p.log, step=int(p.step or 1))
        else:
            out[key] = od.FloatDistribution(p.low, p.high, log=p.log, step=p.step)
    return out


def dump_study(study: Study) -> str:
    """The resolved study as YAML (includes merged, defaults filled): ``load_study`` reads it back
    to the same study. ``harness run`` writes this as ``<study_dir>/study.yaml``."""
    data = study.model_dump(mode="json", exclude_none=True)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def study_warnings(study: Study) -> list[str]:
    """Legal but probably unintended designs (``harness validate`` prints these)."""
    out = []
    if len(study.seeds) < 3:
        out.append(
            f"only {len(study.seeds)} seed(s): the seed-to-seed noise floor cannot be estimated; "
            "use at least 3, preferably 5 or more"
        )
    if len(study.arms) == 1:
        out.append("a single arm: the report gives its noise floor but no comparisons")
    if study.tuning is None:
        seen: dict[str, str] = {}
        for c in study.iter_conditions():
            spec = condition_spec(study, c, study.seeds[0])
            key = spec.model_copy(update={"arm": "_"}).config_hash()
            if key in seen:
                out.append(f"conditions {seen[key]} and {c.name} have identical configurations")
            else:
                seen[key] = c.name
    return out
