"""Fenced claims: a worker's hold on a job is checked, and its result committed, in the same
transaction as the state change, so a worker that was paused past the grace period (its job
failed as stale and run again by another) can never overwrite the newer attempt. ``renew`` is the
fence check (it refreshes the heartbeat too); ``commit`` writes the final state, the value or
reason and the shared copy of the record, or nothing, with ``Revoked`` saying why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import optuna
import sqlalchemy as sa
from optuna.trial import TrialState

from harness.runner.queue.jobs import Job
from harness.store import ATTEMPT, REASON, SLOT, STATE_NAMES, TRIAL_ID, WORKER, records, schema
from harness.store import optuna_tables as tables


@dataclass
class Revoked:
    """Why a worker no longer holds its job: what became of that attempt, and the newer one."""

    key: str
    attempt: int
    state: TrialState | None  # the attempt's state now (None: gone)
    reason: str | None = None  # its failure reason, e.g. "worker lost: no heartbeat ..."
    owner: str | None = None  # who holds it now, when that is not the one asking
    newer_attempt: int | None = None
    newer_state: TrialState | None = None

    def __str__(self) -> str:
        if self.state == TrialState.RUNNING and self.owner:
            why = f"claimed by {self.owner} now"
        elif self.state is None:
            why = "the job is gone"
        else:
            why = f"this attempt is {STATE_NAMES.get(self.state, self.state.name.lower())}"
            if self.reason and self.state == TrialState.FAIL:
                why += f": {self.reason}"
        text = f"claim revoked ({why})"
        if self.newer_attempt is not None:
            state = STATE_NAMES.get(self.newer_state, "queued") if self.newer_state is not None else "queued"
            text += f"; attempt {self.newer_attempt} ({state}) is the current one"
        return text


def _key_attr(job: Job) -> tuple[str, Any] | None:
    if TRIAL_ID in job.attrs:
        return TRIAL_ID, job.attrs[TRIAL_ID]
    if SLOT in job.attrs:
        return SLOT, job.attrs[SLOT]
    return None


def _newer(conn, study: optuna.Study, job: Job) -> tuple[int, TrialState] | None:
    """The newest other attempt of the job's trial that supersedes it (``latest``'s order:
    attempt, then Optuna number), as (attempt, state); None when the job is the current one."""
    found = _key_attr(job)
    if found is None:
        return None
    key, value = found
    mine = (job.attempt, job.number)
    newer = [
        (attempt, number, state)
        for number, state, attempt in tables.same_key_attempts(conn, study, job.optuna_id, key, value, ATTEMPT)
        if (attempt, number) > mine
    ]
    if not newer:
        return None
    attempt, _number, state = max(newer, key=lambda t: (t[0], t[1]))
    return attempt, state


def _claim_state(conn, job: Job) -> tuple[TrialState | None, dict[str, Any]]:
    """The job's state, and its ``worker`` and ``reason`` attributes."""
    return tables.state_of(conn, job.optuna_id), tables.user_attrs(conn, job.optuna_id, (WORKER, REASON))


def revocation(study: optuna.Study, job: Job, owner: str | None = None) -> Revoked | None:
    """What became of the job's claim (None while it is still held)."""
    with tables.engine(study).connect() as conn:
        state, held = _claim_state(conn, job)
        newer = _newer(conn, study, job)
    holder, reason = held.get(WORKER), held.get(REASON)
    if state == TrialState.RUNNING and (owner is None or holder == owner) and newer is None:
        return None
    return Revoked(
        key=job.key,
        attempt=job.attempt,
        state=state,
        reason=reason,
        owner=holder if holder != owner else None,
        newer_attempt=newer[0] if newer else None,
        newer_state=newer[1] if newer else None,
    )


class _Lost(Exception):
    """Raised inside a fenced transaction to roll it back: the claim is no longer held."""


