"""Study files: read (with ``include:``) and check, before anything runs.

``load_study(path)`` reads YAML safely (duplicate keys are errors; ``1e-4`` is a float, as in
YAML 1.2), merges included files, validates the result strictly (``harness.study.schema.Study``), then
resolves every condition's algorithm through the presets, so an unknown preset, an override the
preset cannot take or a contradiction fails here, before anything runs, with one line naming
the field: ``arms[1].set.eps_hgh: unknown key; valid: ...``. Trials come from
``harness.study.expand``.

Reading is bounded whatever the file holds: only regular files are read (a pipe or a device is
refused before it is opened), at most ``MAX_STUDY_BYTES`` each; YAML aliases and the values they
expand to are counted while the document is composed, before anything is built from it; and
includes nest at most ``MAX_INCLUDE_DEPTH`` deep. An error about an included file names its
place and the file (``include[0]: base.yaml (from study.yaml): ...``), never its text.

A file that says ``fragment: true`` (``FRAGMENT_KEY``) is an include-only fragment: settings that
studies include (the shipped ones live in ``studies/common/``), not a study. ``load_study``
refuses it with one line; ``harness validate`` checks it as a fragment
(``harness.study.fragments``); a study that includes it does not inherit the key.
"""

from __future__ import annotations

import itertools
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from harness.algorithms.presets import PRESETS
from harness.engine.tasks import TASKS, build_task
from harness.engine.tasks.benchmarks import benchmark_task
from harness.engine.tasks.coverage import check_testbed_characters
from harness.engine.trial_file import check_templates
from harness.errors import ConfigError
from harness.stats.forecast_needs import evaluations_short
from harness.study.expand import Overrides, arm_rollout, arm_train, condition_spec, resolve_arm, split_params
from harness.study.field_errors import format_validation_error
from harness.study.overrides import format_value, numeric_kind
from harness.study.schema import Arm, Study
from harness.trainers.trl_mapping import check_trl

# --------------------------------------------------------------------------------------------
# Reading YAML: safe, strict about duplicate keys, YAML 1.2 floats, bounded in size and time
# --------------------------------------------------------------------------------------------

#: A study file (and each file it includes) may hold at most this many bytes.
MAX_STUDY_BYTES = 1_000_000
#: At most this many YAML aliases (``*name``, ``<<: *name`` included) in a study and its includes.
MAX_YAML_ALIASES = 100
#: At most this many YAML values (each alias counted as a full copy of what it names) in a study
#: and its includes, so a few hundred bytes of nested aliases cannot expand to billions of values.
MAX_YAML_VALUES = 100_000
#: Mappings and lists nest at most this deep.
MAX_YAML_DEPTH = 64
#: ``include:`` chains are at most this deep, and a study reads at most so many files in all.
MAX_INCLUDE_DEPTH = 16
MAX_STUDY_FILES = 64
#: What ``include:`` means, for the study-file reference: the key is read here, before validation,
#: so it is no field of ``Study`` with a description of its own.
INCLUDE_MEANING = "study files merged into this one, key by key (this file's keys win); paths relative to this file"


class _Budget:
    """What reading one study (its file and every include) has used so far."""

    def __init__(self) -> None:
        self.files = 0
        self.aliases = 0
        self.values = 0


class _LimitError(yaml.YAMLError):
    """A limit of ours was passed: the message names it and holds none of the file's text."""

    def __init__(self, problem: str, advice: str, mark) -> None:
        super().__init__(problem)
        self.problem, self.advice, self.mark = problem, advice, mark


