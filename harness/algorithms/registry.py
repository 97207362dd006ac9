"""Named implementations of one signature, filled by a decorator (after verl's ``core_algos``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from harness.errors import unknown_name


class Registry:
    """Maps names to functions that share one signature, plus fixed per-entry metadata.

    ``meta_keys`` are the metadata every entry must declare at registration (for example an
    advantage estimator's ``needs_groups``); they are read back with ``meta(name)``.
    """

    def __init__(self, kind: str, meta_keys: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self._meta_keys = frozenset(meta_keys)
        self._fns: dict[str, Callable] = {}
        self._meta: dict[str, Mapping[str, Any]] = {}

    def register(self, name: str, **meta: Any) -> Callable[[Callable], Callable]:
        if name in self._fns:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        if set(meta) != self._meta_keys:
            raise TypeError(f"{self.kind} {name!r} must declare exactly {sorted(self._meta_keys)}")

        def decorate(fn: Callable) -> Callable:
            self._fns[name] = fn
            self._meta[name] = MappingProxyType(meta)
            return fn

        return decorate

    def get(self, name: str) -> Callable:
        """The function registered as ``name``; a ``ConfigError`` listing valid names otherwise."""
        if name not in self._fns:
            raise unknown_name(self.kind, name, self._fns)
        return self._fns[name]

    def meta(self, name: str) -> Mapping[str, Any]:
        self.get(name)
        return self._meta[name]

    def names(self) -> list[str]:
        return list(self._fns)

    def __contains__(self, name: object) -> bool:
        return name in self._fns

