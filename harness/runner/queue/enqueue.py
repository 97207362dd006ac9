"""Exactly-once enqueue: every enqueue (:func:`enqueue_specs`, :func:`enqueue_missing`, the
tuning slots, the retries of :func:`harness.runner.queue.retries.requeue`) decides what to add
and adds it in one transaction that first locks the queue's study row (the lock Optuna itself
takes to create a trial), so processes on any number of machines that find the same trials due
at once (a sequential study's next look, :mod:`harness.runner.looks`; the failures two re-runs
retry; a retry a worker queues while a re-run retries the same failure) queue them once, and one
that dies midway leaves nothing half-queued.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import TrialState

from harness.runner.queue.claims import set_reason, transition
from harness.runner.queue.jobs import job_key, jobs, latest, slot_key
from harness.runner.queue.outages import retried
from harness.store import (
    ARM,
    ATTEMPT,
    MAX_ATTEMPT,
    PHASE,
    SEED,
    SLOT,
    SPEC,
    TRIAL_ID,
)
from harness.store import optuna_tables as tables


@dataclass
class EnqueueReport:
    added: int = 0  # keys never queued before
    requeued: int = 0  # keys whose latest attempt had failed: queued again, with a fresh budget
    cancelled: int = 0  # waiting keys no longer part of the design

    @classmethod
    def of(cls, queued: list[dict[str, Any]]) -> EnqueueReport:
        """The report of the jobs queued (their user attributes): first attempts, and retries."""
        first = sum(attrs[ATTEMPT] == 1 for attrs in queued)
        return cls(added=first, requeued=len(queued) - first)

    def __str__(self) -> str:
        parts = [f"{self.added} new"]
        if self.requeued:
            parts.append(f"{self.requeued} failed re-queued")
        if self.cancelled:
            parts.append(f"{self.cancelled} no longer in the design")
        return ", ".join(parts)


def _spec_attrs(spec: Any, *, phase: str, attempt: int, retries: int) -> dict[str, Any]:
    """The user attributes of a comparison job: everything a worker anywhere needs to run it."""
    return {
        TRIAL_ID: spec.trial_id,
        ARM: spec.arm,
        SEED: getattr(spec, "seed", None),
        PHASE: phase,
        ATTEMPT: attempt,
        MAX_ATTEMPT: attempt + retries,
        SPEC: spec.model_dump(mode="json"),
    }


@dataclass(frozen=True)
class Held:
    """Where one key stands in the queue: its latest attempt and that attempt's state."""

    attempt: int
    state: TrialState


#: the user attributes that say which key a job is and which attempt (not its spec: the lock is held)
_IDENTITY = (TRIAL_ID, SLOT, ATTEMPT)

#: what to queue, decided under the queue's lock from what it holds: (user attrs, fixed params) per job
Due = Callable[[dict[str, Held]], list[tuple[dict[str, Any], dict[str, Any]]]]


def enqueue_due(study: optuna.Study, due: Due) -> list[dict[str, Any]]:
    """Queue what ``due`` asks for, given what the queue holds, exactly once across processes.

    One transaction: it first locks the queue's study row, so every other enqueue and Optuna
    trial creation on this queue waits; then it reads the latest attempt of every key the queue
    holds (in any state) and inserts a WAITING job, numbered as Optuna numbers trials, for each
    entry ``due`` returns. A second process that found the same jobs due waits for the lock,
    then finds them queued and adds nothing; a process that dies before the commit leaves
    nothing behind (the next one to look queues them). Returns the user attributes of the jobs
    added.
    """
    with tables.engine(study).begin() as conn:
        tables.lock_queue(conn, study)
        found = tables.identities(conn, study, _IDENTITY)
        newest: dict[str, tuple[int, int, TrialState]] = {}
        for number, state, attrs in found.values():
            key, attempt = job_key(attrs, number), int(attrs.get(ATTEMPT, 1))
            if key not in newest or (attempt, number) > newest[key][:2]:
                newest[key] = (attempt, number, state)
        number = len(found)
        added = []
        for attrs, params in due({key: Held(a, state) for key, (a, _, state) in newest.items()}):
            tables.insert_waiting(conn, study, number, attrs, params)
            number += 1
            added.append(attrs)
    return added


