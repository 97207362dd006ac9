"""Studies with looks at run time: each look's trials are queued as soon as the look before it
has been read, exactly once, by whichever process gets there first.

A study has looks over seeds (``sequential:``: each look adds seeds) or over compute
(``compute_looks:``: each look adds the next segment of every trial of the arms that go on).
Everything about them is decided in :mod:`harness.decide.sequential`: when a look is due, when
an arm stops, which trials a look adds, the rule fixed at the first look. This module is the
queue's side only: whenever the queue changed (trials finished), it asks the study's schedule
(:class:`~harness.decide.sequential.schedule.Schedule` or
:class:`~harness.decide.sequential.compute_schedule.ComputeSchedule`) what is due and queues it with
:func:`harness.runner.queue.enqueue_missing`, one transaction under the queue's lock that adds
only the trial ids the queue has never held. Every machine works out the same looks (a replay
of the study database): the ``harness run`` driver at every poll and every worker, on any
machine, that finds nothing to claim. A look found due by several processes at once is queued
once, and a process that dies midway leaves nothing half-queued (whoever looks next queues it).
Finished trials stay finished (but for the failures a re-run retries), so a replay on slightly
stale trials asks for nothing the current ones would not; and each change of the queue brings
another replay, so no look that falls due is left unqueued.

The replay (and the results loader with it) is imported on first use, so a worker of a study
without looks never loads it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.decide.sequential.segments import phase_of
from harness.runner import queue
from harness.runner.checkpoints import remove_checkpoints
from harness.store import StorageError
from harness.study.expand import expand, study_dir


def has_looks(study) -> bool:
    """Whether ``study`` is queued look by look (over seeds or over compute)."""
    return study.sequential is not None or study.compute_looks is not None


def look_lines(study, study_ref: Any, storage_url: str) -> list[str]:
    """Where a study with looks stands, one line per condition after a header (the replay)."""
    if study.compute_looks is not None:
        from harness.decide.sequential.compute_schedule import compute_state  # the replay: on use only

        return compute_state(study_ref, storage_url).lines()
    from harness.decide.sequential.schedule import look_state  # the replay: on use only

    return look_state(study_ref, storage_url).lines()


class Looks:
    """One process's view of a sequential study's looks: asks what is due when its queue changed
    and queues it (see the module doc)."""

    def __init__(self, study, study_ref: Any, storage_url: str, q, say: Callable[[str], None]):
        if study.compute_looks is not None:
            from harness.decide.sequential.compute_schedule import ComputeSchedule  # on use only

            self.schedule = ComputeSchedule(study, study_ref, storage_url, say)
        else:
            from harness.decide.sequential.schedule import Schedule  # on use only

            self.schedule = Schedule(study, study_ref, storage_url, say)
        self.study, self.q, self.say = study, q, say
        self.state = None  # the latest look state (None until a replay has succeeded)
        self._seen: tuple | None = None  # the queue's counts at that replay
        self._unread = False  # the storage could not be read at the last try (said once)
        self._cleaned: set[str] = set()  # the ended arms whose checkpoints this process removed

    @property
    def finished(self) -> bool:
        return self.state is not None and self.state.finished

    def advance(self, force: bool = False) -> int:
        """Ask what is due if the queue changed since the last time (always with ``force``) and
        queue it; returns how many trials this process queued."""
        seen = queue.count(self.q).as_tuple()
        if not force and seen == self._seen:
            return 0
        try:
            due = self.schedule.due()
        except StorageError as err:  # a replay on part of the trials could come too early
            if not self._unread:
                self.say(f"cannot work out the next look yet ({err}); trying again")
            self._unread, self.state = True, None
            return 0
        self._unread = False
        added = self._queue(due.by_look) if due.trials else 0
        self._seen, self.state = seen, due.state
        ended = set(due.state.ended) - self._cleaned if self.study.compute_looks is not None else set()
        if ended:  # arms that train no more: their checkpoints are never read again
            remove_checkpoints(study_dir(self.study), [s.trial_id for s in expand(self.study) if s.arm in ended])
            self._cleaned |= ended
        return added

    def _queue(self, by_look: list[list]) -> int:
        """Queue every look's trials (those already queued are skipped), each in its phase (a
        compute look's segments before the last: ``segment``), and say what was added."""
        retries = int(queue.queue_attr(self.q, queue.RETRIES, 0))
        specs = [spec for specs_at in by_look for spec in specs_at]
        added = set()
        for phase in dict.fromkeys(phase_of(spec) for spec in specs):
            of_phase = [spec for spec in specs if phase_of(spec) == phase]
            added.update(queue.enqueue_missing(self.q, of_phase, phase=phase, retries=retries))
        total = self.schedule.total_looks
        for look, specs_at in enumerate(by_look):
            new = [s for s in specs_at if s.trial_id in added]
            if new:
                arms = ", ".join(dict.fromkeys(s.arm for s in new))
                self.say(f"look {look + 1} of {total}: queued {len(new)} trials ({arms})")
        return len(added)
