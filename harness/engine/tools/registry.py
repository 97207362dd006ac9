"""Tools, chosen by registered name or by an explicit ``module:function`` factory path.

A tool is made per task by a factory ``factory(task) -> Tool`` (a lookup tool reads the task's
table). Strings from a config are never evaluated: a path is imported (``harness.ground.dotted``). Every tool
is checked when it is built (its name, its JSON schema), so a bad one fails the config, not a
rollout.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for

from harness.algorithms.registry import Registry
from harness.engine.tools.tool import Tool, ToolError
from harness.engine.tools.toolset import ToolSet
from harness.errors import ConfigError
from harness.ground.dotted import resolve

if TYPE_CHECKING:
    from harness.engine.tasks.base import Task

__all__ = ["TOOLS", "Tool", "ToolError", "build_tools", "resolve_tool"]

TOOLS = Registry("tool")
TOOLS.declare("calculator", "harness.engine.tools.calculator:calculator_tool")
TOOLS.declare("lookup", "harness.engine.tools.lookup:lookup_tool")

_NAME = re.compile(r"[A-Za-z0-9_-]+")


def build_tools(names: list[str], task: Task, *, timeout_s: float) -> ToolSet:
    """The tools ``names`` (``task.tools``) for ``task``, each listed once."""
    if not names:
        raise ConfigError("task.tools is empty: a tool-calling task needs a tool, e.g. task.tools: [calculator]")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(f"task.tools lists {', '.join(map(repr, repeated))} more than once; list each tool once")
    tools = [resolve_tool(name, task) for name in names]
    source: dict[str, str] = {}
    for name, tool in zip(names, tools):
        if tool.name in source:
            raise ConfigError(
                f"task.tools {source[tool.name]!r} and {name!r} both make a tool named {tool.name!r}; keep one"
            )
        source[tool.name] = name
    return ToolSet(tools, timeout_s=timeout_s)


def resolve_tool(name: str, task: Task) -> Tool:
    """The tool a registered name or a ``module:function`` factory makes for ``task``, checked."""
    tool = _factory(name)(task)
    if not isinstance(tool, Tool):
        raise ConfigError(f"task.tools {name!r}: the factory returned {type(tool).__name__}, not a Tool")
    _check(name, tool)
    return tool


def _factory(name: str) -> Callable:
    if ":" not in name:
        if name not in TOOLS:
            valid = ", ".join(sorted(TOOLS.names()))
            raise ConfigError(f"task.tools: unknown tool {name!r}; valid: {valid}, or a 'module:function' factory")
        return TOOLS.get(name)
    return resolve(name, what=f"task.tools {name!r}")


def _check(name: str, tool: Tool) -> None:
    prefix = f"task.tools {name!r}: tool {tool.name!r}"
    if not isinstance(tool.name, str) or not _NAME.fullmatch(tool.name):
        raise ConfigError(f"{prefix}: a tool name must be letters, digits, '_' or '-'")
    if not callable(tool.run):
        raise ConfigError(f"{prefix}: run is not callable")
    schema = tool.parameters
    if not isinstance(schema, dict):
        raise ConfigError(f"{prefix}: parameters must be a JSON schema object, not {type(schema).__name__}")
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as err:
        reason = err.message.splitlines()[0]
        raise ConfigError(f"{prefix}: parameters is not a valid JSON schema: {reason}") from err
    if schema.get("type") != "object":
        raise ConfigError(f'{prefix}: parameters must describe an object, with "type": "object"')
