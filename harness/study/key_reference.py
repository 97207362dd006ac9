"""The reference of every study-file key, read off the pydantic models that validate a study.

``keys()`` walks ``Study`` (and, for ``arms[].set`` / ``grid`` / ``tuning.search_space``, the
algorithm config types) and gives each key its dotted path, type, default, what reads it and one
line of meaning: its ``Field`` description, the one place a meaning is written, on the field
itself (``include``, read before validation, has its meaning beside the code that reads it in
``harness.study.load``). Which algorithm part reads a field comes from the parts' own
declarations (``harness.algorithms.parts``). ``harness schema`` prints
``markdown()``, or ``as_json()``; ``docs/study-reference.md`` is that Markdown, kept in sync by a
test. The prose sections around the tables (the grid, the tuning block, the JSONL task) carry
example study fragments that the same test validates, so the examples cannot go stale.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import yaml
from pydantic import BaseModel, TypeAdapter
from pydantic.fields import FieldInfo

from harness.algorithms import parts
from harness.algorithms.config import CONFIG_TYPES
from harness.algorithms.presets import PRESETS
from harness.engine.rollout_config import RolloutConfig
from harness.engine.spec import TrainConfig
from harness.engine.tasks import TASKS, TOOLS, jsonl
from harness.engine.tasks.rewards import REWARDS
from harness.study.load import INCLUDE_MEANING
from harness.study.overrides import ROLLOUT_KEYS, algorithm_keys
from harness.study.resources import Resources
from harness.study.schema import FINAL_METRICS, Arm, Study
from harness.study.sections import SearchParam

COMMAND = "harness schema > docs/study-reference.md"

#: What reads each section's keys (by the first part of their path) ...
_SECTION_READERS = {
    "task": "harness.engine.tasks",
    "benchmarks": "harness.engine.trial (evaluation), harness.decide (benchmarks)",
    "model": "harness.engine.models",
    "warmstart": "harness.engine.warmstart",
    "train": "harness.engine.trial",
    "rollout": "harness.engine.samplers (the sampler, policy sync, staleness), harness.engine.vllm (the server)",
    "tuning": "harness.runner (Optuna)",
    "arms": "harness.study",
    "sequential": "harness.study, harness.runner (looks), harness.decide (looks)",
    "checks": "harness.runner (before the first trial)",
    "primary_at": "harness.decide (compute_budget)",
    "compute_looks": "harness.study, harness.runner (segments), harness.decide (sequential.compute)",
    "scaling": "harness.decide (scaling)",
    "eval_subset": "harness.engine.eval_subset (the draw), harness.engine.trial (evaluations), harness.decide "
    "(the subset's variance)",
    "trainer": "harness.trainers (the trial process; templates checked by harness.study)",
    "resources": "harness.runner.executors",
}
#: ... and each key that is not in a section.
_READ_BY = {
    "include": "harness.study.load",
    "name": "harness.study",
    "description": "harness.report",
    "output_dir": "harness.study, harness.runner",
    "primary_metric": "harness.stats, harness.decide",
    "direction": "harness.stats, harness.decide",
    "min_effect": "harness.stats, harness.decide",
    "test": "harness.stats",
    "failures": "harness.stats",
    "control": "harness.study, harness.stats",
    "seeds": "harness.study",
    "grid": "harness.study",
    "calibration": "harness.study, harness.decide (calibration)",
    "placebo": "harness.study, harness.decide (calibration)",
    "arms[].description": "nothing: a note for the file's readers",
    "arms[].trainer": "harness.study (expand), harness.trainers",
    "executor": "harness.runner.executors",
    "arms[].resources": "harness.runner.executors",
    **{f"arms[].resources.{name}": "harness.runner.executors" for name in Resources.model_fields},
}
#: How a model reads as a type.
_MODEL_TYPES = {Arm: "arm", SearchParam: "range or choices"}


@dataclass(frozen=True)
class Key:
    """One study-file key."""

    path: str  # dotted: model.lora.r, arms[].set.eps_low
    type: str
    default: Any  # JSON-ready; None for null
    required: bool
    read_by: str
    meaning: str
    section: str  # the table it is listed in


# ---- types and defaults -----------------------------------------------------------------------

_BOUNDS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}


def _bounds(metadata: Sequence[Any]) -> str:
    found = [f"{sign} {getattr(m, name):g}" for m in metadata for name, sign in _BOUNDS.items() if hasattr(m, name)]
    return (" " + ", ".join(found)) if found else ""


def _type(annotation: Any, metadata: Sequence[Any] = ()) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type(args[0], [*metadata, *args[1:]])
    if origin in (typing.Union, types.UnionType):
        shown = [_type(a, metadata) for a in args if a is not type(None)]
        return " | ".join(shown + ["null"] * (type(None) in args))
    if origin is Literal:  # a single value is shown alone: auto | bool
        return "one of " + ", ".join(map(str, args)) if len(args) > 1 else str(args[0])
    if origin is list:
        return f"list of {_type(args[0])}"
    if origin is dict:
        return f"mapping of {_type(args[0])} to {_type(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _MODEL_TYPES.get(annotation, "section")
    if annotation is Any:
        return "any"
    return annotation.__name__ + _bounds(metadata)


def _choices(path: str, field: str) -> list[str] | None:
    """The registered names a string key takes (presets, tasks, parts, rewards, metrics)."""
    if path == "arms[].algorithm":
        return list(PRESETS)
    if path in ("task.name", "benchmarks[].task.name"):
        return TASKS.names()
    if path == "task.reward":
        return [*REWARDS.names(), "module:function", "a learned reward model {model: ...} (`task.reward` below)"]
    if path == "task.tools":
        return [*TOOLS.names(), "module:function"]
    if path == "primary_metric":
        return list(FINAL_METRICS)
    for slots in (parts.SLOTS, parts.DPO_SLOTS):
        if path.startswith("arms[].set.") and field in slots:
            return slots[field].names()
    return None


#: Any value as JSON-ready data (a section's default: a mapping of all its keys).
_AS_JSON = TypeAdapter(Any)


def _default(info: FieldInfo) -> tuple[Any, bool]:
    """The default, JSON-ready (a section's: all its keys), and whether the key is required."""
    if info.is_required():
        return None, True
    return _AS_JSON.dump_python(info.get_default(call_default_factory=True), mode="json"), False


def _reader(path: str) -> str:
    return _READ_BY.get(path) or _SECTION_READERS[path.split(".")[0].removesuffix("[]")]


def _key(model: type[BaseModel], field: str, path: str, section: str, read_by: str) -> Key:
    info = model.model_fields[field]
    choices = _choices(path, field)
    kind = "one of " + ", ".join(choices) if choices else _type(info.annotation, info.metadata)
    default, required = _default(info)
    return Key(path, kind, default, required, read_by, info.description or "", section)


# ---- walking the models -------------------------------------------------------------------------


def _nested(annotation: Any, path: str) -> tuple[type[BaseModel], str] | None:
    """The model a field holds and the path prefix of its keys: ``model.lora.`` for
    ``LoraConfig | None``, ``arms[].`` for ``list[Arm]``, ``tuning.search_space.KEY.`` for a
    mapping to ``SearchParam``; None for a plain value."""
    origin = typing.get_origin(annotation)
    candidates = [annotation, *typing.get_args(annotation)]
    while candidates:
        candidate = candidates.pop(0)
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            suffix = "[]." if origin is list else ".KEY." if origin is dict else "."
            return candidate, path + suffix
        if candidate is not annotation and typing.get_origin(candidate) in (
            typing.Annotated,
            typing.Union,
            types.UnionType,
        ):
            candidates += typing.get_args(candidate)  # a tagged union's branches (task.reward)
    return None


def _walk(model: type[BaseModel], prefix: str, section: str) -> list[Key]:
    """The keys of ``model``, then those of each section in it, depth first."""
    found: list[Key] = []
    nested: list[Key] = []
    for name, info in model.model_fields.items():
        path = prefix + name
        found.append(_key(model, name, path, section, _reader(path)))
        if (inner := _nested(info.annotation, path)) is not None:
            sub, sub_prefix = inner
            nested += _walk(sub, sub_prefix, sub_prefix.removesuffix("."))
    return found + nested


def _algorithm_reader(field: str) -> str:
    kinds = [kind for kind, config in CONFIG_TYPES.items() if field in config.model_fields]
    if kinds == ["dpo"]:
        return "DPO"
    if field in parts.STEP_FIELDS:
        return "every algorithm" if "dpo" in kinds else "every RL algorithm"
    return " or ".join(parts.readers(field))


def algorithm_reference() -> list[Key]:
    """The keys of ``arms[].set`` (and of ``grid`` / ``tuning.search_space``): the algorithm
    config fields, with the parts that read each, then the rollout fields a condition may set."""
    out = []
    for field in algorithm_keys():
        model = next(config for config in CONFIG_TYPES.values() if field in config.model_fields)
        out.append(_key(model, field, f"arms[].set.{field}", "arms[].set", _algorithm_reader(field)))
    for field in ROLLOUT_KEYS:
        key = _key(RolloutConfig, field, f"arms[].set.rollout.{field}", "arms[].set", _reader("rollout"))
        out.append(replace(key, default=f"the study's rollout.{field}"))
    return out


def keys() -> list[Key]:
    """Every study-file key, table by table: the top level, its sections, the algorithm keys."""
    include = Key("include", "file name | list of file names", None, False, _reader("include"), INCLUDE_MEANING, "top")
    return [include, *_walk(Study, "", "top"), *algorithm_reference()]


# ---- examples and prose -------------------------------------------------------------------------

GRID_EXAMPLE = """\
name: clip_grid
seeds: 3
control: grpo
arms:
  - {name: grpo, algorithm: grpo}
  - {name: dapo, algorithm: dapo}
grid:
  eps_high: [0.2, 0.28]
  train.temperature: [0.7, 1.0]
"""

TUNING_EXAMPLE = """\
name: tune_lr
seeds: 5
control: grpo
arms:
  - {name: grpo, algorithm: grpo}
  - {name: dr_grpo, algorithm: dr_grpo}
tuning:
  n_trials: 8
  seeds: [100, 101]
  search_space:
    lr: {low: 3.0e-5, high: 1.0e-3, log: true}
    train.temperature: {choices: [0.7, 1.0]}
"""

ROLLOUT_EXAMPLE = """\
name: staleness
seeds: 3
control: sync
rollout: {backend: vllm}
arms:
  - {name: sync, algorithm: grpo}
  - {name: stale2, algorithm: grpo, set: {rollout.max_staleness: 2}}
  - {name: in_process, algorithm: grpo, set: {rollout.backend: hf}}
"""

JSONL_LINE = '{"question": "Tom has 3 apples and buys 2. How many?", "answer": "3 + 2 = 5 #### 5"}'

EXAMPLES = {"grid": GRID_EXAMPLE, "tuning": TUNING_EXAMPLE, "rollout": ROLLOUT_EXAMPLE}


def _rst_to_markdown(text: str) -> str:
    return " ".join(text.split()).replace("``", "`")


def _grid_section() -> list[str]:
    study = Study.model_validate(yaml.safe_load(GRID_EXAMPLE))
    return [
        "## Grid",
        "",
        "`grid` maps override keys to lists of values. An override key is an algorithm key "
        "(the override keys table above), `train.KEY` (any key of the `train` table), `rollout.backend` or "
        "`rollout.max_staleness`. Every arm runs at "
        "every combination of the values; each (arm, combination) is a condition, named "
        "`arm[key=value,...]` with the keys sorted, and runs every seed. A key the grid varies may not also "
        "be fixed in an arm's `set` or `train`, and a study has a grid or a tuning block, not both.",
        "",
        "```yaml",
        GRID_EXAMPLE.rstrip(),
        "```",
        "",
        f"gives {len(study.conditions())} conditions x {len(study.seeds)} seeds: "
        + ", ".join(f"`{name}`" for name in study.conditions())
        + "; each is compared with the control arm at the same grid cell.",
    ]


def _rollout_section() -> list[str]:
    return [
        "## Rollout per arm",
        "",
        "The study's `rollout` is every trial's unless an arm's `set` (or a grid cell) gives `rollout.backend` "
        "or `rollout.max_staleness`, so one study ablates the staleness, or asks whether the backend changes "
        "the results. Each trial's id hashes the rollout it runs with (a trial on `hf` at staleness 0 keeps "
        "the id it had before the section existed), and `rollout.vllm` stays the study's: an arm that sets "
        "`rollout.backend: hf` in a study on `vllm` drops it. A combination the backend cannot run, such as "
        "`rollout.max_staleness` above 0 on `hf`, is an error naming the arm. Every arm's held-out evaluations "
        "go through its own backend with the same prompts, token budget, stop rule and decoding: greedy "
        "scores agree across backends up to their arithmetic (a near-tie may break the other way), the "
        "sampled ones come from different random streams, so a difference between backends is the "
        "backend's: its sampling and its arithmetic, in training and in evaluation.",
        "",
        "```yaml",
        ROLLOUT_EXAMPLE.rstrip(),
        "```",
    ]


def _tuning_section() -> list[str]:
    return [
        "## Tuning",
        "",
        "With a `tuning` block a study runs in two phases. Phase 1 tunes each arm on its own: "
        "`n_trials` Optuna (TPE) trials per arm, each run at every one of `tuning.seeds` and scored by the "
        "mean of the primary metric. Phase 2 runs each arm's best configuration over the study's `seeds`, "
        "which must be disjoint from the tuning seeds, and compares the tuned arms. A `search_space` entry "
        "is keyed like a grid key and is a range `{low, high}` (with `log: true` for a log-uniform draw, or "
        "`step` for a stepped one) or `{choices: [...]}`; a key that is not numeric takes choices only.",
        "",
        "```yaml",
        TUNING_EXAMPLE.rstrip(),
        "```",
    ]


def _jsonl_section() -> list[str]:
    return [
        "## JSONL task (`task.name: gsm8k_jsonl`)",
        "",
        _rst_to_markdown(jsonl.__doc__),
        "",
        "```json",
        JSONL_LINE,
        "```",
        "",
        f"Each question is followed by the instruction `{jsonl.INSTRUCTION.strip()}`, and a completion scores 1 "
        "when its last `\\boxed{}` holds the reference number. `task.path` names the file (relative to the "
        "folder `harness` runs in); without `task.eval_path` the held-out prompts are a fixed split of it "
        "(`task.n_eval` of them, at most a fifth of the file), else they are read from `task.eval_path`.",
    ]


# ---- rendering ---------------------------------------------------------------------------------

_TITLES = {
    "top": "Top level",
    "arms[].set": "Override keys: `arms[].set`, `grid` and `tuning.search_space`",
}


def _cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ")


def _default_text(key: Key) -> str:
    if key.required:
        return "required"
    if key.type == "section":
        return "see below"
    if isinstance(key.default, str):
        return key.default or '""'
    return json.dumps(key.default)


def _table(rows: list[Key]) -> list[str]:
    lines = ["| key | type | default | read by | meaning |", "| --- | --- | --- | --- | --- |"]
    lines += [
        "| "
        + " | ".join(_cell(text) for text in (f"`{k.path}`", k.type, _default_text(k), k.read_by, k.meaning))
        + " |"
        for k in rows
    ]
    return lines


def markdown() -> str:
    """The reference as Markdown: ``docs/study-reference.md``."""
    all_keys = keys()
    sections = list(dict.fromkeys(k.section for k in all_keys))
    lines = [
        "# Study file reference",
        "",
        f"Generated from the schema by `harness schema`; do not edit by hand: run `{COMMAND}`.",
        "",
        "A study file is YAML. Every key below is checked before anything runs: an unknown key, a value of the "
        "wrong type or out of bounds is an error naming the key (`harness validate STUDY.yaml`). Keys of "
        "sections may be left out: they take the defaults shown. `read by` names the code that reads a key; "
        "for algorithm keys, the parts that read it (a key that none of an arm's parts reads cannot be set).",
        "",
    ]
    for section in sections:
        lines += [f"## {_TITLES.get(section, f'`{section}`')}", ""]
        if section == "arms[].set":
            lines += [
                "The algorithm keys' defaults are the config's; every preset sets its own (`harness algorithms` "
                "lists them). `rollout.backend` and `rollout.max_staleness` set the study's `rollout` for one "
                "arm (in its `set`) or one grid cell, so that one study compares them; their defaults are the "
                "study's. A grid or a search space may also vary `train.KEY`, any of: "
                f"{', '.join(TrainConfig.model_fields)}.",
                "",
            ]
        lines += [*_table([k for k in all_keys if k.section == section]), ""]
    for part in (_grid_section(), _rollout_section(), _tuning_section(), _jsonl_section()):
        lines += [*part, ""]
    return "\n".join(lines).rstrip() + "\n"


def as_json() -> str:
    """Every key as JSON: ``[{path, type, default, required, read_by, meaning, section}, ...]``."""
    return json.dumps([asdict(k) for k in keys()], indent=2)
