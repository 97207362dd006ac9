"""Fenced heartbeats for a running job, recorded from a thread of the worker."""

from __future__ import annotations

import threading
import time

from harness.errors import one_line
from harness.ground import console
from harness.ground.urls import redact_text
from harness.runner.queue import fencing


class Either:
    """``is_set()`` of either event: the worker's stop, or its claim found revoked."""

    def __init__(self, *events: threading.Event):
        self.events = events

    def is_set(self) -> bool:
        return any(e.is_set() for e in self.events)

    def wait(self, timeout: float, poll_s: float = 0.05) -> bool:
        """Whether either event is set within ``timeout`` seconds (polled, as ``Event.wait`` is not
        composable)."""
        deadline = time.monotonic() + timeout
        while not self.is_set():
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll_s)
        return True


class Heartbeat:
    """Records fenced heartbeats for one job while it runs (in a thread of the worker).

    A failed beat is tried again at the next interval (one line when beats start failing, one
    when they work again). A beat that finds the claim revoked sets :attr:`revoked` and stops:
    the worker then ends the trial's process and discards its result.
    """

    def __init__(self, study, job, interval_s: float, *, owner: str | None = None, say=None, url: str | None = None):
        self.study, self.job, self.interval_s, self.owner = study, job, interval_s, owner
        self.say = say or (lambda message: console.say(message, prefix="[worker]"))
        self.url = url
        self.revoked = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="heartbeat", daemon=True)

    def _beat(self) -> None:
        failing_since = None
        while not self._stop.wait(self.interval_s):
            try:
                lost = fencing.renew(self.study, self.job, self.owner)
            except Exception as err:  # noqa: BLE001 - a missed beat is retried next interval
                if failing_since is None:
                    failing_since = time.monotonic()
                    self.say(
                        f"heartbeat for {self.job.key} failed "
                        f"({redact_text(one_line(err, 200), self.url)}); retrying every {self.interval_s:g}s"
                    )
                continue
            if failing_since is not None:
                self.say(f"heartbeats for {self.job.key} recorded again after {time.monotonic() - failing_since:.0f}s")
                failing_since = None
            if lost is not None and not self._stop.is_set():
                self.revoked.set()
                return

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
