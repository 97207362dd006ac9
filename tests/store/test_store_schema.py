"""The harness's own tables carry a schema version: written when a store is made, checked at
every open. A store of release 0.1.0 (no version row; ``release_0_1_0.sql``, dumped from a
database that release's code made) is migrated in place, once, however many processes open it
at once, and reads the same records and rules; a store from a newer harness is refused in one
line; a migration that fails leaves the store as it was. On SQLite; the same on PostgreSQL is
``tests/faults/test_study_database_schema.py``."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa
from optuna.storages import RDBStorage

from harness import store as study_db
from harness.runner import queue
from harness.store import rules, schema
from harness.tracking.shared_records import RecordStore
from harness.version import __version__

RELEASE_0_1_0 = Path(__file__).with_name("release_0_1_0.sql")


def release_store(path: Path) -> str:
    """The 0.1.0 store, built from its dump; its URL."""
    with sqlite3.connect(path) as conn:
        conn.executescript(RELEASE_0_1_0.read_text(encoding="utf-8"))
    return f"sqlite:///{path}"


def rows(path: Path, table: str) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        return conn.execute(f"SELECT * FROM {table} ORDER BY id").fetchall()


def tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def version_rows(path: Path) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT name, version, written_by FROM harness_schema").fetchall()


def test_one_migration_step_per_version():
    assert len(schema.MIGRATIONS) == schema.SCHEMA_VERSION


def test_a_new_store_is_made_with_its_version(tmp_path):
    storage = study_db.open_storage(f"sqlite:///{tmp_path / 'new.db'}", create=True)
    storage.engine.dispose()
    assert {"harness_records", "harness_sequential_rules", "harness_schema"} <= tables(tmp_path / "new.db")
    assert version_rows(tmp_path / "new.db") == [("harness", schema.SCHEMA_VERSION, __version__)]


def test_a_release_0_1_0_store_is_migrated_in_place_and_reads_the_same(tmp_path):
    path = tmp_path / "release.db"
    url = release_store(path)
    assert "harness_schema" not in tables(path)
    records_before, rules_before = rows(path, "harness_records"), rows(path, "harness_sequential_rules")
    assert len(records_before) == 3 and len(rules_before) == 1

    storage = study_db.open_storage(url)
    try:
        assert schema.stored_version(storage.engine) == schema.SCHEMA_VERSION
        store = RecordStore.of(storage, "release")
        latest = store.latest()
        # what the release stored, read back by this code: trial a's second attempt, and trial b
        assert {t: (r.attempt, r.status, r.final) for t, r in latest.items()} == {
            "a-s0-b387869b": (2, "completed", {"eval/accuracy": 0.625}),
            "b-s0-0b7aaf19": (1, "completed", {"eval/accuracy": 0.375}),
        }
        assert [(r.trial_id, r.attempt, r.status) for r in store.all_attempts()] == [
            ("a-s0-b387869b", 1, "failed"),
            ("a-s0-b387869b", 2, "completed"),
            ("b-s0-0b7aaf19", 1, "completed"),
        ]
        # each record's fingerprint is the one the release stored with it: the same content
        assert store.fingerprints() == {(r[2], r[3], r[6]) for r in records_before}
        assert rules.stored(storage.engine, "release") == [{"alpha": 0.05, "looks": [2, 4], "min_effect": 0.1}]
        assert queue.load_queue(storage, "release") is not None  # Optuna's part opens as before
    finally:
        storage.engine.dispose()
    # in place: the rows are the release's, untouched; one version row now
    assert rows(path, "harness_records") == records_before
    assert rows(path, "harness_sequential_rules") == rules_before
    assert version_rows(path) == [("harness", schema.SCHEMA_VERSION, __version__)]


def test_a_release_store_missing_a_table_gets_it(tmp_path):
    """0.1.0 made each table when it first wrote one: a study with no sequential rule has none."""
    path = tmp_path / "release.db"
    release_store(path)
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE harness_sequential_rules")
    storage = study_db.open_storage(f"sqlite:///{path}")
    try:
        assert rules.fix(storage.engine, "release", 1, {"alpha": 0.1}) == {"alpha": 0.1}
    finally:
        storage.engine.dispose()
    assert version_rows(path) == [("harness", schema.SCHEMA_VERSION, __version__)]


def test_opening_again_changes_nothing(tmp_path):
    path = tmp_path / "release.db"
    url = release_store(path)
    for _ in range(3):
        study_db.open_storage(url).engine.dispose()
    with sqlite3.connect(path) as conn:
        before = list(conn.iterdump())
    study_db.open_storage(url).engine.dispose()
    with sqlite3.connect(path) as conn:
        assert list(conn.iterdump()) == before
    assert version_rows(path) == [("harness", schema.SCHEMA_VERSION, __version__)]


def test_processes_opening_a_release_store_at_once_migrate_it_once(tmp_path):
    path = tmp_path / "release.db"
    url = release_store(path)
    racers = 6
    barrier = threading.Barrier(racers)
    read, errors = [], []

    def worker() -> None:
        try:
            barrier.wait()
            storage = study_db.open_storage(url)  # an engine of its own, like another machine's worker
            try:
                read.append(len(RecordStore.of(storage, "release").all_attempts()))
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
    assert read == [3] * racers
    assert version_rows(path) == [("harness", schema.SCHEMA_VERSION, __version__)]


def test_a_store_from_a_newer_harness_is_refused_in_one_line(tmp_path):
    path = tmp_path / "newer.db"
    url = f"sqlite:///{path}"
    study_db.open_storage(url, create=True).engine.dispose()
    newer = schema.SCHEMA_VERSION + 1
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE harness_schema SET version = ?, written_by = '9.0.0'", (newer,))
    with sqlite3.connect(path) as conn:
        before = list(conn.iterdump())

    with pytest.raises(study_db.StorageError) as refused:
        study_db.open_storage(url)
    assert str(refused.value) == (
        f"the study database {url} was written by harness 9.0.0 (schema version {newer}); this harness "
        f"{__version__} reads schema version {schema.SCHEMA_VERSION} at most: upgrade the harness on this "
        "machine to the release every machine of the study runs (pip install -U harness)"
    )
    assert isinstance(refused.value, schema.SchemaTooNew)
    with sqlite3.connect(path) as conn:
        assert list(conn.iterdump()) == before  # nothing written


def test_a_migration_that_fails_leaves_the_store_as_it_was(tmp_path, monkeypatch):
    """The steps and the version row are one transaction: a step that fails after creating a
    table leaves no table and no version (the next open tries again, from the start)."""
    path = tmp_path / "optuna_only.db"
    url = f"sqlite:///{path}"
    RDBStorage(url).engine.dispose()  # Optuna's tables only: what a harness first opens
    optuna_tables = tables(path)

    def half_done(conn: sa.Connection) -> None:
        schema.RECORDS.create(conn)
        raise sa.exc.OperationalError("CREATE TABLE harness_sequential_rules", {}, Exception("disk I/O error"))

    monkeypatch.setattr(schema, "MIGRATIONS", (half_done,))
    with pytest.raises(study_db.StorageError, match="cannot set up the harness's tables in .*disk I/O error"):
        study_db.open_storage(url)
    assert tables(path) - optuna_tables <= {"harness_schema"}  # the version table, empty
    assert "harness_records" not in tables(path)
    assert schema.stored_version(sa.create_engine(url)) is None

    monkeypatch.undo()
    study_db.open_storage(url).engine.dispose()
    assert version_rows(path) == [("harness", schema.SCHEMA_VERSION, __version__)]
    assert {"harness_records", "harness_sequential_rules"} <= tables(path)