class _StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that rejects duplicate keys, reads ``1e-4`` as a float and refuses
    documents nested deeper than ``MAX_YAML_DEPTH`` or expanding (through aliases) past the
    ``_Budget`` it is given, before anything is constructed from them."""

    def __init__(self, stream, budget: _Budget) -> None:
        super().__init__(stream)
        self._budget = budget
        self._depth = 0
        self._sizes: dict[int, int] = {}  # id(node) -> values in it, aliases expanded

    def compose_node(self, parent, index):
        budget = self._budget
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            budget.aliases += 1
            if budget.aliases > MAX_YAML_ALIASES:
                raise _LimitError(
                    f"more than {MAX_YAML_ALIASES} YAML aliases (*name)",
                    f"a study and its includes may use at most {MAX_YAML_ALIASES}; write the values out",
                    event.start_mark,
                )
            target = self.anchors.get(event.anchor)
            if target is not None and id(target) not in self._sizes:
                raise _LimitError(
                    "a YAML alias refers to a value that contains it (a recursive structure)",
                    "remove the alias",
                    event.start_mark,
                )
            node = super().compose_node(parent, index)  # undefined aliases: PyYAML's error
            self._count(self._sizes[id(node)], event.start_mark)
            return node
        self._depth += 1
        if self._depth > MAX_YAML_DEPTH:
            raise _LimitError(
                f"mappings and lists nested more than {MAX_YAML_DEPTH} deep",
                f"a study file may nest at most {MAX_YAML_DEPTH} levels",
                self.peek_event().start_mark,
            )
        node = super().compose_node(parent, index)
        self._depth -= 1
        if isinstance(node, yaml.SequenceNode):
            size = 1 + sum(self._sizes[id(child)] for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            size = 1 + sum(self._sizes[id(k)] + self._sizes[id(v)] for k, v in node.value)
        else:
            size = 1
        self._sizes[id(node)] = size
        self._count(1, node.start_mark)
        return node

    def _count(self, values: int, mark) -> None:
        self._budget.values += values
        if self._budget.values > MAX_YAML_VALUES:
            raise _LimitError(
                f"expands to more than {MAX_YAML_VALUES:,} YAML values (an alias counts as a copy of what it names)",
                f"a study and its includes may hold at most {MAX_YAML_VALUES:,}; use fewer aliases",
                mark,
            )

    def construct_mapping(self, node, deep=False):
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
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
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
        text = str(path.relative_to(Path.cwd()))
    except ValueError:
        text = str(path)
    return text if text.isprintable() else repr(text)  # one line, whatever the name holds


_FILE_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _not_regular(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in _FILE_KINDS if test(mode)), "not a regular file")


def _read_bytes(path: Path, where: str) -> bytes:
    """At most ``MAX_STUDY_BYTES + 1`` bytes of a regular file: a pipe, a device or a folder is
    refused before it is opened (and again, by the open descriptor, after)."""
    too_large = (
        f"{where}: larger than {MAX_STUDY_BYTES:,} bytes, the most a study file may hold; split it or shorten it"
    )

    def refuse(kind: str) -> ConfigError:
        return ConfigError(f"{where}: not a regular file ({kind}); give a YAML study file")

    try:
        kind = _not_regular(path.stat().st_mode)
        if kind:
            raise refuse(kind)
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as handle:
            st = os.fstat(handle.fileno())
            kind = _not_regular(st.st_mode)
            if kind:
                raise refuse(kind)
            if st.st_size > MAX_STUDY_BYTES:
                raise ConfigError(too_large)
            data = handle.read(MAX_STUDY_BYTES + 1)
    except OSError as err:
        if isinstance(err, FileNotFoundError):
            raise
        raise ConfigError(f"{where}: cannot read ({err.strerror or type(err).__name__})") from None
    if len(data) > MAX_STUDY_BYTES:
        raise ConfigError(too_large)
    return data


def _read_yaml(path: Path, where: str, budget: _Budget, *, show_text: bool) -> tuple[Any, Any]:
    """The file's data and its composed root node. ``where`` starts every error; with
    ``show_text`` false (an included file) no error quotes the file's text, only its lines."""
    budget.files += 1
    if budget.files > MAX_STUDY_FILES:
        raise ConfigError(
            f"{where}: a study may read at most {MAX_STUDY_FILES} files with its includes; include fewer files"
        )
    data = _read_bytes(path, where)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        detail = f": {err.reason} at byte {err.start}" if show_text else f" (byte {err.start})"
        raise ConfigError(f"{where}: not UTF-8 text{detail}; save it as UTF-8 YAML") from None
    loader = _StrictLoader(text, budget)
    try:
        node = loader.get_single_node()
        value = loader.construct_document(node) if node is not None else None
    except _LimitError as err:
        raise ConfigError(f"{where}: {err.problem}{_at(err.mark)}; {err.advice}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        if not show_text:
            message = f"{where}: invalid YAML{_at(mark)} (its text is not shown); fix that file"
            raise ConfigError(message) from None
        problem = getattr(err, "problem", None) or str(err)
        raise ConfigError(f"{where}: invalid YAML{_at(mark)}: {' '.join(problem.split())}") from None
    except RecursionError:  # MAX_YAML_DEPTH should make this unreachable
        message = f"{where}: nested too deeply; a study file may nest at most {MAX_YAML_DEPTH} levels"
        raise ConfigError(message) from None
    finally:
        loader.dispose()
    return value, node


def _at(mark) -> str:
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


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


#: The top-level key that marks an include-only fragment: ``fragment: true``.
FRAGMENT_KEY = "fragment"

#: The keys an included file may have at its top level.
_STUDY_KEYS = frozenset(Study.model_fields) | {"include", FRAGMENT_KEY}


def is_fragment(data: Mapping[str, Any], where: str = "") -> bool:
    """Whether a study file's data (as ``read_study_data`` returns it) marks an include-only
    fragment; a ``fragment`` key with any value but ``true`` is a ``ConfigError`` (which quotes
    no value: ``where`` names the file)."""
    if FRAGMENT_KEY not in data:
        return False
    if data[FRAGMENT_KEY] is not True:
        raise ConfigError(
            f"{where + ': ' if where else ''}{FRAGMENT_KEY}: must be true (it marks an include-only file); "
            "leave it out of a study file"
        )
    return True


def _check_study_keys(data: dict, node: Any, where: str) -> None:
    """An included file must look like a study file, so that nothing else (``/etc/shadow``) is
    echoed by the field checks: every top-level key a study field. The error gives the line."""
    if all(isinstance(key, str) and key in _STUDY_KEYS for key in data):
        return

    def is_field(key: Any) -> bool:
        if key.tag == "tag:yaml.org,2002:merge":
            return True  # what '<<' merges in is checked in the data above; no line to give
        is_str = isinstance(key, yaml.ScalarNode) and key.tag == "tag:yaml.org,2002:str"
        return is_str and key.value in _STUDY_KEYS

    line = next((k.start_mark.line + 1 for k, _ in getattr(node, "value", ()) if not is_field(k)), None)
    at = f"line {line} holds " if line else "it holds "
    raise ConfigError(
        f"{where}: not a study file ({at}a top-level key that is not a study field; valid: "
        f"{', '.join(sorted(_STUDY_KEYS))}); include only YAML files of study fields"
    )


def read_study_data(path: str | Path) -> dict[str, Any]:
    """The study file as a mapping, its ``include:`` files merged in (local keys win).

    Includes are relative to the including file, apply in the order listed (later wins), and
    may include further files, at most ``MAX_INCLUDE_DEPTH`` deep; a cycle or a missing file is
    an error naming ``include``. Every file must be a regular file of at most
    ``MAX_STUDY_BYTES``; the study and its includes may use at most ``MAX_YAML_ALIASES`` aliases
    and expand to at most ``MAX_YAML_VALUES`` values. An error about an included file names it
    by its place (``include[0]: base.yaml (from study.yaml): ...``) and never quotes its text.
    """
    return _read_study(Path(path).resolve(), None, (), _Budget())


def _read_study(path: Path, where: str | None, stack: tuple[Path, ...], budget: _Budget) -> dict[str, Any]:
    included = where is not None
    label = where if included else _display(path)
    try:
        data, node = _read_yaml(path, label, budget, show_text=not included)
    except FileNotFoundError:
        message = f"{where}: file not found" if included else f"study file not found: {label}"
        raise ConfigError(message) from None
    if not isinstance(data, dict):
        if included:
            raise ConfigError(
                f"{where}: not a study file (its top level is {_type_name(data)}, not a mapping of "
                "study fields); include only YAML files of study fields"
            )
        raise ConfigError(f"{label}: top level must be a mapping of study fields, got {_type_name(data)}")
    if included:
        _check_study_keys(data, node, where)
        if is_fragment(data, where):
            del data[FRAGMENT_KEY]  # marks that file; the including study is no fragment
    include = data.pop("include", None)
    if include is None:
        return data
    in_file = f" (in {_display(path)})" if included else ""
    if isinstance(include, str):
        include = [include]
    if not isinstance(include, list):
        got = _type_name(include) if included else repr(include)
        raise ConfigError(f"include: expected a file name or a list of file names, got {got}{in_file}")
    merged: dict[str, Any] = {}
    stack = (*stack, path)
    for i, name in enumerate(include):
        if not isinstance(name, str) or not name.strip():
            got = _type_name(name) if included else repr(name)
            raise ConfigError(f"include[{i}]: expected a file name, got {got}{in_file}")
        shown = name if name.isprintable() else repr(name)
        child = f"include[{i}]: {shown} (from {_display(path)})"
        if len(stack) > MAX_INCLUDE_DEPTH:
            raise ConfigError(
                f"{child}: includes nest more than {MAX_INCLUDE_DEPTH} deep (starting at "
                f"{_display(stack[0])}); include the files from fewer levels"
            )
        try:
            target = (path.parent / name).resolve()
        except (OSError, ValueError, RuntimeError) as err:
            raise ConfigError(f"{child}: not a usable file name ({err.__class__.__name__})") from None
        if target in stack:
            chain = " -> ".join(_display(p) for p in (*stack[stack.index(target) :], target))
            raise ConfigError(f"{child}: include cycle {chain}; remove one of these includes")
        merged = _deep_merge(merged, _read_study(target, child, stack, budget))
    return _deep_merge(merged, data)


# --------------------------------------------------------------------------------------------
# Loading and checking
# --------------------------------------------------------------------------------------------


def load_study(path: str | Path) -> Study:
    """Read, merge includes, validate and resolve a study file; ``ConfigError`` on any problem,
    a fragment (``fragment: true``) included."""
    data = read_study_data(path)
    if is_fragment(data):
        raise ConfigError(
            f"{_display(Path(path).resolve())}: an include-only fragment ({FRAGMENT_KEY}: true), not a study; "
            "include it from a study file and give that file"
        )
    study = parse_study(data)
    study.source = Path(path)
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
    for i, benchmark in enumerate(study.benchmarks):
        if benchmark.task.name not in TASKS:
            valid = ", ".join(sorted(TASKS.names()))
            raise ConfigError(f"benchmarks[{i}].task.name: unknown task {benchmark.task.name!r}; valid: {valid}")

    for i, arm in enumerate(study.arms):
        if arm.algorithm not in PRESETS:
            valid = ", ".join(sorted(PRESETS))
            raise ConfigError(f"arms[{i}].algorithm: unknown algorithm {arm.algorithm!r}; valid: {valid}")
        resolve_arm(arm, {}, f"arms[{i}].set" if arm.set else f"arms[{i}] ({arm.name})")
        arm_train(study, arm, {}, f"arms[{i}].train")
        arm_rollout(study, arm, {}, f"arms[{i}] ({arm.name})")

    # each grid value alone, so an error can point at it; then each full combination
    for key, values in study.grid.items():
        for j, value in enumerate(values):
            overrides = split_params({key: value})
            for i, arm in enumerate(study.arms):
                _check_overrides(study, arm, overrides, f"grid.{key}[{j}] (with arms[{i}] {arm.name})")
    if len(study.grid) > 1:
        for c in study.iter_conditions():
            _check_overrides(study, study.arm(c.arm), split_params(c.cell), f"grid: condition {c.name}")

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
                overrides = split_params({key: value})
                for i, arm in enumerate(study.arms):
                    where = f"tuning.search_space.{key}.{end} (with arms[{i}] {arm.name})"
                    _check_overrides(study, arm, overrides, where)
        if len(corners) > 1:
            for combo in itertools.islice(itertools.product(*corners.values()), MAX_CORNERS):
                point = dict(zip(corners, combo))
                overrides = split_params(point)
                for arm in study.arms:
                    where = f"tuning.search_space: {arm.name} at " + ",".join(
                        f"{k}={format_value(v)}" for k, v in point.items()
                    )
                    _check_overrides(study, arm, overrides, where)
    _check_trainers(study)


def _check_overrides(study: Study, arm: Arm, overrides: Overrides, where: str) -> None:
    """``arm`` with ``overrides`` (a grid value or cell, a search-space end or corner) makes a valid config."""
    resolve_arm(arm, overrides.algorithm, where)
    arm_train(study, arm, overrides.train, where)
    arm_rollout(study, arm, overrides.rollout, where)


def _check_trainers(study: Study) -> None:
    """Every placeholder of a program trainer's command and env names a field of its trial file (at
    each arm's first condition: the fields do not change with the cell or the seed), and every
    condition of a TRL arm has only parts TRL has (``check_trl``; pure, so TRL need not be installed).
    A tool-calling task is the builtin trainer's only: the trial file does not describe the tools."""
    checked: set[str] = set()
    for condition in study.iter_conditions():
        arm = study.arm(condition.arm)
        if study.arm_trainer(arm).is_builtin:
            continue
        where = f"arms[{study.arms.index(arm)}] ({arm.name})" if arm.trainer is not None else "study"
        spec = condition_spec(study, condition, study.seeds[0])
        try:
            if spec.task.tools:
                raise ConfigError(
                    f"trainer {spec.trainer.kind}: a tool-calling task (task.tools) is trained by the builtin "
                    "trainer only (the trial file does not describe the tools); use trainer: builtin"
                )
            if arm.name not in checked:
                check_templates(spec)
            if spec.trainer.kind == "trl":
                check_trl(spec)
        except ConfigError as err:
            raise ConfigError(f"{where}: {err}") from None
        checked.add(arm.name)


def check_task(study: Study) -> tuple[int, int]:
    """Build the study's task once (reads its files, checks its sizes, and that the testbed model
    can read it): (train, eval) prompts.

    Done by ``harness validate``; ``load_study`` checks only the task's name, which is cheap.
    """

    try:
        task = build_task(study.task)
    except ConfigError as err:
        raise ConfigError(f"task: {err}") from None
    except (ValueError, OSError, KeyError) as err:
        raise ConfigError(f"task: {' '.join(str(err).split())}") from None
    check_testbed_characters(study.model.name, task)
    for benchmark in study.benchmarks:
        bench = benchmark_task(benchmark, task)
        try:
            check_testbed_characters(study.model.name, bench)
        except ConfigError as err:
            raise ConfigError(f"benchmarks: {benchmark.name}: {err}") from None
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
    out += _forecast_warnings(study)
    if study.tuning is None:
        seen: dict[str, str] = {}
        for c in (c for c in study.iter_conditions() if c.role == "arm"):  # an A/A copy is identical by design
            spec = condition_spec(study, c, study.seeds[0])
            key = spec.model_copy(update={"arm": "_"}).config_hash()
            if key in seen:
                out.append(f"conditions {seen[key]} and {c.name} have identical configurations")
            else:
                seen[key] = c.name
    return out


def _forecast_warnings(study: Study) -> list[str]:
    """Looks before the budget where ``compute_looks.forecast`` can forecast nothing: on the step
    axis, where each trial evaluates is known before it runs (every ``train.eval_every`` steps and
    at each look); on a compute axis it is not, and nothing is said."""
    looks = study.compute_looks
    if looks is None or not looks.forecast or study.primary_at.point != "final":
        return []
    short: dict[str, list[str]] = {}  # the first look a condition forecasts nothing at, and why -> conditions
    for condition in study.iter_conditions():
        train = condition_spec(study, condition, study.seeds[0]).train
        _, points = looks.axis_points(study.primary_at, train.steps)
        every = range(train.eval_every, train.steps + 1, train.eval_every) if train.eval_every else []
        evaluated = [float(step) for step in every] + points
        for k, point in enumerate(points[:-1]):
            why = evaluations_short(evaluated, point)
            if why:
                short.setdefault(f"look {k + 1} (step {point:g}): {why}", []).append(condition.name)
                break
    return [
        f"compute_looks.forecast: {', '.join(names)} forecast nothing at {why}; evaluate more often (train.eval_every)"
        for why, names in short.items()
    ]
