"""The processes a process started, however they detached: found by parentage, ended together.

A process group does not hold everything a program starts: a child that calls ``setsid`` (Python's
``start_new_session=True``, a daemon) leaves the group and the session, and when its parent exits
it is reparented to init, out of reach of a ``killpg``. On Linux a process that is its
descendants' *subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``) gets those orphans instead of init, so
every process started under it stays its descendant in ``/proc`` until it ends, and
:func:`end_descendants` finds and ends them all. Elsewhere (no ``/proc``, no prctl) there is
nothing to find and the functions do nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from pathlib import Path

#: prctl option: orphaned descendants are reparented to this process instead of init
PR_SET_CHILD_SUBREAPER = 36
#: how long ending the descendants may take (each pass kills what it finds, then looks again)
END_WITHIN_S = 5.0
POLL_S = 0.01


def process_gone(pid: int) -> bool:
    """Whether process ``pid`` has exited (a zombie waiting to be reaped counts as exited)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in (b"Z", b"X")


def set_subreaper(on: bool = True) -> bool:
    """Make this process the subreaper of its descendants (or no longer, ``on=False``; Linux);
    whether that took effect."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _table() -> dict[int, tuple[int, bool]]:
    """Every visible process: pid -> (parent pid, whether it has exited and waits to be reaped)."""
    out = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        out[int(entry.name)] = (int(fields[1]), fields[0] in (b"Z", b"X"))
    return out


def _below(pid: int, table: dict[int, tuple[int, bool]]) -> dict[int, bool]:
    """The descendants of ``pid`` in ``table``: pid -> whether it has exited."""
    children: dict[int, list[int]] = {}
    for child, (parent, _) in table.items():
        children.setdefault(parent, []).append(child)
    found: dict[int, bool] = {}
    todo = list(children.get(pid, []))
    while todo:
        child = todo.pop()
        if child not in found:
            found[child] = table[child][1]
            todo.extend(children.get(child, []))
    return found


def descendants(pid: int | None = None) -> set[int]:
    """The running descendants of ``pid`` (this process by default)."""
    return {child for child, exited in _below(os.getpid() if pid is None else pid, _table()).items() if not exited}


def end_descendants(keep: set[int] = frozenset()) -> set[int]:
    """SIGKILL every descendant of this process but those in ``keep`` (and theirs), pass after
    pass until none runs (one that was mid-fork, or an orphan reparented here, is found by the
    next pass), reaping those that end up this process's children, and waits (a few seconds at
    most) until each has exited, wherever it was reparented; the pids ended."""
    me = os.getpid()
    ended: set[int] = set()
    deadline = time.monotonic() + END_WITHIN_S
    while True:
        table = _table()
        spared = {pid for k in keep for pid in (k, *_below(k, table))}
        found = {pid: exited for pid, exited in _below(me, table).items() if pid not in spared}
        running = [pid for pid, exited in found.items() if not exited]
        for pid in running:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        ended.update(found)
        for pid in found:  # this process's children among them: reaped once they have exited
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        if not found or time.monotonic() > deadline:
            break
        time.sleep(POLL_S)
    while not all(process_gone(pid) for pid in ended) and time.monotonic() < deadline:
        time.sleep(POLL_S)  # one reparented to another subreaper (or init) dies a moment after the kill
    return ended
