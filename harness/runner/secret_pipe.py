"""How the run's secrets (the storage and tracking URLs, which may carry passwords) reach a worker
process without lying in an environment a trial's program can read.

Any process of a user can read ``/proc/<pid>/environ`` and ``/proc/<pid>/cmdline`` of the user's
other processes, and a program trainer is one: its trial process, the worker and the runner are
its ancestors. Taking a variable out of ``os.environ`` keeps it from the children started after,
but not from ``/proc``, which shows the strings the process was started with. So:

- the runner hands each worker its secrets through a pipe the worker inherits (:func:`hand_over`,
  :func:`take_over`; ``HARNESS_WORKER_SECRETS_FD`` names the descriptor), never its environment;
- the runner and every worker (a scheduler's job too, which gets them in its environment) take
  the variables out of ``os.environ`` and blank the secrets in the strings ``/proc`` shows of their
  own environment and command line (:func:`conceal`), before any trial starts.

What the harness cannot reach is a process that held a secret before the harness started: the
shell that exported ``HARNESS_STORAGE`` (or ran ``harness run --storage URL``), a Slurm batch
script or Ray worker given it. README and docs/trainers.md say so.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterable, Mapping, MutableMapping

from harness.errors import HarnessError
from harness.ground.urls import redact_url

#: the variable naming the descriptor a worker reads its secrets from
SECRETS_FD_ENV = "HARNESS_WORKER_SECRETS_FD"
#: what one pipe holds before a write blocks (Linux's default capacity is 64 KiB)
PIPE_LIMIT = 60_000
#: the fields of /proc/<pid>/stat (counted after the command name) that bound the command line
#: (arg_start, arg_end) and the environment (env_start, env_end)
_ARGS, _ENV = (45, 46), (47, 48)


def hand_over(secrets: Mapping[str, str]) -> tuple[int, dict[str, str]]:
    """A pipe already holding ``secrets``: the descriptor its child reads (pass it with
    ``pass_fds``, then close it here) and the variable that names it to the child."""
    payload = json.dumps(dict(secrets)).encode("utf-8")
    if len(payload) > PIPE_LIMIT:
        raise HarnessError(f"the storage and tracking URLs take {len(payload)} bytes; at most {PIPE_LIMIT} travel")
    read, write = os.pipe()
    try:
        os.write(write, payload)
    finally:
        os.close(write)
    return read, {SECRETS_FD_ENV: str(read)}


def take_over(environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """The secrets the runner handed this process through its pipe, the pipe closed and its
    variable removed; empty when there was none (a scheduler's job, which gets its environment)."""
    named = environ.pop(SECRETS_FD_ENV, None)
    if named is None:
        return {}
    try:
        with os.fdopen(int(named), "rb") as pipe:
            secrets = json.loads(pipe.read().decode("utf-8"))
    except (OSError, ValueError) as err:
        raise HarnessError(
            f"cannot read the secrets the runner handed over ({SECRETS_FD_ENV}={named}): {err}"
        ) from None
    return {str(k): str(v) for k, v in secrets.items()}


def conceal(environ: MutableMapping[str, str], names: Iterable[str], values: Iterable[str | None] = ()) -> None:
    """Take the variables ``names`` out of ``environ`` (so no child inherits them), then blank in
    what ``/proc`` shows of this process their values in its environment and, in its command line,
    each of ``values`` that carries a password (``--storage URL``)."""
    names = list(names)
    for name in names:
        environ.pop(name, None)
    blank_in_proc(names, [v for v in values if v and redact_url(v) != v])


def _blanked_variables(memory: bytearray, names: list[str]) -> bool:
    """The values of ``NAME=value`` entries (NUL-separated) for ``names``, overwritten with ``*``."""
    prefixes = [f"{name}=".encode() for name in names]
    changed, at = False, 0
    while at < len(memory):
        end = memory.find(b"\0", at)
        end = len(memory) if end < 0 else end
        for prefix in prefixes:
            if memory.startswith(prefix, at) and end > at + len(prefix):
                memory[at + len(prefix) : end] = b"*" * (end - at - len(prefix))
                changed = True
        at = end + 1
    return changed


def _blanked_values(memory: bytearray, values: list[str]) -> bool:
    """Every occurrence of ``values`` overwritten with ``*``."""
    changed = False
    for value in values:
        needle = value.encode("utf-8")
        at = memory.find(needle)
        while at >= 0:
            memory[at : at + len(needle)] = b"*" * len(needle)
            changed = True
            at = memory.find(needle, at + len(needle))
    return changed


def blank_in_proc(names: list[str], values: list[str]) -> None:
    """Overwrite, in the memory ``/proc/self/environ`` and ``/proc/self/cmdline`` read (the strings
    this process was started with), the values of the variables ``names`` and every occurrence of
    ``values`` in the command line with ``*``. Call it once the variables are out of
    ``os.environ`` (the C library's environment points at these strings until then). Linux only,
    best effort: where ``/proc/self/mem`` cannot be written it changes nothing."""
    if not sys.platform.startswith("linux") or not (names or values):
        return
    try:
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        fd = os.open("/proc/self/mem", os.O_RDWR)
    except (OSError, IndexError):
        return
    regions = ((_ARGS, _blanked_values, values), (_ENV, _blanked_variables, names))
    try:
        for (first, last), blank, what in regions:
            try:
                start, end = int(fields[first]), int(fields[last])
                memory = bytearray(os.pread(fd, end - start, start))
            except (OSError, IndexError, ValueError):
                continue
            if blank(memory, what):
                with contextlib.suppress(OSError):
                    os.pwrite(fd, bytes(memory), start)
    finally:
        os.close(fd)