def renew(study: optuna.Study, job: Job, owner: str | None = None) -> Revoked | None:
    """A fenced heartbeat: record one for ``job`` if it is still RUNNING under ``owner``'s claim
    and still the current attempt of its trial; else change nothing and say what happened."""
    try:
        with tables.engine(study).begin() as conn:
            # the fence changes nothing here, but it locks the row (PostgreSQL) or the database
            # (SQLite), so no one fails the job as stale while this transaction runs
            if not tables.fence(conn, job.optuna_id, owner) or _newer(conn, study, job) is not None:
                raise _Lost
            tables.beat(conn, job.optuna_id)
    except _Lost:
        return revocation(study, job, owner) or Revoked(job.key, job.attempt, None)
    return None


def _already(
    study: optuna.Study, job: Job, owner: str | None, state: TrialState, value: float | None, reason: str | None
) -> bool:
    """Whether ``job`` already is in ``state`` by this very commit (one whose acknowledgement was
    lost when the connection dropped, tried again): same owner, same value or reason, and no
    newer attempt (a stale check that failed the job queues one)."""
    with tables.engine(study).connect() as conn:
        now, held = _claim_state(conn, job)
        stored = tables.stored_value(conn, job.optuna_id)
        newer = _newer(conn, study, job)
    if now != state or newer is not None or (owner is not None and held.get(WORKER) != owner):
        return False
    if state == TrialState.COMPLETE:
        return stored is not None and value is not None and math.isclose(stored, value)
    return held.get(REASON) == (reason or "failed")


def commit(
    study: optuna.Study,
    job: Job,
    owner: str | None = None,
    *,
    state: TrialState | None,
    value: float | None = None,
    reason: str | None = None,
    record=None,
    record_study: str | None = None,
) -> Revoked | None:
    """Finish (or advance) a claimed job in one transaction, only while the claim holds.

    ``state`` COMPLETE (with ``value``) or FAIL (with ``reason``); None keeps the job RUNNING
    and records a heartbeat (a record of a job that goes on, e.g. one seed of a tuning trial).
    ``record`` (a TrialRecord) is stored in the shared ``harness_records`` table of study
    ``record_study`` in the same transaction. The first statement is the fence, a conditional
    update that matches only a job still RUNNING under ``owner``'s claim; then the job must still
    be the current attempt of its trial. Otherwise nothing changes and the :class:`Revoked` is
    returned; None means everything was written. A FAIL queues no next attempt: call
    :func:`requeue` for that. Safe to call again after a dropped connection.
    """
    if state == TrialState.COMPLETE and (value is None or not math.isfinite(value)):
        raise ValueError(f"cannot complete a trial with a non-finite value {value!r}")
    if state is not None and state not in (TrialState.COMPLETE, TrialState.FAIL):
        raise ValueError(f"commit: a job ends COMPLETE or FAIL, not {state.name}")
    engine = tables.engine(study)
    if record is not None:
        schema.prepare(engine)  # its table (once per engine; open_storage has done it for the storages it opens)
    for tries in range(2):
        try:
            with engine.begin() as conn:
                if not tables.fence(conn, job.optuna_id, owner, finish=state) or _newer(conn, study, job) is not None:
                    raise _Lost
                if state == TrialState.COMPLETE:
                    tables.put_value(conn, job.optuna_id, value)
                    # a stale check that lost the race may have set a reason first
                    tables.delete_user_attr(conn, job.optuna_id, REASON)
                elif state == TrialState.FAIL:
                    tables.put_user_attr(conn, job.optuna_id, REASON, reason or "failed")
                else:
                    tables.beat(conn, job.optuna_id)
                if record is not None:
                    records.upsert(conn, record_study or str(record.study), record)
            break
        except _Lost:
            if state is not None and _already(study, job, owner, state, value, reason):
                break
            return revocation(study, job, owner) or Revoked(job.key, job.attempt, None)
        except sa.exc.IntegrityError:
            if tries:  # another process stored the same record attempt at that moment: once more
                raise
    if state is not None:
        job.state = state
        if state == TrialState.COMPLETE:
            job.value = value
        else:
            job.attrs[REASON] = reason or "failed"
    return None
