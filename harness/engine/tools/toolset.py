"""Running a policy's tool calls: the tools of one task, behind a ``run`` that never raises.

Whatever the model writes (a broken call, an unknown tool, arguments off the schema) and whatever
the tool does (refuses, crashes, hangs, floods) becomes a short result text the next turn shows
the model, so a rollout never stops on a tool. A tool that is not bounded by construction (any
``module:function`` tool) runs in a worker process, killed at the call's time limit.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

from jsonschema.exceptions import best_match
from jsonschema.validators import validator_for

from harness.engine.tools.calls import ParsedCall
from harness.engine.tools.tool import Tool
from harness.engine.tools.tool_process import ToolProcess, run_tool

MAX_RESULT_CHARS = 500
_CUT = " ...[truncated]"


@dataclass(frozen=True)
class ToolOutcome:
    """What a call gave back: the tool's result, or ``"error: <one line>"`` with ``ok`` False."""

    text: str
    ok: bool


class ToolSet:
    """The tools one task offers, by name (``build_tools`` makes one from a config's names)."""

    def __init__(self, tools: Sequence[Tool], *, timeout_s: float) -> None:
        self._tools = {tool.name: tool for tool in tools}
        self._validators = {tool.name: validator_for(tool.parameters)(tool.parameters) for tool in tools}
        self._process = ToolProcess({tool.name: tool for tool in tools if not tool.bounded})
        self.timeout_s = timeout_s

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def schemas(self) -> list[dict]:
        """The tools in the function format a chat template's ``tools=`` argument takes."""
        return [tool.schema() for tool in self._tools.values()]

    def describe(self) -> str:
        """A prompt preamble for a model without a chat template: one JSON schema per line."""
        lines = (json.dumps(schema, ensure_ascii=False) for schema in self.schemas())
        return "<tools>\n" + "\n".join(lines) + "\n</tools>\n"

    def run(self, call: ParsedCall) -> ToolOutcome:
        """Run one call; never raises. A tool that is not ``bounded`` runs in the worker process,
        which is killed when the call runs past ``timeout_s``; an answer after the limit is an
        error, whichever process it came from."""
        if not call.valid:
            return _error(f"invalid tool call: {call.error}")
        tool = self._tools.get(call.name)
        if tool is None:
            return _error(f"unknown tool {call.name!r}; available: {', '.join(self._tools)}")
        try:
            problem = best_match(self._validators[tool.name].iter_errors(call.arguments))
        except Exception as err:  # noqa: BLE001 - a schema build_tools did not check (a ToolSet made by hand)
            return _error(f"cannot check the arguments of {tool.name!r}: {type(err).__name__}: {err}")
        if problem is not None:
            return _error(f"bad arguments for {tool.name!r} ({problem.json_path}): {problem.message}")
        return self._run(tool, call.arguments)

    def _run(self, tool: Tool, arguments: dict) -> ToolOutcome:
        started = time.monotonic()
        if tool.bounded:
            reply = run_tool(tool, arguments)
        else:
            reply = self._process.call(tool.name, arguments, self.timeout_s)
        if reply.kind == "late" or time.monotonic() - started > self.timeout_s:  # a late answer is never taken
            return _error(f"tool {tool.name!r} ran past its time limit of {self.timeout_s:g} s")
        if reply.kind == "refused":
            return _error(reply.text or f"tool {tool.name!r} refused the call")
        if reply.kind == "failed":
            return _error(f"tool {tool.name!r} failed: {reply.error.line()}")
        if reply.kind == "not_text":
            return _error(f"tool {tool.name!r} returned {reply.text}, not text")
        return ToolOutcome(_truncated(reply.text), ok=True)

    def close(self) -> None:
        """End the tools' worker process now, if one runs (it also ends with this process)."""
        self._process.close()


def _error(message: str) -> ToolOutcome:
    return ToolOutcome(_truncated("error: " + " ".join(message.split())), ok=False)


def _truncated(text: str) -> str:
    if len(text) <= MAX_RESULT_CHARS:
        return text
    return text[: MAX_RESULT_CHARS - len(_CUT)] + _CUT
