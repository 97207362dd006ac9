"""Running a policy's tool calls: the tools of one task, behind a ``run`` that never raises.

Whatever the model writes (a broken call, an unknown tool, arguments off the schema) and whatever
the tool does (refuses, crashes, hangs, floods) becomes a short result text the next turn shows
the model, so a rollout never stops on a tool.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from jsonschema.exceptions import best_match
from jsonschema.validators import validator_for

from harness.engine.tools.calls import ParsedCall
from harness.engine.tools.tool import Tool, ToolError

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
        """Run one call; never raises. A tool running past ``timeout_s`` is abandoned: its
        daemon thread is never joined again and ends (or not) on its own."""
        if not call.valid:
            return _error(f"invalid tool call: {call.error}")
        tool = self._tools.get(call.name)
        if tool is None:
            return _error(f"unknown tool {call.name!r}; available: {', '.join(self._tools)}")
        try:
            problem = best_match(self._validators[tool.name].iter_errors(call.arguments))
        except Exception as err:  # a schema build_tools did not check (a ToolSet made by hand)
            return _error(f"cannot check the arguments of {tool.name!r}: {type(err).__name__}: {err}")
        if problem is not None:
            return _error(f"bad arguments for {tool.name!r} ({problem.json_path}): {problem.message}")
        return self._run(tool, call.arguments)

    def _run(self, tool: Tool, arguments: dict) -> ToolOutcome:
        done: dict = {}

        def target() -> None:
            try:
                done["result"] = tool.run(arguments)
            except BaseException as err:  # a tool's own thread: even SystemExit is only its failure
                done["error"] = err

        thread = threading.Thread(target=target, name=f"tool-{tool.name}", daemon=True)
        thread.start()
        thread.join(self.timeout_s)
        if thread.is_alive():
            return _error(f"tool {tool.name!r} ran past its time limit of {self.timeout_s:g} s")
        if "error" in done:
            err = done["error"]
            if isinstance(err, ToolError):
                return _error(str(err) or f"tool {tool.name!r} refused the call")
            return _error(f"tool {tool.name!r} failed: {type(err).__name__}: {err}")
        result = done.get("result")
        if not isinstance(result, str):
            return _error(f"tool {tool.name!r} returned {type(result).__name__}, not text")
        return ToolOutcome(_truncated(result), ok=True)


def _error(message: str) -> ToolOutcome:
    return ToolOutcome(_truncated("error: " + " ".join(message.split())), ok=False)


def _truncated(text: str) -> str:
    if len(text) <= MAX_RESULT_CHARS:
        return text
    return text[: MAX_RESULT_CHARS - len(_CUT)] + _CUT
