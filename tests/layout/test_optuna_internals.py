"""Optuna's storage internals are touched in one module only: ``harness.store.optuna_tables``.

That adapter declares the tables, columns and private attributes it relies on and checks them
when a queue is opened; a statement or a private attribute anywhere else would escape that check.
The rule: no other module of ``harness`` imports a private Optuna module (``optuna.storages._rdb``
and the like), names one in a string, or reads one of Optuna's private attributes.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[2] / "harness"
ADAPTER = HARNESS / "store" / "optuna_tables.py"

#: Optuna's private attributes (on studies, trials, storages and their models) the adapter uses
PRIVATE_ATTRIBUTES = {"_rdb", "_models", "_study_id", "_trial_id", "_storage", "_backend", "_cached_storage"}


def _private_optuna_module(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "optuna" and any(p.startswith("_") for p in parts[1:])


def internals_used(source: str) -> list[str]:
    """Where ``source`` touches Optuna's internals: ``line: what``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if _private_optuna_module(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names]
            found += [
                f"{node.lineno}: from {node.module} import {n.rsplit('.', 1)[1]}"
                for n in names
                if _private_optuna_module(n)
            ]
        elif isinstance(node, ast.Attribute) and node.attr in PRIVATE_ATTRIBUTES:
            found.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):  # noqa: SIM102 - one case a branch
            if node.value in PRIVATE_ATTRIBUTES or re.search(r"\boptuna(\.\w+)*\._\w+", node.value):
                found.append(f"{node.lineno}: {node.value!r}")
    return found


def test_only_the_adapter_touches_optunas_internals():
    offenders = [
        f"{path.relative_to(HARNESS.parent)}:{where}"
        for path in sorted(HARNESS.rglob("*.py"))
        if path != ADAPTER
        for where in internals_used(path.read_text(encoding="utf-8"))
    ]
    assert offenders == [], "use harness.store.optuna_tables instead"


def test_the_rule_catches_each_way_in():
    planted = """
import optuna.storages._rdb.models
from optuna.storages._rdb import models
from optuna.storages import _CachedStorage
study_id = study._study_id
row = getattr(trial, "_trial_id")
models = importlib.import_module("optuna.storages._rdb.models")
"""
    assert [line.split(":")[0] for line in internals_used(planted)] == ["2", "3", "4", "5", "6", "7"]
    assert internals_used("import optuna\nfrom optuna.storages import RDBStorage\nstudy.user_attrs\n") == []


def test_the_adapter_is_where_they_are():
    """The rule guards something: the adapter does use what it forbids elsewhere."""
    used = " ".join(internals_used(ADAPTER.read_text(encoding="utf-8")))
    assert all(name in used for name in ("_study_id", "_trial_id", "_storage", "_backend", "optuna.storages._rdb"))


def test_pyproject_pins_the_optuna_the_layout_was_tested_on():
    from harness.store.optuna_tables import TESTED_OPTUNA

    project = tomllib.loads((HARNESS.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert f"optuna{TESTED_OPTUNA}" in [d.replace(" ", "") for d in project["dependencies"]]
