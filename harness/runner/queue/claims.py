"""Claiming a job and changing its state, each one conditional update (atomic on SQLite and
PostgreSQL alike).

``Study.ask`` pops a waiting trial with a read followed by a write (``SELECT ... FOR UPDATE``,
which SQLite ignores), so two processes can both pop the same trial. :func:`claim` is one
``UPDATE ... WHERE state = 'WAITING'``: the process that changed the row owns the job. The same
transaction writes the job's first heartbeat, so a claimed job is never without one, and (with an
owner) the ``worker`` attribute that fences the claim (:mod:`harness.runner.queue.fencing`).
"""

from __future__ import annotations

import math
from typing import Any

import optuna
from optuna.trial import TrialState

from harness.runner.queue.jobs import Job
from harness.store import REASON, WORKER
from harness.store import optuna_tables as tables


def _claim_row(conn, row: int, owner: str | None) -> bool:
    """In the caller's transaction: WAITING to RUNNING if still waiting, first heartbeat, owner."""
    if not tables.change_state(conn, row, TrialState.WAITING, TrialState.RUNNING):
        return False
    tables.first_beat(conn, row)
    if owner is not None:
        tables.put_user_attr(conn, row, WORKER, owner)
    return True


def claim(study: optuna.Study, job: Job, owner: str | None = None) -> bool:
    """Atomically move ``job`` from WAITING to RUNNING and record its first heartbeat (and, with
    ``owner``, the ``worker`` attribute that fences the claim).

    True when this process now owns the job; False when another process claimed it first.
    """
    with tables.engine(study).begin() as conn:
        if not _claim_row(conn, job.optuna_id, owner):
            return False
    if owner is not None:
        job.attrs[WORKER] = owner
    return True


def claim_next(study: optuna.Study, owner: str | None = None) -> Job | None:
    """Claim the oldest waiting job of the queue, or None when nothing is waiting.

    One indexed read of one row, then the claim, in one transaction: the cost does not grow with
    the queue (reading every waiting job to pick the first took seconds a claim at 10,000 jobs).
    Processes claiming at once skip each other's rows (:func:`~harness.store.optuna_tables.oldest_waiting`);
    one that lost a row to another process anyway (SQLite) tries the next oldest.

    The job is read before the claim commits, never after: a database that stops answering between
    the two would otherwise leave a claim no worker knows it holds (its trial run again, as a new
    attempt, once its heartbeat went stale). An error before the commit claims nothing.
    """
    engine = tables.engine(study)
    while True:
        with engine.begin() as conn:
            row = tables.oldest_waiting(conn, study)
            if row is None:
                return None
            job = Job.from_frozen(tables.load_trial(study, row))
            claimed = _claim_row(conn, row, owner)
        if claimed:
            job.state = TrialState.RUNNING
            if owner is not None:
                job.attrs[WORKER] = owner
            return job


def transition(study: optuna.Study, job: Job, from_state: TrialState, to_state: TrialState) -> bool:
    """Change the job's state only if it is still ``from_state`` (atomic; True if it changed)."""
    with tables.engine(study).begin() as conn:
        changed = tables.change_state(conn, job.optuna_id, from_state, to_state)
    if changed:
        job.state = to_state
    return changed


def set_attr(study: optuna.Study, job: Job, key: str, value: Any) -> bool:
    """Set a user attribute (False when the job was finished meanwhile: attrs are then frozen)."""
    if not tables.set_user_attr(study, job.optuna_id, key, value):
        return False
    job.attrs[key] = value
    return True


def set_reason(study: optuna.Study, job: Job, reason: str) -> bool:
    return set_attr(study, job, REASON, reason)


def complete(study: optuna.Study, job: Job, value: float) -> bool:
    """Tell Optuna the job completed with ``value`` (False if it was finished meanwhile)."""
    if not math.isfinite(value):
        raise ValueError(f"cannot complete a trial with a non-finite value {value!r}")
    try:
        study.tell(job.number, value)
    except (ValueError, RuntimeError):  # finished meanwhile (Optuna's UpdateFinishedTrialError is a RuntimeError)
        return False
    job.state, job.value = TrialState.COMPLETE, value
    return True


def release(study: optuna.Study, job: Job) -> bool:
    """Put a claimed job back to WAITING (an interrupted worker): the next worker resumes it."""
    return transition(study, job, TrialState.RUNNING, TrialState.WAITING)
