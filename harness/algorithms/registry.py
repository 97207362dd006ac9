"""Named implementations of one signature, plus fixed per-entry metadata (after verl's ``core_algos``).

An entry is either registered with its function (``register``, a decorator) or declared with
where its function lives (``declare(name, "module:attr")``) and imported the first time ``get``
asks for it. A declared entry's name and metadata are known without importing its module: the
algorithm parts live in torch modules, while the checks of a study file need only their names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from types import MappingProxyType
from typing import Any

from harness.errors import unknown_name


class Registry:
    """Maps names to functions that share one signature, plus fixed per-entry metadata.

    ``meta_keys`` are the metadata every entry must declare (for example an advantage
    estimator's ``needs_groups``); they are read back with ``meta(name)``.
    """

    def __init__(self, kind: str, meta_keys: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self._meta_keys = frozenset(meta_keys)
        self._fns: dict[str, Callable | str] = {}  # a str is a declared entry's "module:attr", not imported yet
        self._meta: dict[str, Mapping[str, Any]] = {}

    def register(self, name: str, **meta: Any) -> Callable[[Callable], Callable]:
        self._check_new(name, meta)

        def decorate(fn: Callable) -> Callable:
            self._add(name, fn, meta)
            return fn

        return decorate

    def declare(self, name: str, target: str, **meta: Any) -> None:
        """Add ``name`` as the function at ``target`` (``"package.module:attr"``), imported on first ``get``."""
        self._check_new(name, meta)
        if target.count(":") != 1:
            raise ValueError(f"{self.kind} {name!r}: target {target!r} is not 'module:attr'")
        self._add(name, target, meta)

    def _check_new(self, name: str, meta: Mapping[str, Any]) -> None:
        if name in self._fns:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        if set(meta) != self._meta_keys:
            raise TypeError(f"{self.kind} {name!r} must declare exactly {sorted(self._meta_keys)}")

    def _add(self, name: str, fn: Callable | str, meta: Mapping[str, Any]) -> None:
        self._fns[name] = fn
        self._meta[name] = MappingProxyType(dict(meta))

    def check(self, name: str) -> None:
        """A ``ConfigError`` listing the valid names unless ``name`` is one; imports nothing."""
        if name not in self._fns:
            raise unknown_name(self.kind, name, self._fns)

    def get(self, name: str) -> Callable:
        """The function registered as ``name`` (``check`` first)."""
        self.check(name)
        fn = self._fns[name]
        if isinstance(fn, str):
            module, attr = fn.split(":")
            fn = self._fns[name] = getattr(import_module(module), attr)
        return fn

    def meta(self, name: str) -> Mapping[str, Any]:
        self.check(name)
        return self._meta[name]

    def names(self) -> list[str]:
        return list(self._fns)

    def __contains__(self, name: object) -> bool:
        return name in self._fns
