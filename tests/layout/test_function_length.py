"""No function in ``harness`` runs over ``MAX_LINES`` lines (from its ``def`` to its last line): a
longer one is split into steps whose names say what each does.

``STILL_LONG`` names the functions that are over the limit today while they are being split; it
only shrinks. An entry that is no longer over the limit (or no longer exists) fails the test too,
so whoever splits a function also takes it off the list.
"""

from __future__ import annotations

import ast
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[2] / "harness"
MAX_LINES = 80

#: "path under harness/:qualified name" -> why it is still long (being split elsewhere)
STILL_LONG: dict[str, str] = {}


def function_lengths(root: Path = HARNESS) -> dict[str, int]:
    """Every function and method under ``root``, as ``"path:Outer.name"``, with its line count."""
    lengths: dict[str, int] = {}

    def visit(node: ast.AST, where: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    lengths[f"{where}:{name}"] = child.end_lineno - child.lineno + 1
                visit(child, where, f"{name}.")
            else:
                visit(child, where, prefix)

    for path in sorted(root.rglob("*.py")):
        visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), path.relative_to(root).as_posix(), "")
    return lengths


def test_no_function_is_over_the_limit_unless_listed():
    long = {name: n for name, n in function_lengths().items() if n > MAX_LINES}
    unlisted = {name: n for name, n in long.items() if name not in STILL_LONG}
    assert not unlisted, f"over {MAX_LINES} lines: {unlisted}; split it into named steps"


def test_the_list_only_names_functions_still_over_the_limit():
    lengths = function_lengths()
    done = [name for name in STILL_LONG if lengths.get(name, 0) <= MAX_LINES]
    assert not done, f"{done}: no longer over {MAX_LINES} lines (or gone); take it off STILL_LONG"


def test_lengths_are_counted_from_def_to_the_last_line(tmp_path):
    """The counter on a hand-made module: decorators aside, a method qualified by its class,
    a nested function counted on its own and inside its parent."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(
        "import functools\n"  # 1
        "\n"  # 2
        "@functools.cache\n"  # 3
        "def top():\n"  # 4
        "    def inner():\n"  # 5
        "        return 1\n"  # 6
        "    return inner()\n"  # 7
        "\n"  # 8
        "class Box:\n"  # 9
        "    async def open(self):\n"  # 10
        "        return 2\n"  # 11
    )
    assert function_lengths(tmp_path) == {"pkg/m.py:top": 4, "pkg/m.py:top.inner": 2, "pkg/m.py:Box.open": 2}
