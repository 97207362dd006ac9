"""Small shared helpers: input checking, random generators, JSON-friendly dataclasses."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np


def as_sample(values, name: str = "values", *, min_n: int = 1) -> np.ndarray:
    """A 1-D float array of finite numbers (one value per seed), or a clear ValueError.

    NaN/inf are refused rather than silently dropped: a failed run is a fact the caller must
    decide about (drop it, or count it as a failure score) before comparing.
    """
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        arr = np.squeeze(arr)
        if arr.ndim != 1:
            raise ValueError(f"{name} must be one-dimensional (one value per seed); got shape {np.shape(values)}")
    if not np.all(np.isfinite(arr)):
        bad = int(np.sum(~np.isfinite(arr)))
        raise ValueError(
            f"{name} contains {bad} non-finite value(s) (NaN/inf); drop failed runs explicitly before this call"
        )
    if arr.size < min_n:
        raise ValueError(f"{name} needs at least {min_n} value(s); got {arr.size}")
    return arr


def check_alpha(alpha: float, name: str = "alpha") -> float:
    alpha = float(alpha)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"{name} must be in (0, 1); got {alpha}")
    return alpha


def resolve_rng(rng) -> np.random.Generator:
    """``None`` -> a generator seeded with 0 (reports are reproducible); an int -> seeded; a Generator as is."""
    if rng is None:
        return np.random.default_rng(0)
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer)):
        return np.random.default_rng(int(rng))
    raise TypeError(f"rng must be a numpy Generator, an int seed or None; got {type(rng).__name__}")


def jsonable(value: Any) -> Any:
    """Plain Python for JSON: numpy scalars -> int/float/bool, non-finite floats -> None."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else None
    return value


class JsonMixin:
    """``to_dict()`` for frozen result dataclasses: JSON-safe; NaN and inf become None (JSON null)."""

    def to_dict(self) -> dict[str, Any]:
        return jsonable(self)