def enqueue_specs(
    study: optuna.Study, specs: Sequence[Any], *, phase: str | Callable[[Any], str], retries: int, add_new: bool = True
) -> EnqueueReport:
    """Queue every spec whose trial is not queued, running or completed already (idempotent, and
    exactly once across processes: :func:`enqueue_due`).

    A trial whose latest attempt failed is queued again with a fresh retry budget: re-running a
    study retries its failures. Waiting jobs whose trial id is not in ``specs`` (the study file
    changed) are failed with a reason, so workers do not run trials that left the design.
    ``add_new=False`` leaves out the trials never queued (a sequential study queues those look by
    look, with :func:`enqueue_missing`): only the retries and the cancellations are done.
    ``phase`` is every spec's phase, or a function of the spec that gives it (a compute-look
    study's segments and design trials, queued in one design).
    """
    phase_of = phase if callable(phase) else lambda _spec: phase

    def due(held: dict[str, Held]):
        out = {}
        for spec in specs:
            job = held.get(spec.trial_id)
            if job is None and add_new:
                out[spec.trial_id] = _spec_attrs(spec, phase=phase_of(spec), attempt=1, retries=retries)
            elif job is not None and job.state == TrialState.FAIL:
                out[spec.trial_id] = _spec_attrs(spec, phase=phase_of(spec), attempt=job.attempt + 1, retries=retries)
        return [(attrs, {}) for attrs in out.values()]

    report = EnqueueReport.of(enqueue_due(study, due))
    wanted = {spec.trial_id for spec in specs}
    for key, job in latest(jobs(study)).items():
        if job.state == TrialState.WAITING and TRIAL_ID in job.attrs and key not in wanted:
            set_reason(study, job, "no longer in the study design")
            if transition(study, job, TrialState.WAITING, TrialState.FAIL):
                report.cancelled += 1
    return report


def enqueue_slots(study: optuna.Study, *, arm: str, n_trials: int, retries: int) -> EnqueueReport:
    """Queue the tuning budget of one arm: exactly ``n_trials`` slots, whatever ran before, and
    exactly once across processes (:func:`enqueue_due`).

    A slot whose latest attempt failed is queued again with its parameters fixed (a retry of the
    same configuration), with a fresh retry budget.
    """
    tried = latest(jobs(study))  # the failed attempts' parameters, read before the lock

    def due(held: dict[str, Held]):
        out = []
        for slot in range(n_trials):
            key = slot_key(slot)
            job = held.get(key)
            if job is None:
                attempt, params = 1, {}
            elif job.state == TrialState.FAIL and key in tried and tried[key].attempt == job.attempt:
                attempt, params = job.attempt + 1, tried[key].params
            else:
                continue
            out.append(
                ({SLOT: slot, ARM: arm, PHASE: "tune", ATTEMPT: attempt, MAX_ATTEMPT: attempt + retries}, params)
            )
        return out

    return EnqueueReport.of(enqueue_due(study, due))


@retried("queueing the next look")  # safe to repeat: what the queue holds is skipped
def enqueue_missing(study: optuna.Study, specs: Sequence[Any], *, phase: str, retries: int) -> list[str]:
    """Queue the specs whose trial id the queue has never held, exactly once across processes
    (:func:`enqueue_due`; a sequential study's looks). Returns the trial ids added."""

    def due(held: dict[str, Held]):
        fresh = {spec.trial_id: spec for spec in specs if spec.trial_id not in held}
        return [(_spec_attrs(spec, phase=phase, attempt=1, retries=retries), {}) for spec in fresh.values()]

    return [attrs[TRIAL_ID] for attrs in enqueue_due(study, due)]
