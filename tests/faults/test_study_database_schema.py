"""The harness's tables' schema version on a real PostgreSQL server: a store laid out as release
0.1.0 laid it out (Optuna's tables, ``harness_records`` and ``harness_sequential_rules``, no
version row; the rows of ``tests/store/release_0_1_0.sql``) is migrated once when several workers
open it at the same moment, and reads the same records and rules; a newer store is refused.
SQLite's side, and the migration's other properties, are ``tests/store/test_store_schema.py``."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa
from optuna.storages import RDBStorage

from harness import store as study_db
from harness.store import rules, schema
from harness.tracking.shared_records import RecordStore
from harness.version import __version__

RELEASE_0_1_0 = Path(__file__).resolve().parents[1] / "store" / "release_0_1_0.sql"
COLUMNS = {
    schema.RECORDS: ("id", "study", "trial_id", "attempt", "status", "phase", "fingerprint", "record"),
    schema.RULES: ("id", "study", "version", "rule"),
}


def release_rows() -> dict[sa.Table, list[tuple]]:
    conn = sqlite3.connect(":memory:")
    conn.executescript(RELEASE_0_1_0.read_text(encoding="utf-8"))
    found = {t: conn.execute(f"SELECT {', '.join(c)} FROM {t.name} ORDER BY id").fetchall() for t, c in COLUMNS.items()}
    conn.close()
    return found


def release_store_on(url: str) -> dict[sa.Table, list[tuple]]:
    """Lay ``url``'s database out as release 0.1.0 did, with that release's rows; the rows."""
    found = release_rows()
    engine = RDBStorage(url).engine  # Optuna's schema, made by Optuna
    with engine.begin() as conn:
        for table, columns in COLUMNS.items():
            table.create(conn)  # the same two tables 0.1.0 made (version 1 changed none of them)
            conn.execute(sa.insert(table), [dict(zip(columns, row, strict=True)) for row in found[table]])
    engine.dispose()
    return found


def test_workers_opening_a_release_store_at_once_migrate_it_once(pg_url):
    found = release_store_on(pg_url)
    racers = 6
    barrier = threading.Barrier(racers)
    read, errors = [], []

    def worker() -> None:
        try:
            barrier.wait()
            storage = study_db.open_storage(pg_url)
            try:
                store = RecordStore.of(storage, "release")
                read.append(
                    (
                        sorted(store.fingerprints()),
                        {t: (r.attempt, r.status) for t, r in store.latest().items()},
                        rules.stored(storage.engine, "release"),
                    )
                )
            finally:
                storage.engine.dispose()
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=worker) for _ in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    stored = sorted((r[2], r[3], r[6]) for r in found[schema.RECORDS])
    expected = (
        stored,
        {"a-s0-b387869b": (2, "completed"), "b-s0-0b7aaf19": (1, "completed")},
        [{"alpha": 0.05, "looks": [2, 4], "min_effect": 0.1}],
    )
    assert read == [expected] * racers
    engine = sa.create_engine(pg_url)
    with engine.connect() as conn:
        assert conn.execute(sa.select(schema.VERSION)).all() == [("harness", schema.SCHEMA_VERSION, __version__)]
        for table, columns in COLUMNS.items():  # in place: the release's rows, untouched
            assert conn.execute(sa.select(*(table.c[c] for c in columns)).order_by(table.c.id)).all() == found[table]
    engine.dispose()


def test_a_store_from_a_newer_harness_is_refused_on_postgresql(pg_url):
    study_db.open_storage(pg_url, create=True).engine.dispose()
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(sa.update(schema.VERSION).values(version=schema.SCHEMA_VERSION + 1, written_by="9.0.0"))
    engine.dispose()
    with pytest.raises(
        schema.SchemaTooNew,
        match=rf"written by harness 9\.0\.0 \(schema version {schema.SCHEMA_VERSION + 1}\); this harness",
    ):
        study_db.open_storage(pg_url)
