"""Named implementations of one signature, plus fixed per-entry metadata (after verl's ``core_algos``).

An entry is either registered with its function (``register``, a decorator) or declared with
where its function lives (``declare(name, "module:attr")``) and imported the first time ``get``
asks for it. A declared entry's name and metadata are known without importing its module: the
algorithm parts live in torch modules, while the checks of a study file need only their names.

A registry built with ``on_function`` keys (the algorithm parts: ``cites``) also wants the name
and those keys on the function itself, as verl's ``@register_policy_loss("...")``: the function
carries ``@REGISTRY.implements(name, cites=...)``, which, when its module is imported, refuses a
name that is not declared, a value that differs from the declaration's, or a function that is not
the declared ``module:attr``; ``get`` refuses a declared function that does not carry it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import import_module
from types import MappingProxyType
from typing import Any

from harness.errors import unknown_name


@dataclass(frozen=True)
class Implements:
    """What ``Registry.implements`` put on a function (its ``implements`` attribute): the
    registry's kind, the entry's name and the metadata the function states."""

    kind: str
    name: str
    stated: Mapping[str, Any]


class Registry:
    """Maps names to functions that share one signature, plus fixed per-entry metadata.

    ``meta_keys`` are the metadata every entry must declare (for example an advantage
    estimator's ``needs_groups``); they are read back with ``meta(name)``. ``on_function`` are
    those of them a declared entry's function states again in its ``implements`` decorator.
    """

    def __init__(self, kind: str, meta_keys: tuple[str, ...] = (), on_function: tuple[str, ...] = ()) -> None:
        if not set(on_function) <= set(meta_keys):
            raise ValueError(f"{kind}: on_function {sorted(on_function)} must be among meta_keys {sorted(meta_keys)}")
        self.kind = kind
        self._meta_keys = frozenset(meta_keys)
        self._on_function = frozenset(on_function)
        self._fns: dict[str, Callable | str] = {}  # a str is a declared entry's "module:attr", not imported yet
        self._targets: dict[str, str] = {}  # declared entries: name -> "module:attr"
        self._meta: dict[str, Mapping[str, Any]] = {}

    def register(self, name: str, **meta: Any) -> Callable[[Callable], Callable]:
        if self._on_function:
            raise TypeError(f"{self.kind} {name!r}: declare it, then mark its function with implements")
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
        self._targets[name] = target

    def implements(self, name: str, **stated: Any) -> Callable[[Callable], Callable]:
        """Decorator on the function of the declared entry ``name``, stating its ``on_function``
        metadata: a ``ValueError`` (at import) unless they, and where the function lives, match
        the declaration."""
        if name not in self._targets:
            raise ValueError(f"{self.kind} {name!r} has a function but no declaration: declare it first")
        if set(stated) != self._on_function:
            raise TypeError(f"{self.kind} {name!r}: implements must state exactly {sorted(self._on_function)}")
        for key, value in stated.items():
            if value != self._meta[name][key]:
                raise ValueError(
                    f"{self.kind} {name!r}: its function states {key}={value!r}, its declaration "
                    f"{key}={self._meta[name][key]!r}; make them one"
                )

        def decorate(fn: Callable) -> Callable:
            where = f"{fn.__module__}:{fn.__name__}"
            if where != self._targets[name]:
                raise ValueError(f"{self.kind} {name!r} is declared at {self._targets[name]}, not at {where}")
            fn.implements = Implements(self.kind, name, MappingProxyType(dict(stated)))
            self._fns[name] = fn
            return fn

        return decorate

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
            loaded = getattr(import_module(module), attr)
            if self._on_function and self._fns[name] is not loaded:
                raise LookupError(f"{self.kind} {name!r}: {fn} does not carry @implements({name!r}, ...); mark it")
            fn = self._fns[name] = loaded
        return fn

    def meta(self, name: str) -> Mapping[str, Any]:
        self.check(name)
        return self._meta[name]

    def names(self) -> list[str]:
        return list(self._fns)

    def __contains__(self, name: object) -> bool:
        return name in self._fns
