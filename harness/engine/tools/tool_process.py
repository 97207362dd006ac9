"""A worker process for the tools that are not bounded by construction: their time limit holds.

A thread cannot enforce a time limit: ``thread.join(timeout)`` waits for the GIL, which a C
operation keeps for as long as it runs (``7**(10**7)`` under a 0.5 s limit came back after 8 s,
and its late result was taken). So such tools run in a process of their own, forked at the first
call (a fork takes the tools as built, closures and all; nothing is pickled but the arguments and
the result text), serving one call at a time over a pipe. A call that is not answered by its
deadline gets the process killed; the next call forks a fresh one. A tool keeps its state from one
call to the next within a process, as in the rollout's own process, but the rollout does not see
it change, and a restart starts it again from the state at the fork.

A round trip costs about 0.1 ms; a fork (at the first call, and after each time-out or crash) a
few milliseconds. The process shares the rollout's memory copy on write, and ends with it: it
reads end-of-file once the rollout's process is gone, and is killed with it when it exits.
"""

from __future__ import annotations

import multiprocessing
import signal
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Literal

from harness.engine.tools.tool import Tool, ToolError
from harness.errors import ErrorRecord

_FORK = multiprocessing.get_context("fork")


@dataclass(frozen=True)
class Reply:
    """What became of one call: ``result`` (the tool's text), ``refused`` (its ``ToolError``),
    ``failed`` (any other exception, or its process ending), ``not_text`` (it returned something
    else; ``text`` holds the type's name) or ``late`` (no answer by the deadline)."""

    kind: Literal["result", "refused", "failed", "not_text", "late"]
    text: str = ""
    error: ErrorRecord | None = None


class ToolProcess:
    """Runs calls of ``tools`` in a forked process, each within its time limit."""

    def __init__(self, tools: Mapping[str, Tool]) -> None:
        self._tools = dict(tools)
        self._process = None
        self._conn: Connection | None = None
        self._finalizer = None

    def call(self, name: str, arguments: dict, timeout_s: float) -> Reply:
        """The reply of tool ``name`` to ``arguments``, or ``late`` when none came within
        ``timeout_s`` (the process is then killed: the call cannot run on, nor answer later)."""
        if self._process is None or not self._process.is_alive():
            self._start()
        try:
            self._conn.send((name, arguments))
            if not self._conn.poll(timeout_s):
                self.close()
                return Reply("late")
            return self._conn.recv()
        except (EOFError, OSError):  # the process ended: os._exit, a signal, the OOM killer
            self._process.join(timeout=1.0)
            ended = _ended(self._process.exitcode)
            self.close()
            return Reply("failed", error=ErrorRecord("ProcessEnded", ended))

    def close(self) -> None:
        """Kill the process, if one runs (the next call starts another)."""
        if self._finalizer is not None:
            self._finalizer()
        self._process = self._conn = self._finalizer = None

    def _start(self) -> None:
        self.close()
        ours, theirs = _FORK.Pipe()
        process = _FORK.Process(target=_serve, args=(theirs, ours, self._tools), name="harness-tools", daemon=True)
        process.start()
        theirs.close()
        self._process, self._conn = process, ours
        self._finalizer = weakref.finalize(self, _kill, process, ours)


def _ended(code: int | None) -> str:
    if code is None:
        return "its process ended"
    if code < 0:
        try:
            return f"its process was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"its process was killed by signal {-code}"
    return f"its process exited with code {code}"


def _kill(process, conn: Connection) -> None:
    conn.close()
    if process.is_alive():
        process.kill()
    process.join()


def _serve(conn: Connection, parents_end: Connection, tools: Mapping[str, Tool]) -> None:
    """The worker's loop: one call at a time, until the rollout's end of the pipe closes."""
    parents_end.close()  # else the pipe would stay open after the rollout's process is gone
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is for the rollout, which ends this process
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the rollout's handler
    while True:
        try:
            name, arguments = conn.recv()
        except (EOFError, OSError):
            return
        conn.send(run_tool(tools[name], arguments))


def run_tool(tool: Tool, arguments: dict) -> Reply:
    """Call ``tool`` here and now, whatever it does: its reply, never an exception."""
    try:
        result = tool.run(arguments)
    except ToolError as err:
        return Reply("refused", str(err))
    except BaseException as err:  # noqa: BLE001 - even SystemExit is only the tool's failure
        return Reply("failed", error=ErrorRecord.of(err))
    if not isinstance(result, str):
        return Reply("not_text", type(result).__name__)
    return Reply("result", result)
