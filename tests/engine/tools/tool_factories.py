"""Tool factories the tests name by ``module:function`` path (``tool_factories:NAME``)."""

from __future__ import annotations

import os
import threading
import time

from harness.engine.tools import Tool, ToolError

NO_ARGUMENTS = {"type": "object", "properties": {}}
RELEASE = threading.Event()  # set by a test to let the stuck tool's thread end
NOT_CALLABLE = 3


def _tool(name: str, run, parameters: dict = NO_ARGUMENTS) -> Tool:
    return Tool(name=name, description=f"test tool {name}", parameters=parameters, run=run)


def stuck(task) -> Tool:
    return _tool("stuck", lambda arguments: "late" if RELEASE.wait(30) else "never")


def crashing(task) -> Tool:
    def run(arguments):
        raise RuntimeError("disk on fire\nsecond line")

    return _tool("crashing", run)


def refusing(task) -> Tool:
    def run(arguments):
        raise ToolError("not today")

    return _tool("refusing", run)


def exiting(task) -> Tool:
    def run(arguments):
        raise SystemExit(3)

    return _tool("exiting", run)


def verbose(task) -> Tool:
    return _tool("verbose", lambda arguments: "x" * 10_000)


def non_text(task) -> Tool:
    return _tool("non_text", lambda arguments: 42)


def echo(task) -> Tool:
    return _tool("echo", lambda arguments: repr(sorted(arguments.items())))


def fake_calculator(task) -> Tool:
    return _tool("calculator", lambda arguments: "0")


def not_a_tool(task):
    return {"name": "calculator"}


def bad_schema(task) -> Tool:
    return _tool("bad_schema", lambda arguments: "", parameters={"type": "objekt"})


def array_schema(task) -> Tool:
    return _tool("array_schema", lambda arguments: "", parameters={"type": "array"})


def bad_name(task) -> Tool:
    return _tool("my tool", lambda arguments: "")


def big_power(task) -> Tool:
    """A C operation that keeps the GIL for seconds: no thread can stop it, or even time it out."""
    return _tool("big_power", lambda arguments: str((7 ** (10**7)).bit_length()))


def dying(task) -> Tool:
    def run(arguments):
        os._exit(7)

    return _tool("dying", run)


def counter(task) -> Tool:
    """Counts its calls: its state lives from one call to the next, and from the fork anew."""
    calls = []

    def run(arguments):
        if arguments.get("wait"):
            time.sleep(30)
        calls.append(1)
        return str(len(calls))

    return _tool("counter", run, parameters={"type": "object", "properties": {"wait": {"type": "boolean"}}})
