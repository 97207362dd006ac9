"""Fenced claims: a worker's hold on a job is checked, and its result committed, in the same
transaction as the state change, so a worker that was paused past the grace period (its job
failed as stale and run again by another) can never overwrite the newer attempt. ``renew`` is the
fence check (it refreshes the heartbeat too); ``commit`` writes the final state, the value or
reason and the shared copy of the record, or nothing, with ``Revoked`` saying why.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import optuna
import sqlalchemy as sa
from optuna.storages._rdb import models as _models
from optuna.trial import TrialState

from harness.runner.queue.outages import backend
from harness.runner.queue.jobs import Job, _put_attr, _utcnow
from harness.tracking.shared_records import RECORDS, ensure_table
from harness.tracking.storage import (
    ATTEMPT,
    REASON,
    SLOT,
    STATE_NAMES,
    TRIAL_ID,
    WORKER,
)


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


def _held(job: Job, owner: str | None) -> list:
    """WHERE clauses: the job is RUNNING (under ``owner``'s claim, when given)."""
    trials = _models.TrialModel.__table__
    attrs = _models.TrialUserAttributeModel.__table__
    where = [trials.c.trial_id == job.optuna_id, trials.c.state == TrialState.RUNNING]
    if owner is not None:
        where.append(
            sa.exists().where(
                attrs.c.trial_id == job.optuna_id, attrs.c.key == WORKER, attrs.c.value_json == json.dumps(owner)
            )
        )
    return where


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
    trials = _models.TrialModel.__table__
    attrs = _models.TrialUserAttributeModel.__table__
    same_key = (
        sa.select(attrs.c.trial_id)
        .join(trials, trials.c.trial_id == attrs.c.trial_id)
        .where(trials.c.study_id == study._study_id, attrs.c.key == key, attrs.c.value_json == json.dumps(value))
    )
    attempt_of = sa.select(attrs.c.trial_id, attrs.c.value_json).where(attrs.c.key == ATTEMPT).subquery()
    rows = conn.execute(
        sa.select(trials.c.trial_id, trials.c.number, trials.c.state, attempt_of.c.value_json)
        .select_from(trials.outerjoin(attempt_of, attempt_of.c.trial_id == trials.c.trial_id))
        .where(trials.c.trial_id.in_(same_key), trials.c.trial_id != job.optuna_id)
    ).all()
    mine = (job.attempt, job.number)
    newer = []
    for _tid, number, state, attempt_json in rows:
        try:
            attempt = int(json.loads(attempt_json)) if attempt_json is not None else 1
        except (TypeError, ValueError):
            attempt = 1
        if (attempt, number) > mine:
            newer.append((attempt, number, state))
    if not newer:
        return None
    attempt, _number, state = max(newer, key=lambda t: (t[0], t[1]))
    return attempt, state


def _claim_state(conn, job: Job) -> tuple[Any, dict[str, str]]:
    """The job's Optuna state and its raw ``worker`` and ``reason`` attributes (JSON text)."""
    trials = _models.TrialModel.__table__
    attrs = _models.TrialUserAttributeModel.__table__
    state = conn.execute(sa.select(trials.c.state).where(trials.c.trial_id == job.optuna_id)).scalar()
    held = dict(
        conn.execute(
            sa.select(attrs.c.key, attrs.c.value_json)
            .where(attrs.c.trial_id == job.optuna_id, attrs.c.key.in_((WORKER, REASON)))
        ).all()
    )
    return state, held


def revocation(study: optuna.Study, job: Job, owner: str | None = None) -> Revoked | None:
    """What became of the job's claim (None while it is still held)."""
    with backend(study).engine.connect() as conn:
        state, held = _claim_state(conn, job)
        newer = _newer(conn, study, job)
    holder = json.loads(held[WORKER]) if WORKER in held else None
    reason = json.loads(held[REASON]) if REASON in held else None
    if isinstance(state, str):
        state = TrialState[state]
    if state == TrialState.RUNNING and (owner is None or holder == owner) and newer is None:
        return None
    return Revoked(
        key=job.key, attempt=job.attempt, state=state, reason=reason,
        owner=holder if holder != owner else None,
        newer_attempt=newer[0] if newer else None, newer_state=newer[1] if newer else None,
    )


class _Lost(Exception):
    """Raised inside a fenced transaction to roll it back: the claim is no longer held."""


def renew(study: optuna.Study, job: Job, owner: str | None = None) -> Revoked | None:
    """A fenced heartbeat: record one for ``job`` if it is still RUNNING under ``owner``'s claim
    and still the current attempt of its trial; else change nothing and say what happened."""
    trials = _models.TrialModel.__table__
    beats = _models.TrialHeartbeatModel.__table__
    try:
        with backend(study).engine.begin() as conn:
            # a no-op update that only matches a held claim: it locks the row (PostgreSQL) or the
            # database (SQLite), so no one fails the job as stale while this transaction runs
            held = conn.execute(sa.update(trials).where(*_held(job, owner)).values(state=trials.c.state)).rowcount
            if held != 1 or _newer(conn, study, job) is not None:
                raise _Lost
            beat = conn.execute(
                sa.update(beats).where(beats.c.trial_id == job.optuna_id).values(heartbeat=sa.func.current_timestamp())
            ).rowcount
            if beat != 1:
                conn.execute(sa.insert(beats).values(trial_id=job.optuna_id, heartbeat=sa.func.current_timestamp()))
    except _Lost:
        return revocation(study, job, owner) or Revoked(job.key, job.attempt, None)
    return None


_TABLES_READY: set[int] = set()


def _put_record(conn, study_name: str, record) -> None:
    """Store a copy of ``record`` in the shared ``harness_records`` table, inside the caller's
    transaction (the same row :meth:`RecordStore.put` writes: replaced when it differs)."""
    t = RECORDS
    key = (t.c.study == study_name, t.c.trial_id == record.trial_id, t.c.attempt == record.attempt)
    fingerprint = record.fingerprint()
    held = conn.execute(sa.select(t.c.fingerprint).where(*key)).scalar()
    if held == fingerprint:
        return
    if held is not None:
        conn.execute(sa.delete(t).where(*key))
    conn.execute(sa.insert(t).values(
        study=study_name, trial_id=record.trial_id, attempt=record.attempt, status=record.status,
        phase=record.phase, fingerprint=fingerprint, record=record.model_dump_json(),
    ))


def _already(study: optuna.Study, job: Job, owner: str | None, state: TrialState, value: float | None,
             reason: str | None) -> bool:
    """Whether ``job`` already is in ``state`` by this very commit (one whose acknowledgement was
    lost when the connection dropped, tried again): same owner, same value or reason, and no
    newer attempt (a stale check that failed the job queues one)."""
    values = _models.TrialValueModel.__table__
    with backend(study).engine.connect() as conn:
        now, held = _claim_state(conn, job)
        stored = conn.execute(
            sa.select(values.c.value).where(values.c.trial_id == job.optuna_id, values.c.objective == 0)
        ).scalar()
        newer = _newer(conn, study, job)
    if isinstance(now, str):
        now = TrialState[now]
    if now != state or newer is not None or (owner is not None and held.get(WORKER) != json.dumps(owner)):
        return False
    if state == TrialState.COMPLETE:
        return stored is not None and value is not None and math.isclose(stored, value)
    return held.get(REASON) == json.dumps(reason or "failed")


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
    engine = backend(study).engine
    if record is not None and id(engine) not in _TABLES_READY:
        ensure_table(engine)
        _TABLES_READY.add(id(engine))
    trials = _models.TrialModel.__table__
    values = _models.TrialValueModel.__table__
    beats = _models.TrialHeartbeatModel.__table__
    attrs = _models.TrialUserAttributeModel.__table__
    changes: dict[str, Any] = {"state": state if state is not None else trials.c.state}
    if state is not None:
        changes["datetime_complete"] = _utcnow()
    for tries in range(2):
        try:
            with engine.begin() as conn:
                held = conn.execute(sa.update(trials).where(*_held(job, owner)).values(**changes)).rowcount
                if held != 1 or _newer(conn, study, job) is not None:
                    raise _Lost
                if state == TrialState.COMPLETE:
                    conn.execute(sa.delete(values).where(values.c.trial_id == job.optuna_id))
                    conn.execute(sa.insert(values).values(
                        trial_id=job.optuna_id, objective=0, value=float(value),
                        value_type=_models.TrialValueModel.TrialValueType.FINITE,
                    ))
                    # a stale check that lost the race may have set a reason first
                    conn.execute(sa.delete(attrs).where(attrs.c.trial_id == job.optuna_id, attrs.c.key == REASON))
                elif state == TrialState.FAIL:
                    _put_attr(conn, job.optuna_id, REASON, reason or "failed")
                else:
                    conn.execute(
                        sa.update(beats).where(beats.c.trial_id == job.optuna_id)
                        .values(heartbeat=sa.func.current_timestamp())
                    )
                if record is not None:
                    _put_record(conn, record_study or str(record.study), record)
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
