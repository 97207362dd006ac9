"""How busy the machine is, for the tests that wait on something or give it a time limit (tests
import it by name: the tests folder is on the path because its conftest is there)."""

from __future__ import annotations

import os
import time

#: the most :func:`slowness` stretches a wait: a hang is still caught in a bounded time
MAX_SLOWNESS = 20.0


def slowness() -> float:
    """How many times slower than an idle machine this one runs now, measured as the one-minute
    load average per core (1 on an idle or lightly used machine, at most ``MAX_SLOWNESS``).

    A test's waits for an event and the time limits it gives a healthy process are multiplied by
    it: a busy machine gets more time, never a different verdict."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    per_core = os.getloadavg()[0] / cores
    return min(max(1.0, per_core), MAX_SLOWNESS)


class Deadline:
    """A bound on a hang that a busy machine cannot trip: ``seconds`` on an idle machine, times the
    highest :func:`slowness` measured from its start to the moment it is asked (the load can rise
    while a test waits, and the one-minute load average lags behind it)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.start = time.monotonic()
        self.factor = slowness()

    def limit(self) -> float:
        """The bound so far, in seconds."""
        self.factor = max(self.factor, slowness())
        return self.seconds * self.factor

    def passed(self) -> bool:
        return time.monotonic() - self.start > self.limit()

    def left(self) -> float:
        """Seconds left under the bound so far (at least 0)."""
        return max(0.0, self.limit() - (time.monotonic() - self.start))
