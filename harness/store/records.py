"""The ``harness_records`` table: a copy of every trial record in the study database, so that
results reach every machine. One row per study, trial id and attempt; the row keeps the record's
JSON and the columns it is looked up by. What a record means, and how copies are merged with a
machine's folder, is :mod:`harness.tracking.shared_records`'s; this module stores and reads the
rows and knows nothing of what they hold.

:func:`upsert` is the one write: inside the caller's transaction (the runner commits a trial's
final state and its record together, :mod:`harness.runner.queue.fencing`), or in a transaction of
its own (:func:`put`).
"""

from __future__ import annotations

from typing import Protocol

import sqlalchemy as sa

from harness.store.schema import RECORDS, prepare


class Storable(Protocol):
    """What the table needs of a record (a ``TrialRecord``): its key, its status and phase, a
    fingerprint of its content and its JSON."""

    trial_id: str
    attempt: int
    status: str
    phase: str

    def fingerprint(self) -> str: ...

    def model_dump_json(self) -> str: ...


def upsert(conn: sa.Connection, study: str, record: Storable) -> None:
    """Store ``record`` as ``study``'s copy of its attempt, inside the caller's transaction: a
    stored copy with the same fingerprint is left as it is, a different one replaced. Two
    processes storing the same attempt at once: one of them gets an ``IntegrityError``."""
    t = RECORDS
    key = (t.c.study == study, t.c.trial_id == record.trial_id, t.c.attempt == record.attempt)
    fingerprint = record.fingerprint()
    held = conn.execute(sa.select(t.c.fingerprint).where(*key)).scalar()
    if held == fingerprint:
        return
    if held is not None:
        conn.execute(sa.delete(t).where(*key))
    conn.execute(
        sa.insert(t).values(
            study=study,
            trial_id=record.trial_id,
            attempt=record.attempt,
            status=record.status,
            phase=record.phase,
            fingerprint=fingerprint,
            record=record.model_dump_json(),
        )
    )


def put(engine: sa.Engine, study: str, record: Storable) -> None:
    """:func:`upsert` in a transaction of its own; when another process stores the same attempt
    at the same moment, its copy stands."""
    prepare(engine)
    try:
        with engine.begin() as conn:
            upsert(conn, study, record)
    except sa.exc.IntegrityError:
        pass


def texts(engine: sa.Engine, study: str, *, trial_id: str | None = None, status: str | None = None) -> list[str]:
    """The JSON of ``study``'s stored records (of one trial id, of one status, when given), by
    trial id and attempt."""
    prepare(engine)
    t = RECORDS
    where = [t.c.study == study]
    if trial_id is not None:
        where.append(t.c.trial_id == trial_id)
    if status is not None:
        where.append(t.c.status == status)
    with engine.connect() as conn:
        return list(conn.execute(sa.select(t.c.record).where(*where).order_by(t.c.trial_id, t.c.attempt)).scalars())


def fingerprints(engine: sa.Engine, study: str) -> set[tuple[str, int, str]]:
    """(trial id, attempt, fingerprint) of every record stored for ``study``."""
    prepare(engine)
    t = RECORDS
    with engine.connect() as conn:
        rows = conn.execute(sa.select(t.c.trial_id, t.c.attempt, t.c.fingerprint).where(t.c.study == study)).all()
    return {(r[0], int(r[1]), r[2]) for r in rows}
