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

The looks are read under the rule fixed at the first look
(:mod:`harness.decide.sequential_rule`). It is fixed here, just before the first look is queued,
in the study database (:func:`harness.store.rules.fix`: exactly once across
machines; a process that finds another's rule there and a different one in its study file
queues nothing). :func:`check_rule` refuses a changed study file before ``harness run`` writes
anything and before ``harness worker`` starts (or, with ``--new-version``, fixes the next
version), and every replay refuses it again, so no process reads or queues a look under
another rule.

The stopping rule is not the runner's: when a look is due, when an arm stops and which trials a
look adds are decided in :mod:`harness.decide` (on :mod:`harness.stats.sequential`); this module
only replays when the queue changed, queues what the replay wants and says so. The replay (and
pandas with it) is imported on first use, so a worker of a study that is not sequential never
loads it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import store as study_db
from harness.decide.look_trials import due_trials
from harness.decide.sequential_rule import (
    SequentialRule,
    check_dropped,
    check_file,
    next_version,
    rule_of_study,
)
from harness.errors import HarnessError, one_line
from harness.runner import queue
from harness.store import StorageError
from harness.store import rules as rule_store
from harness.study.expand import study_dir


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


def check_rule(study, storage, folder: Path, *, new_version: bool = False, say: Callable[[str], None]) -> None:
    """Refuse ``study`` (``RuleChanged``, one line) when its file changes the sequential rule
    fixed at its first look in ``storage`` (an Optuna RDB storage), or drops its ``sequential:``
    section; with ``new_version``, fix the file's rule as the next version instead (exactly
    once: a process that fixed another one first wins, and this one is refused). Before the
    first look nothing is fixed (the first :meth:`Looks.advance` that queues a look fixes it).
    Keeps the copy in the study folder ``folder`` current."""
    stored = [SequentialRule.model_validate(r) for r in rule_store.stored(storage.engine, study.name)]
    if study.sequential is None:
        check_dropped(stored, study=study.name)
        return
    current = rule_of_study(study)
    if new_version and stored and stored[-1].changes_to(current):
        wanted = next_version(current, stored, study=study.name)
        fixed = SequentialRule.model_validate(
            rule_store.fix(storage.engine, study.name, wanted.version, wanted.model_dump(mode="json"))
        )
        stored.append(fixed)
        if not fixed.changes_to(current):  # this process fixed it (or another fixed the same)
            say(
                f"sequential rule {fixed.label} fixed: the looks start over on seeds "
                f"{', '.join(map(str, fixed.seeds))}; the trials of rule {stored[-2].label} are kept, not used"
            )
    elif new_version and stored:
        say(f"--new-version: the study file keeps the sequential rule {stored[-1].label}; its looks go on")
    rule_store.write_local(folder, [r.model_dump(mode="json") for r in stored])
    check_file(current, stored, study=study.name)


def fix_first_rule(current: SequentialRule, storage_url: str, study_name: str, folder: Path) -> SequentialRule:
    """Fix ``current`` as the study's rule v1 unless a rule is fixed already (exactly once across
    machines: :func:`harness.store.rules.fix`); the rule fixed, which a process
    that got there first may have fixed otherwise (then ``RuleChanged``, and nothing queued)."""
    rdb = study_db.open_storage(storage_url, create=False)
    try:
        rule_store.fix(rdb.engine, study_name, current.version, current.model_dump(mode="json"))
        stored = rule_store.stored(rdb.engine, study_name)
    finally:
        rdb.engine.dispose()
    rule_store.write_local(folder, stored)
    return check_file(current, [SequentialRule.model_validate(r) for r in stored], study=study_name)


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
        added = self._queue(due)
        self._seen, self.due = seen, due
        return added

    def _queue(self, due) -> int:
        """Queue every look up to the one each condition wants (those already queued are skipped),
        the rule fixed first if it is not yet."""
        by_look = due_trials(self.study, due.wanted)
        specs = [spec for specs in by_look for spec in specs]
        if not specs:
            return 0
        if due.rules.in_force is None:
            fixed = fix_first_rule(due.rules.current, self.url, self.study.name, study_dir(self.study))
            self.say(f"fixed the sequential rule at the first look: {fixed.line()}")
        retries = int(queue.queue_attr(self.q, queue.RETRIES, 0))
        added = set(queue.enqueue_missing(self.q, specs, phase="compare", retries=retries))
        total = len(self.study.sequential.schedule())
        for look, specs_at in enumerate(by_look):
            new = [s for s in specs_at if s.trial_id in added]
            if new:
                arms = ", ".join(dict.fromkeys(s.arm for s in new))
                self.say(f"look {look + 1} of {total}: queued {len(new)} trials ({arms})")
        return len(added)
