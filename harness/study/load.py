"""Study files: read (with ``include:``) and check, before anything runs.

``load_study(path)`` reads YAML safely (duplicate keys are errors; ``1e-4`` is a float, as in
YAML 1.2), merges included files, validates the result strictly (``harness.study.schema.Study``), then
resolves every condition's algorithm through the presets, so an unknown preset, an override the
preset cannot take or a contradiction fails here, before anything runs, with one line naming
the field: ``arms[1].set.eps_hgh: unknown key; valid: ...``. Trials come from
``harness.study.expand``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from harness.algorithms.presets import PRESETS
from harness.engine.tasks import TASKS, build_task
from harness.errors import ConfigError
from harness.study.expand import arm_train, condition_spec, resolve_arm, split_params
from harness.study.field_errors import format_validation_error
from harness.study.schema import Study, format_value, numeric_kind

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


#: At most this many corners of a tuning search space are checked at load time.
MAX_CORNERS = 1024


def _check_resolves(study: Study) -> None:
    """Every arm, grid value, condition and search-space end must make a valid config."""

    if study.task.name not in TASKS:
        valid = ", ".join(sorted(TASKS.names()))
        raise ConfigError(f"task.name: unknown task {study.task.name!r}; valid: {valid}")

    for i, arm in enumerate(study.arms):
        if arm.algorithm not in PRESETS:
            valid = ", ".join(sorted(PRESETS))
            raise ConfigError(f"arms[{i}].algorithm: unknown algorithm {arm.algorithm!r}; valid: {valid}")
        resolve_arm(arm, {}, f"arms[{i}].set" if arm.set else f"arms[{i}] ({arm.name})")
        arm_train(study, arm, {}, f"arms[{i}].train")

    # each grid value alone, so an error can point at it; then each full combination
    for key, values in study.grid.items():
        for j, value in enumerate(values):
            algorithm, train = split_params({key: value})
            for i, arm in enumerate(study.arms):
                where = f"grid.{key}[{j}] (with arms[{i}] {arm.name})"
                resolve_arm(arm, algorithm, where)
                arm_train(study, arm, train, where)
    if len(study.grid) > 1:
        for c in study.iter_conditions():
            algorithm, train = split_params(c.cell)
            where = f"grid: condition {c.name}"
            resolve_arm(study.arm(c.arm), algorithm, where)
            arm_train(study, study.arm(c.arm), train, where)

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
                algorithm, train = split_params({key: value})
                for i, arm in enumerate(study.arms):
                    where = f"tuning.search_space.{key}.{end} (with arms[{i}] {arm.name})"
                    resolve_arm(arm, algorithm, where)
                    arm_train(study, arm, train, where)
        if len(corners) > 1:
            for combo in itertools.islice(itertools.product(*corners.values()), MAX_CORNERS):
                point = dict(zip(corners, combo))
                algorithm, train = split_params(point)
                for arm in study.arms:
                    where = (
                        f"tuning.search_space: {arm.name} at "
                        + ",".join(f"{k}={format_value(v)}" for k, v in point.items())
                    )
                    resolve_arm(arm, algorithm, where)
                    arm_train(study, arm, train, where)


def check_task(study: Study) -> tuple[int, int]:
    """Build the study's task once (reads its files, checks its sizes): (train, eval) prompts.

    Done by ``harness validate``; ``load_study`` checks only the task's name, which is cheap.
    """

    try:
        task = build_task(study.task)
    except ConfigError as err:
        raise ConfigError(f"task: {err}") from None
    except (ValueError, OSError, KeyError) as err:
        raise ConfigError(f"task: {' '.join(str(err).split())}") from None
    return len(task.train), len(task.eval)


# --------------------------------------------------------------------------------------------
# Writing back and warnings
# --------------------------------------------------------------------------------------------


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
