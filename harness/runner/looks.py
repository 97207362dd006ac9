"""Sequential studies at run time: each look's trials are queued as soon as the look before it
has been read, exactly once, by whichever process gets there first.

A sequential study (``sequential:``) buys seeds look by look. Which conditions need which look
next is a replay of every comparison on the trials stored so far
(:func:`harness.decide.look_schedule.due_looks`), a pure function of the study database, so every
machine works out the same: the ``harness run`` driver at every poll (``_Phases.tick``) and every
worker, on any machine, that finds nothing to claim. Each queues what it finds due with
:func:`harness.runner.queue.enqueue_missing`, one transaction under the queue's lock that
adds only the trial ids the queue has never held: a look found due by several processes at once
is queued once, and a process that dies midway leaves nothing half-queued (whoever looks next
queues it). Finished trials stay finished (but for the failures a re-run retries), so a replay on
slightly stale trials asks for nothing the current ones would not; and each change of the queue
brings another replay, so no look that falls due is left unqueued.

The stopping rule is not the runner's: when a look is due, when an arm stops and which trials a
look adds are decided in :mod:`harness.decide` (on :mod:`harness.stats.sequential`); this module
only replays when the queue changed, queues what the replay wants and says so. The replay (and
pandas with it) is imported on first use, so a worker of a study that is not sequential never
loads it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.decide.look_trials import due_trials
from harness.errors import HarnessError, one_line
from harness.runner import queue
from harness.tracking.storage import StorageError


class LookError(HarnessError):
    """The next look cannot be worked out (a broken study or replay, not the storage)."""


def due_looks(study_ref: Any, storage_url: str):
    """The replay of a sequential study (``harness.decide.look_schedule.due_looks``: wanted,
    finished, current_look, looks, arms); a failure other than the harness's own errors (a storage
    that cannot be read is a ``StorageError``) is one line, a ``LookError``."""
    try:
        from harness.decide import look_schedule  # pandas and the results loader: sequential studies only

        return look_schedule.due_looks(study_ref, storage_url)
    except HarnessError:
        raise
    except Exception as err:  # noqa: BLE001 - one line, not a traceback
        raise LookError(
            f"cannot work out the looks of the sequential study {study_ref}: {one_line(err, 300)}; "
            "the trials so far are kept: fix the cause and run the same command again"
        ) from None


def look_lines(due) -> list[str]:
    """Where a sequential study stands: its current look, then each compared condition's state."""
    head = f"sequential: look {due.current_look} of {len(due.looks)}" + (" (finished)" if due.finished else "")
    width = max((len(c) for c in due.arms), default=0)
    return [head, *(f"  {condition:<{width}}  {state}" for condition, state in due.arms.items())]


class Looks:
    """One process's view of a sequential study's looks: replays it when its queue changed and
    queues the looks that are due (see the module doc)."""

    def __init__(self, study, study_ref: Any, storage_url: str, q, say: Callable[[str], None]):
        self.study, self.ref, self.url, self.q, self.say = study, study_ref, storage_url, q, say
        self.due = None  # the latest replay (None until one has succeeded)
        self._seen: tuple | None = None  # the queue's counts at that replay
        self._unread = False  # the storage could not be read at the last try (said once)

    @property
    def finished(self) -> bool:
        return self.due is not None and self.due.finished

    def advance(self, force: bool = False) -> int:
        """Replay the study if its queue changed since the last replay (always with ``force``)
        and queue every look that is due; returns how many trials this process queued."""
        seen = queue.count(self.q).as_tuple()
        if not force and seen == self._seen:
            return 0
        try:
            due = due_looks(self.ref, self.url)
        except StorageError as err:  # a replay on part of the trials could come too early
            if not self._unread:
                self.say(f"cannot work out the next look yet ({err}); trying again")
            self._unread, self.due = True, None
            return 0
        self._unread = False
        added = self._queue(due.wanted)
        self._seen, self.due = seen, due
        return added

    def _queue(self, wanted: dict[str, int]) -> int:
        """Queue every look up to the one each condition wants (those already queued are skipped)."""
        by_look = due_trials(self.study, wanted)
        specs = [spec for specs in by_look for spec in specs]
        if not specs:
            return 0
        retries = int(queue.queue_attr(self.q, queue.RETRIES, 0))
        added = set(queue.enqueue_missing(self.q, specs, phase="compare", retries=retries))
        total = len(self.study.sequential.schedule())
        for look, specs_at in enumerate(by_look):
            new = [s for s in specs_at if s.trial_id in added]
            if new:
                arms = ", ".join(dict.fromkeys(s.arm for s in new))
                self.say(f"look {look + 1} of {total}: queued {len(new)} trials ({arms})")
        return len(added)
