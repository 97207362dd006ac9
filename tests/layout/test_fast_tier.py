"""The fast tier (``pytest -m "not slow"``) reaches every module of ``harness``.

Read from the source, without running anything: a test file with at least one test not marked
slow reaches a module when it

- imports it (``import harness.a.b``, ``from harness.a import b``), or imports a name from a
  package that re-exports it from the module (``from harness.stats import decide`` reaches
  ``harness.stats.verdict``), also by attribute (``stats.decide`` after ``from harness import stats``);
- runs the CLI (it imports ``harness.cli``, or runs ``run_main`` or ``HARNESS``) and names a
  command the module registers (``"judge"`` reaches ``harness.cli.judge_cmds``);
- names it in a string (``python -m harness.x``, a ``module:function`` entry point);

and then whatever a reached module imports (at its top or inside a function) or names as an
entry point in a string, and the packages above each. This says every module is loaded by a fast
test, not that each line runs (a line-coverage tool would say that; none is a dependency).
A module only the slow tests reach (or none) fails here, named: give it a fast test.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "harness"
TESTS = ROOT / "tests"
CLI_RUNNERS = {"run_main", "HARNESS"}  # tests/cli_main.py's in-process entry; the fault tests' command line


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in HARNESS.rglob("*.py")}


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _absolute(module: str, node: ast.ImportFrom) -> str | None:
    """The module an ``ImportFrom`` in ``module`` names (relative imports resolved)."""
    if node.level == 0:
        return node.module
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


@cache
def _exports(package: str) -> dict[str, str]:
    """name -> the harness module a package's ``__init__`` takes it from."""
    found: dict[str, str] = {}
    for node in _tree(MODULES[package]).body:
        if isinstance(node, ast.ImportFrom):
            source = _absolute(package, node)
            for alias in node.names:
                if source and source.startswith("harness"):
                    found[alias.asname or alias.name] = source
    return found


def reached_by_name(module: str, name: str, depth: int = 0) -> set[str]:
    """The modules ``module.name`` reaches: the submodule of that name, or the module a package
    re-exports the name from (followed through further re-exports)."""
    if module not in MODULES:
        return set()
    if f"{module}.{name}" in MODULES:
        return {f"{module}.{name}"}
    source = _exports(module).get(name) if MODULES[module].name == "__init__.py" else None
    if source is None or depth > 5:
        return {module}
    return {module} | reached_by_name(source, name, depth + 1)


@cache
def cli_commands() -> dict[str, str]:
    """command name -> the harness.cli module that registers it (``@app.command("name")`` or a
    function named for it)."""
    commands: dict[str, str] = {}
    for name, path in MODULES.items():
        if not name.startswith("harness.cli."):
            continue
        for node in ast.walk(_tree(path)):
            if not isinstance(node, ast.FunctionDef):
                continue
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute) and deco.func.attr == "command":
                    args = [a.value for a in deco.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                    commands[args[0] if args else node.name.replace("_", "-")] = name
    return commands


def is_fast(tree: ast.Module) -> bool:
    """The file has a test that ``-m "not slow"`` runs (no module-wide slow mark, not every test marked)."""

    def slow(node: ast.AST) -> bool:
        return "mark.slow" in ast.unparse(node)

    assigned = [n for n in tree.body if isinstance(n, ast.Assign)]
    marks = [n.value for n in assigned if getattr(n.targets[0], "id", "") == "pytestmark"]
    if any(slow(mark) for mark in marks):
        return False
    tests = [
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test")
    ]
    return any(not any(slow(d) for d in t.decorator_list) for t in tests)


def reached(tree: ast.Module, module: str | None = None) -> set[str]:
    """The harness modules a test file (or the harness module ``module``) reaches (see the
    module's docstring; the CLI's commands count in test files)."""
    found: set[str] = set()
    aliases: dict[str, str] = {}  # local name -> the harness module or package it is bound to
    runs_cli = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("harness"):
                    found.add(alias.name)
                    if alias.asname:
                        aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and (node.level == 0 or module is not None):
            source = _absolute(module, node) if node.level else node.module
            if not (source or "").startswith("harness"):
                continue
            for alias in node.names:
                found |= reached_by_name(source, alias.name)
                if f"{source}.{alias.name}" in MODULES:
                    aliases[alias.asname or alias.name] = f"{source}.{alias.name}"
            runs_cli |= module is None and source.startswith("harness.cli")
        elif isinstance(node, ast.Name) and node.id in CLI_RUNNERS:
            runs_cli = module is None
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            found |= reached_by_name(aliases[node.value.id], node.attr)
    commands = cli_commands() if runs_cli else {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in commands:
                found.add(commands[node.value])
            found.add(node.value.partition(":")[0])  # a module named in a string (kept below if it is one)
    packages = {name.rsplit(".", depth)[0] for name in found for depth in range(1, name.count(".") + 1)}
    return (found | packages) & MODULES.keys()  # importing a module runs its packages' __init__


def fast_tier_reaches() -> set[str]:
    """Every harness module the fast tests reach, directly or through the modules they reach."""
    todo = [name for path in TESTS.rglob("test_*.py") if is_fast(_tree(path)) for name in reached(_tree(path))]
    found: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo.extend(reached(_tree(MODULES[name]), name) - found)  # harness's own imports, the same way
    return found


def test_every_harness_module_is_reached_by_a_fast_test():
    missing = sorted(MODULES.keys() - fast_tier_reaches())
    assert not missing, "modules no fast test reaches (give each a test not marked slow):\n" + "\n".join(missing)


@pytest.mark.parametrize(
    ("source", "fast"),
    [
        ("def test_a(): pass", True),
        ("import pytest\n@pytest.mark.slow\ndef test_a(): pass", False),
        ("import pytest\n@pytest.mark.slow\ndef test_a(): pass\ndef test_b(): pass", True),
        ("import pytest\npytestmark = pytest.mark.slow\ndef test_a(): pass", False),
        ("import pytest\npytestmark = [pytest.mark.slow]\ndef test_a(): pass", False),
    ],
)
def test_a_file_is_fast_when_a_test_of_it_is_not_marked_slow(source, fast):
    assert is_fast(ast.parse(source)) is fast


def test_re_exports_attributes_and_commands_are_followed():
    assert cli_commands()["report"] == "harness.cli.report_cmds"
    source = (
        "from harness import stats\nfrom harness.stats import decide\nfrom cli_main import run_main\n"
        "def test_a(): stats.noise_floor; run_main(None, None, 'report')"
    )
    found = reached(ast.parse(source))
    assert {"harness.stats", "harness.stats.verdict", "harness.stats.noise", "harness.cli.report_cmds"} <= found
    assert "harness.stats.power" not in found
    assert "harness.cli.report_cmds" not in reached(ast.parse("def test_a(): 'report'"))  # no CLI run: a plain word
