"""Resolving and building tools: registered names, ``module:function`` factories, and one-line
config errors for everything that would otherwise fail mid-rollout."""

from __future__ import annotations

import pytest

from harness.engine.tasks.base import Task
from harness.engine.tools import TOOLS, Tool, build_tools, resolve_tool
from harness.errors import ConfigError

TABLE_TASK = Task(name="lookup", train=(), eval=(), reward=lambda item, text: 0.0, table={"k": "v"})
PLAIN_TASK = Task(name="addition", train=(), eval=(), reward=lambda item, text: 0.0)


def _config_error(name: str, task: Task = TABLE_TASK) -> str:
    with pytest.raises(ConfigError) as raised:
        resolve_tool(name, task)
    message = str(raised.value)
    assert "\n" not in message
    return message


def test_registered_tools():
    assert set(TOOLS.names()) == {"calculator", "lookup"}
    calculator = resolve_tool("calculator", PLAIN_TASK)
    assert isinstance(calculator, Tool) and calculator.run({"expression": "2+2"}) == "4"
    assert resolve_tool("lookup", TABLE_TASK).run({"key": "k"}) == "v"


def test_a_factory_by_path():
    tool = resolve_tool("tool_factories:echo", TABLE_TASK)
    assert tool.name == "echo" and tool.run({"a": 1}) == "[('a', 1)]"


def test_unknown_name_lists_the_valid_ones():
    message = _config_error("calculater")
    assert "unknown tool 'calculater'" in message and "calculator, lookup" in message
    assert "module:function" in message


def test_lookup_needs_a_table():
    message = _config_error("lookup", PLAIN_TASK)
    assert "tool lookup needs a task with a table" in message and "task.name: lookup" in message


@pytest.mark.parametrize(
    "name, expected",
    [
        ("no_such_module_for_tools:factory", "cannot import 'no_such_module_for_tools'"),
        ("tool_factories:missing", "module 'tool_factories' has no attribute 'missing'"),
        ("tool_factories:NOT_CALLABLE", "'tool_factories:NOT_CALLABLE' is not callable"),
        ("tool_factories:not_a_tool", "the factory returned dict, not a Tool"),
        ("tool_factories:bad_schema", "'bad_schema': parameters is not a valid JSON schema: 'objekt' is not valid"),
        ("tool_factories:array_schema", "tool 'array_schema': parameters must describe an object"),
        ("tool_factories:bad_name", "tool 'my tool': a tool name must be letters, digits"),
    ],
)
def test_bad_factories(name, expected):
    message = _config_error(name)
    assert message.startswith(f"task.tools {name!r}")
    assert expected in message


def test_build_tools():
    tools = build_tools(["calculator", "tool_factories:echo"], TABLE_TASK, timeout_s=1.5)
    assert tools.names == ("calculator", "echo")
    assert tools.timeout_s == 1.5


@pytest.mark.parametrize(
    "names, expected",
    [
        ([], "task.tools is empty"),
        (["calculator", "lookup", "calculator"], "task.tools lists 'calculator' more than once"),
        (["calculator", "tool_factories:fake_calculator"], "both make a tool named 'calculator'"),
    ],
)
def test_build_tools_refuses(names, expected):
    with pytest.raises(ConfigError, match=expected):
        build_tools(names, TABLE_TASK, timeout_s=1.0)
