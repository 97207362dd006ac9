"""A failed job's next attempt, and the jobs of dead workers.

A failure is re-queued as a new Optuna trial with the same key and ``attempt + 1`` while the job's
retry budget lasts. Workers record heartbeats for their jobs; a RUNNING job whose heartbeat is
older than the grace period belonged to a dead worker: :func:`fail_stale` fails it with a
conditional update (exactly one process wins) and re-queues it, like
``optuna.storages.fail_stale_trials`` with a retry callback, but race-free. A stale job whose
configuration has left the study's design (the arm was edited while its worker was dead) is
failed as superseded instead, and not run again: it would be a trial no analysis uses, outside
the user's ``--retries``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import optuna
from optuna.trial import TrialState

from harness.runner.queue.claims import set_reason, transition
from harness.runner.queue.enqueue import enqueue_due
from harness.runner.queue.jobs import Job, jobs
from harness.runner.queue.outages import retried
from harness.store import ATTEMPT, EXECUTOR_JOB, MAX_ATTEMPT, REASON, TRIAL_IDS, WORKER
from harness.store import optuna_tables as tables


@retried("queueing the next attempt", nested=True)  # after the FAIL: the retry must not get lost
def requeue(study: optuna.Study, job: Job, *, fresh_budget: bool = False) -> None:
    """Queue the next attempt of a failed job (same key, same spec, same tuning parameters),
    unless the queue holds a later attempt already (a re-run retried it first)."""
    attrs = {k: v for k, v in job.attrs.items() if k not in (REASON, WORKER, TRIAL_IDS, EXECUTOR_JOB)}
    attrs[ATTEMPT] = job.attempt + 1
    attrs[MAX_ATTEMPT] = job.max_attempt + 1 if fresh_budget else job.max_attempt
    enqueue_due(study, lambda held: [] if held[job.key].attempt > job.attempt else [(attrs, job.params)])


def fail(study: optuna.Study, job: Job, reason: str, *, retry: bool = True) -> bool:
    """Fail the job with ``reason``; re-queue it while its retry budget lasts.

    Returns True when a next attempt was queued.
    """
    set_reason(study, job, reason)
    if not transition(study, job, TrialState.RUNNING, TrialState.FAIL):
        return False  # someone else finished or failed it (e.g. as stale) and handled the retry
    if retry and job.attempt < job.max_attempt:
        requeue(study, job)
        return True
    return False


@retried("looking for stale jobs")
def stale_jobs(study: optuna.Study, grace_period_s: float) -> list[Job]:
    """RUNNING jobs whose last heartbeat is older than ``grace_period_s`` (by the database clock)."""
    with tables.engine(study).connect() as conn:
        now, beats = tables.running_beats(conn, study)
    stale_ids = {row for row, beat in beats if (now - beat).total_seconds() > grace_period_s}
    if not stale_ids:
        return []
    return [j for j in jobs(study, states=(TrialState.RUNNING,)) if j.optuna_id in stale_ids]


#: the start of a superseded job's reason (``harness status`` shows it beside the others)
SUPERSEDED = "superseded"


@dataclass(frozen=True)
class StaleJob:
    """A dead worker's job this process failed: the reason it recorded, and whether the job was
    queued again (False: superseded, its configuration no longer in the design)."""

    job: Job
    reason: str
    requeued: bool


def fail_stale(
    study: optuna.Study, grace_period_s: float, *, left_design: Callable[[Job], str | None] | None = None
) -> list[StaleJob]:
    """Fail the jobs of dead workers and queue them again; returns the jobs this process handled.

    A lost worker is not the trial's fault, so the re-queued attempt keeps its retry budget.
    ``left_design(job)`` says why a job is no longer in the study's design (None when it is):
    such a job is failed as superseded and not queued again.
    """
    handled = []
    for job in stale_jobs(study, grace_period_s):
        lost = f"worker lost: no heartbeat for more than {grace_period_s:g}s"
        gone = left_design(job) if left_design is not None else None
        reason = lost if gone is None else f"{SUPERSEDED}: {lost}, and it is {gone}: not run again"
        # Attributes are frozen once a trial is finished: the reason goes first.
        if set_reason(study, job, reason) and transition(study, job, TrialState.RUNNING, TrialState.FAIL):
            if gone is None:
                requeue(study, job, fresh_budget=True)
            handled.append(StaleJob(job, reason, requeued=gone is None))
    return handled
