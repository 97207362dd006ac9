"""Run a server as the leader of its own process group, and end everything it started.

``mlflow ui`` starts uvicorn, its workers and a job runner with huey consumers; ending only the
process we started leaves the rest running, bound to the port. ``run_owning_group`` starts the
command in a new session (so it and its children form a process group of their own, which a
terminal's Ctrl-C or hang-up does not reach directly), and whether the command exits, this
process gets SIGTERM, SIGINT or SIGHUP, or anything else ends the wait, it ends the whole group:
SIGTERM, then SIGKILL for what is still alive after a grace period. Descendants that moved to a
session of their own (MLflow starts job subprocesses that way) are found through ``/proc`` before
anything is signalled, since once their parent is gone nothing links them to the group.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

#: Seconds between SIGTERM and SIGKILL.
GRACE_S = 5.0
#: Seconds to wait, after SIGKILL, for the processes to be gone.
KILL_WAIT_S = 2.0
#: The signals that stop the server.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

_PROC = Path("/proc")


class _Stop(Exception):
    """Raised by the signal handler to end the wait for the server."""


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, process group) of a process from ``/proc`` (state Z: a zombie, which
    has ended); None if there is no such process."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the command name may hold spaces and ')'
    return fields[0], int(fields[1]), int(fields[2])


def _processes() -> dict[int, tuple[str, int, int]]:
    found = {}
    for entry in _PROC.iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            found[int(entry.name)] = stat
    return found


def group_and_descendants(leader: int) -> set[int]:
    """Live processes in ``leader``'s process group or descended from one of them (zombies
    count as gone); empty where there is no ``/proc``."""
    if not _PROC.is_dir():
        return set()
    table = _processes()
    found = {pid for pid, (_, _, pgid) in table.items() if pgid == leader}
    while children := {pid for pid, (_, ppid, _) in table.items() if ppid in found} - found:
        found |= children
    return {pid for pid in found if table[pid][0] != "Z"}


def _any_left(leader: int, targets: set[int]) -> bool:
    if not _PROC.is_dir():
        try:
            os.killpg(leader, 0)
        except ProcessLookupError:
            return False
        return True
    return any((stat := _stat(pid)) is not None and stat[0] != "Z" for pid in targets) or bool(
        group_and_descendants(leader)
    )


def _signal(leader: int, pids: set[int], signum: int) -> None:
    """``signum`` to the group, and to each of ``pids`` (those that left it)."""
    try:
        os.killpg(leader, signum)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in sorted(pids):
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def stop_group(proc: subprocess.Popen, grace_s: float = GRACE_S) -> None:
    """End ``proc``'s process group and every descendant of it: SIGTERM, then SIGKILL after
    ``grace_s`` for whatever is still alive. ``proc`` must lead its group (``start_new_session``)."""
    targets = group_and_descendants(proc.pid)  # before anything dies and orphans re-parent
    _signal(proc.pid, targets, signal.SIGTERM)
    if _wait_gone(proc, targets, grace_s):
        return
    _signal(proc.pid, targets | group_and_descendants(proc.pid), signal.SIGKILL)
    _wait_gone(proc, targets, KILL_WAIT_S)  # SIGKILL cannot be caught, but dying takes a moment


def _wait_gone(proc: subprocess.Popen, targets: set[int], timeout_s: float) -> bool:
    """Whether ``proc``, its group and ``targets`` are all gone within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None or _any_left(proc.pid, targets):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def run_owning_group(command: Sequence[str], env: Mapping[str, str], grace_s: float = GRACE_S) -> int:
    """Run ``command`` in a process group of its own until it exits or this process gets one of
    ``STOP_SIGNALS``, then end the whole group. The command's exit code, or 0 when stopped."""

    def stop(signum, _frame):
        raise _Stop(signum)

    previous = {signum: signal.signal(signum, stop) for signum in STOP_SIGNALS}
    proc = None
    try:
        proc = subprocess.Popen(list(command), env=dict(env), start_new_session=True)
        return proc.wait()
    except _Stop:
        return 0
    finally:
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)  # already stopping: a second Ctrl-C waits for it
        if proc is not None:
            stop_group(proc, grace_s)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
