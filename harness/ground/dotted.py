"""The one ``module:attr`` resolver: a user's reward function, tool or trial function named by
where it lives. Only names a user wrote in a study or on the command line go through here; the
harness's own layers import each other directly."""

from __future__ import annotations

import importlib
import importlib.util

from harness.errors import ConfigError, one_line


def split(path: str, *, what: str) -> tuple[str, str]:
    """``'pkg.mod:attr'`` -> ``('pkg.mod', 'attr')``, or a ``ConfigError`` naming ``what``."""
    module, sep, attr = str(path).partition(":")
    if not sep or not module or not attr.isidentifier():  # one name: never a path of attributes
        raise ConfigError(f"{what}: expected 'module:attribute', got {path!r}")
    return module, attr


def check_findable(path: str, *, what: str) -> None:
    """The module of ``path`` can be found, without importing it (it may need torch, or run code)."""
    module, _attr = split(path, what=what)
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise ConfigError(f"{what}: no module named {module!r}")


def resolve(path: str, *, what: str, callable_: bool = True):
    """Import ``module`` and return its attribute ``attr`` (one name), callable unless said
    otherwise. Every way this fails is a ``ConfigError`` of one line naming ``what`` and ``path``."""
    module_name, attr = split(path, what=what)
    try:
        value = importlib.import_module(module_name)
    except ImportError as err:
        raise ConfigError(f"{what}: cannot import {module_name!r} ({err})") from None
    except Exception as err:  # noqa: BLE001 - the user's module raised while importing: its error, one line
        reason = one_line(err)
        raise ConfigError(f"{what}: cannot import {module_name!r}, it fails while importing ({reason})") from None
    try:
        value = getattr(value, attr)
    except AttributeError:
        raise ConfigError(f"{what}: module {module_name!r} has no attribute {attr!r}") from None
    if callable_ and not callable(value):
        raise ConfigError(f"{what}: {path!r} is not callable")
    return value
