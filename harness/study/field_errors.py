"""Field paths and one-line errors for strict configs.

pydantic reports a nested failure as a location tuple and a message; these helpers turn it into
the single line the CLI prints, e.g. ``arms[1].set.eps_hgh: unknown key; valid: ...``, and let a
validator raise a :class:`FieldError` that names a field below the one being validated.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ValidationError

Loc = tuple[str | int, ...]


class FieldError(ValueError):
    """A validation failure about a field below the one being validated.

    Raised inside a validator, pydantic keeps the exception in the error's context;
    :func:`format_validation_error` appends ``loc`` to pydantic's own location, so a check on the
    whole study can still name ``control`` or ``arms[2].name``.
    """

    def __init__(self, loc: Loc, msg: str):
        self.loc = tuple(loc)
        self.msg = msg
        super().__init__(f"{format_loc(self.loc)}: {msg}" if self.loc else msg)


def format_loc(loc: Sequence[str | int]) -> str:
    """``('arms', 1, 'set', 'lr')`` -> ``arms[1].set.lr``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


# pydantic puts the branch of a union into the location ('lora', 'target_modules', 'list[str]',
# 0); such tags are never field names. The last part of an unknown-key error is the user's key,
# whatever it looks like, and is always kept.
_UNION_TAG = re.compile(r"[\[\]]|^(str|int|float|bool|list|dict|none|tuple)$")


def _clean_loc(loc: Sequence[str | int], keep_last: bool = False) -> Loc:
    loc = tuple(loc)
    head, tail = (loc[:-1], loc[-1:]) if keep_last else (loc, ())
    return tuple(p for p in head if isinstance(p, int) or not _UNION_TAG.search(p)) + tail


def _model_at(root: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    """The pydantic model that a location points into (for listing a model's valid keys)."""
    tp: Any = root
    for part in loc:
        tp = unwrap_type(tp, want_model=True)
        if isinstance(part, int):
            args = typing.get_args(tp)
            tp = args[0] if args else None
        elif isinstance(tp, type) and issubclass(tp, BaseModel):
            field = tp.model_fields.get(part)
            if field is None:
                return None
            tp = field.annotation
        elif typing.get_origin(tp) is dict:
            tp = typing.get_args(tp)[1]
        else:
            return None
    tp = unwrap_type(tp, want_model=True)
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def unwrap_type(tp: Any, want_model: bool = False) -> Any:
    """Strip ``Annotated`` and ``Optional``; for other unions prefer a model branch."""
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            branches = [typing.get_args(a)[0] if typing.get_origin(a) is Annotated else a for a in args]  # tagged
            models = [a for a in branches if isinstance(a, type) and issubclass(a, BaseModel)]
            if want_model and models:
                tp = models[0]
            elif len(args) == 1:
                tp = args[0]
            else:
                return tp
        else:
            return tp


def short_repr(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def error_parts(err: dict, root: type[BaseModel] | None = None) -> tuple[Loc, str]:
    """One pydantic error (an item of ``ValidationError.errors()``) as (location, message)."""
    kind = err.get("type", "")
    loc = _clean_loc(err.get("loc", ()), keep_last=kind == "extra_forbidden")
    exc = (err.get("ctx") or {}).get("error")
    if isinstance(exc, FieldError):
        loc, msg = loc + exc.loc, exc.msg
    elif kind == "extra_forbidden":
        model = _model_at(root, loc[:-1]) if root is not None else None
        msg = "unknown key"
        if model is not None:
            msg += "; valid: " + ", ".join(model.model_fields)
    elif kind == "missing":
        msg = "required field is missing"
    else:
        msg = err.get("msg", "invalid value")
        if msg.startswith(("Value error, ", "Assertion failed, ")):
            msg = msg.split(", ", 1)[1]
        if kind not in ("value_error", "assertion_error") and "input" in err:
            msg += f" (got {short_repr(err['input'])})"
    return loc, " ".join(str(msg).split())  # one line, whatever the message held


def error_line(err: dict, root: type[BaseModel] | None = None, prefix: Loc = ()) -> str:
    """One pydantic error as ``path: message``."""
    loc, msg = error_parts(err, root)
    loc = prefix + loc
    return f"{format_loc(loc)}: {msg}" if loc else msg


def field_error(exc: ValidationError, prefix: Loc, root: type[BaseModel] | None = None) -> FieldError:
    """The first error of ``exc`` as a ``FieldError`` located under ``prefix``."""
    loc, msg = error_parts(exc.errors()[0], root)
    return FieldError(prefix + loc, msg)


def format_validation_error(exc: ValidationError, root: type[BaseModel] | None = None, prefix: Loc = ()) -> str:
    """A ``ValidationError`` as one line: the first error, and how many more there are."""
    errors = exc.errors()
    first = errors[0]
    if first["type"] == "missing":
        # name every required field missing from the same section at once
        parent = _clean_loc(first["loc"])[:-1]
        missing = [e for e in errors if e["type"] == "missing" and _clean_loc(e["loc"])[:-1] == parent]
        names = ", ".join(str(_clean_loc(e["loc"])[-1]) for e in missing)
        loc = prefix + parent
        line = (f"{format_loc(loc)}: " if loc else "") + (
            f"required field missing: {names}" if len(missing) == 1 else f"required fields missing: {names}"
        )
        rest = len(errors) - len(missing)
    else:
        line, rest = error_line(first, root, prefix), len(errors) - 1
    if rest:
        line += f" (+{rest} more)"
    return line


# --------------------------------------------------------------------------------------------
# Names
