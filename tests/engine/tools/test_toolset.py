"""ToolSet.run never raises: every way a call or a tool can go wrong is an error result."""

from __future__ import annotations

import json
import time

import pytest
import tool_factories
from slowness import slowness

from harness.engine.tasks.base import Task
from harness.engine.tools import (
    ParsedCall,
    Tool,
    ToolOutcome,
    ToolSet,
    build_tools,
    parse_calls,
    resolve_tool,
)
from harness.engine.tools.toolset import MAX_RESULT_CHARS

TASK = Task(name="lookup", train=(), eval=(), reward=lambda item, text: 0.0, table={"paris": "France"})


def _call(name: str, **arguments) -> ParsedCall:
    return ParsedCall(raw="", name=name, arguments=arguments, error=None)


def _tools(*names: str, timeout_s: float = 2.0):
    return build_tools(list(names), TASK, timeout_s=timeout_s)


def test_a_good_call():
    tools = _tools("calculator", "lookup")
    assert tools.run(_call("calculator", expression="256*37")) == ToolOutcome("9472", ok=True)
    assert tools.run(_call("lookup", key="paris")) == ToolOutcome("France", ok=True)


def test_a_parsed_turn_runs_end_to_end():
    [call] = parse_calls('<tool_call>{"name": "calculator", "arguments": {"expression": "1/4"}}</tool_call>')
    assert _tools("calculator").run(call) == ToolOutcome("0.25", ok=True)


@pytest.mark.parametrize(
    "call, expected",
    [
        (ParsedCall(raw="{", name=None, arguments=None, error="not valid JSON: x"), "invalid tool call: not valid"),
        (_call("search", query="x"), "unknown tool 'search'; available: calculator, lookup"),
        (_call("calculator"), "'expression' is a required property"),
        (_call("calculator", expression=5), "($.expression): 5 is not of type 'string'"),
        (_call("calculator", expression="1", extra=True), "Additional properties are not allowed"),
        (_call("calculator", expression="2**8"), "got '*' at position 2"),
        (_call("calculator", expression="1/0"), "error: division by zero"),
        (_call("lookup", key="rome"), "error: no entry for key 'rome'"),
    ],
)
def test_bad_calls_are_error_results(call, expected):
    outcome = _tools("calculator", "lookup").run(call)
    assert not outcome.ok
    assert outcome.text.startswith("error: ") and "\n" not in outcome.text
    assert expected in outcome.text


@pytest.mark.parametrize(
    "factory, expected",
    [
        ("crashing", "error: tool 'crashing' failed: RuntimeError: disk on fire second line"),
        ("refusing", "error: not today"),
        ("exiting", "error: tool 'exiting' failed: SystemExit: 3"),
        ("non_text", "error: tool 'non_text' returned int, not text"),
    ],
)
def test_failing_tools_are_error_results(factory, expected):
    tools = _tools(f"tool_factories:{factory}")
    assert tools.run(_call(factory)) == ToolOutcome(expected, ok=False)


def test_a_stuck_tool_is_abandoned_at_the_timeout():
    tools = _tools("tool_factories:stuck", timeout_s=0.2)
    started = time.monotonic()
    try:
        outcome = tools.run(_call("stuck"))
    finally:
        tool_factories.RELEASE.set()
    assert time.monotonic() - started < 2.0
    assert outcome == ToolOutcome("error: tool 'stuck' ran past its time limit of 0.2 s", ok=False)


def test_long_output_is_truncated():
    outcome = _tools("tool_factories:verbose").run(_call("verbose"))
    assert outcome.ok
    assert len(outcome.text) == MAX_RESULT_CHARS
    assert outcome.text.startswith("xxxx") and outcome.text.endswith("[truncated]")


def test_a_long_error_is_truncated_too():
    outcome = _tools("calculator").run(_call("x" * 2000))
    assert not outcome.ok and len(outcome.text) == MAX_RESULT_CHARS


def test_names_schemas_and_description():
    tools = _tools("calculator", "lookup")
    assert tools.names == ("calculator", "lookup")
    schemas = tools.schemas()
    assert [s["function"]["name"] for s in schemas] == ["calculator", "lookup"]
    assert all(s["type"] == "function" and s["function"]["parameters"]["type"] == "object" for s in schemas)
    text = tools.describe()
    assert text.startswith("<tools>\n") and text.endswith("\n</tools>\n")
    lines = text.splitlines()[1:-1]
    assert [json.loads(line) for line in lines] == schemas


def test_schemas_are_copies():
    tools = _tools("calculator")
    tools.schemas()[0]["function"]["parameters"]["required"].append("oops")
    assert tools.schemas()[0]["function"]["parameters"]["required"] == ["expression"]


def test_an_unchecked_schema_is_an_error_result_too():
    broken = Tool(name="broken", description="", parameters={"type": "objekt"}, run=lambda arguments: "")
    outcome = ToolSet([broken], timeout_s=1.0).run(_call("broken"))
    assert not outcome.ok and outcome.text.startswith("error: cannot check the arguments of 'broken'")


def test_a_c_operation_holding_the_gil_is_stopped_at_the_limit():
    """``7**(10**7)`` keeps the GIL for seconds: a thread's join could not return, and the late
    result was taken (ok after 8.2 s under a 0.5 s limit). The tool's process is killed instead."""
    tools = _tools("tool_factories:big_power", timeout_s=0.5)
    started = time.monotonic()
    outcome = tools.run(_call("big_power"))
    elapsed = time.monotonic() - started
    assert outcome == ToolOutcome("error: tool 'big_power' ran past its time limit of 0.5 s", ok=False)
    assert elapsed < 2.0, f"the time-out came after {elapsed:.1f} s"


def test_the_worker_is_replaced_after_a_time_out_or_a_crash():
    limit = float(round(slowness()))  # 1 s on an idle machine: a fresh process must answer within it
    tools = _tools("tool_factories:counter", "tool_factories:dying", timeout_s=limit)
    assert [tools.run(_call("counter")).text for _ in range(3)] == ["1", "2", "3"]  # one process, its state kept
    stuck = tools.run(_call("counter", wait=True))
    assert stuck.text == f"error: tool 'counter' ran past its time limit of {limit:g} s"
    assert tools.run(_call("counter")) == ToolOutcome("1", ok=True)  # a fresh process, from the state at the fork
    assert tools.run(_call("dying")) == ToolOutcome(
        "error: tool 'dying' failed: ProcessEnded: its process exited with code 7", ok=False
    )
    assert tools.run(_call("counter")) == ToolOutcome("1", ok=True)
    tools.close()


def test_a_bounded_tool_runs_here_and_its_late_answer_is_refused_too():
    import os

    here = Tool(
        name="here", description="", parameters={"type": "object"}, run=lambda a: str(os.getpid()), bounded=True
    )
    slow = Tool(
        name="slow",
        description="",
        parameters={"type": "object"},
        run=lambda a: time.sleep(0.3) or "done",
        bounded=True,
    )
    tools = ToolSet([here, slow], timeout_s=0.1)
    assert tools.run(_call("here")) == ToolOutcome(str(os.getpid()), ok=True)
    assert tools.run(_call("slow")) == ToolOutcome("error: tool 'slow' ran past its time limit of 0.1 s", ok=False)


def test_the_builtin_tools_are_bounded_and_a_path_is_not():
    names = ["calculator", "lookup", "tool_factories:echo"]
    assert [resolve_tool(name, TASK).bounded for name in names] == [True, True, False]
