"""Override keys: which fields an arm's ``set:``/``train:``, a grid or a search space may set, how
a value given for one is checked against the field's type and bounds, and how it reads in a
condition's name.

Three sections can be overridden per condition: the algorithm (``lr``: its config's fields),
``train.<field>`` and ``rollout.<field>`` for the rollout fields an ablation compares
(``ROLLOUT_KEYS``: the backend and the staleness; where the vLLM server runs stays the study's).
An arm's ``set:`` takes algorithm keys and the rollout keys; its ``train:`` the train fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from harness.algorithms.config import CONFIG_TYPES
from harness.engine.rollout_config import RolloutConfig
from harness.engine.spec import TrainConfig
from harness.study.field_errors import FieldError, Loc, field_error, unwrap_type

#: Algorithm config fields that identify a preset rather than configure it.
_NOT_OVERRIDABLE = frozenset({"name", "kind"})
#: The rollout fields a condition may set (``rollout.<field>``); ``rollout.vllm`` is the study's.
ROLLOUT_KEYS = ("backend", "max_staleness")

Section = Literal["algorithm", "train", "rollout"]


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


def rollout_keys() -> list[str]:
    """The ``rollout.<field>`` keys an arm's ``set:``, a grid or a search space may set."""
    return [f"rollout.{k}" for k in ROLLOUT_KEYS]


def set_keys() -> list[str]:
    """Keys an arm's ``set:`` may hold: the algorithm keys and the rollout keys."""
    return algorithm_keys() + rollout_keys()


def override_keys() -> list[str]:
    """Keys a grid or a search space may vary: algorithm config fields, ``train.<field>`` and the rollout keys."""
    return algorithm_keys() + [f"train.{k}" for k in train_keys()] + rollout_keys()


def split_key(key: str) -> tuple[Section, str]:
    """``'lr'`` -> ``('algorithm', 'lr')``; ``'train.steps'`` -> ``('train', 'steps')``;
    ``'rollout.max_staleness'`` -> ``('rollout', 'max_staleness')``."""
    for section in ("train", "rollout"):
        if key.startswith(f"{section}."):
            return section, key[len(section) + 1 :]
    return "algorithm", key


def _field_info(key: str) -> FieldInfo:
    section, name = split_key(key)
    fields = {"train": TrainConfig.model_fields, "rollout": RolloutConfig.model_fields}.get(section)
    return fields[name] if fields is not None else _algorithm_fields()[name]


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


def is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def first_repeat(values: Sequence[Any]) -> int | None:
    """Index of the first repeated value (``True`` and ``1`` count as different), else None."""
    seen: set[tuple[type, Any]] = set()
    for i, v in enumerate(values):
        token = (type(v), v)
        if token in seen:
            return i
        seen.add(token)
    return None
