"""What a reasoning-gym config costs, measured on a few of its problems before all are made.

A dataset's settings are its own (``max_terms``, ``max_digits``, ``grid_size``, ...), so no list
of bounds per key can cover them; instead the first problems are made in a forked child process
under a memory limit and a deadline, and what they took is scaled to the prompts asked for. Settings
whose one problem does not fit (``max_terms: 1e8, max_digits: 1e6``) are refused in one line
within seconds, instead of exhausting the machine's memory in ``harness validate``; the child is
killed, the caller's process never holds the problem.

The sample's cost is CPU time (``time.process_time``), not wall time, so a busy machine does not
change the verdict; only the deadline for one problem, far above what any usable setting needs,
is wall time. Where ``os.fork`` is missing (not POSIX) the sample is made in the caller's process
without the limits.
"""

from __future__ import annotations

import json
import os
import select
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass

from harness.errors import ConfigError

#: memory a sample of problems may take beyond what the process held when it forked
SAMPLE_MEMORY_BYTES = 1 << 30
#: wall seconds the sample may take before the child is killed and the settings refused
SAMPLE_DEADLINE_S = 20.0
#: the sample: this many problems, or fewer once they took SAMPLE_CPU_S of CPU time
SAMPLE_PROBLEMS = 16
SAMPLE_CPU_S = 0.5
#: the text of all the prompts asked for, estimated from the sample, may be at most this
TEXT_BUDGET_BYTES = 1 << 30
#: the CPU time to make all the prompts asked for, estimated from the sample, may be at most this
CPU_BUDGET_S = 600.0


@dataclass(frozen=True)
class Sample:
    """The first ``problems`` problems of a dataset: their text in bytes and the CPU seconds they took."""

    problems: int
    text_bytes: int
    cpu_s: float


def check_budget(dataset: Sequence[dict], wanted: int, where: str) -> None:
    """Refuse (one-line ``ConfigError`` naming ``where``) settings whose problems cannot all be made
    within the memory and time budgets: a first problem over the sample's memory or deadline, or
    ``wanted`` problems estimated over :data:`TEXT_BUDGET_BYTES` or :data:`CPU_BUDGET_S`.

    A sample that fails otherwise (the dataset raises) passes: making the problems in the caller
    raises the same error, reported as before."""
    problems = min(wanted, SAMPLE_PROBLEMS)
    sample = _sample_in_child(dataset, problems, where) if hasattr(os, "fork") else _sample(dataset, problems)
    if sample is None or sample.problems == 0:
        return
    text = sample.text_bytes / sample.problems * wanted
    cpu = sample.cpu_s / sample.problems * wanted
    if text > TEXT_BUDGET_BYTES:
        raise ConfigError(
            f"{where}: {wanted:,} prompts of these settings would hold about {text / 2**20:,.0f} MiB of text "
            f"(at most {TEXT_BUDGET_BYTES / 2**20:,.0f} MiB; measured on {sample.problems}); "
            "lower the sizes in task.reasoning_gym.config or task.n_train/n_eval"
        )
    if cpu > CPU_BUDGET_S:
        raise ConfigError(
            f"{where}: {wanted:,} prompts of these settings would take about {cpu:,.0f} s of CPU to make "
            f"(at most {CPU_BUDGET_S:,.0f} s; measured on {sample.problems}); "
            "lower the sizes in task.reasoning_gym.config or task.n_train/n_eval"
        )


def _sample(dataset: Sequence[dict], problems: int) -> Sample:
    """Make the first ``problems`` problems (fewer once they took SAMPLE_CPU_S), here."""
    start = time.process_time()
    text = made = 0
    for index in range(problems):
        entry = dataset[index]
        text += len(str(entry["question"]).encode()) + len(str(entry["answer"]).encode())
        made += 1
        if time.process_time() - start > SAMPLE_CPU_S:
            break
    return Sample(made, text, time.process_time() - start)


def _sample_in_child(dataset: Sequence[dict], problems: int, where: str) -> Sample | None:
    """:func:`_sample` in a forked child under the memory limit and the deadline; None when the
    dataset raised there (the caller's own run reports it)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: measure, say it on the pipe, and leave without running any cleanup
        try:
            os.close(read_end)
            _child(dataset, problems, write_end)
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        said = _read_until(read_end, time.monotonic() + SAMPLE_DEADLINE_S)
    finally:
        os.close(read_end)
        _reap(pid)
    if said is None:
        raise ConfigError(
            f"{where}: one problem of these settings was not made within {SAMPLE_DEADLINE_S:g} s; "
            "lower the sizes in task.reasoning_gym.config"
        )
    answer = json.loads(said)
    if answer.get("memory"):
        raise ConfigError(
            f"{where}: one problem of these settings needs more than "
            f"{SAMPLE_MEMORY_BYTES / 2**20:,.0f} MiB of memory; lower the sizes in task.reasoning_gym.config"
        )
    if answer.get("failed"):
        return None
    return Sample(answer["problems"], answer["text_bytes"], answer["cpu_s"])


def _child(dataset: Sequence[dict], problems: int, write_end: int) -> None:
    """The forked child's work: the sample under the memory limit, as one JSON line on the pipe."""
    try:
        _limit_memory()
        sample = _sample(dataset, problems)
        said = {"problems": sample.problems, "text_bytes": sample.text_bytes, "cpu_s": sample.cpu_s}
    except MemoryError:
        said = {"memory": True}
    except BaseException:  # noqa: BLE001 - the dataset's own error: the caller's run reports it
        said = {"failed": True}
    os.write(write_end, json.dumps(said).encode())


def _limit_memory() -> None:
    """The child's address space: what it holds now plus SAMPLE_MEMORY_BYTES (Linux; else no limit)."""
    try:
        import resource

        with open("/proc/self/statm", encoding="ascii") as fh:
            held = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (ImportError, OSError, ValueError):
        return
    soft, hard = held + SAMPLE_MEMORY_BYTES, resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def _read_until(fd: int, deadline: float) -> str | None:
    """All the child writes before it closes the pipe; None when the deadline passes first. A child
    that died without a word (killed for memory by the system) reads as out of memory."""
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks).decode() or json.dumps({"memory": True})
        chunks.append(chunk)


def _reap(pid: int) -> None:
    """End the child if it still runs, and collect it."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
