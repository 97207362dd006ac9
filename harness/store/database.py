"""Opening the study database: one SQL database (an Optuna RDB storage, SQLite by default,
PostgreSQL on many machines) that holds each study's trial queues, in Optuna's tables, and the
harness's own tables next to them. Opening it checks the harness's tables, and brings those of
an earlier release up to date (:mod:`.schema`).
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from optuna.storages import RDBStorage

from harness.ground.urls import redact_url, sqlite_file
from harness.store.errors import StorageError, error_line
from harness.store.schema import prepare


def default_storage_url(study_dir: str | Path) -> str:
    return f"sqlite:///{(Path(study_dir) / 'optuna.db').resolve()}"


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite:")


def open_storage(url: str, *, create: bool = False) -> RDBStorage:
    """An RDB storage for ``url``.

    ``create=True`` creates Optuna's schema: do that once, from one process, before any worker
    opens the storage (concurrent schema creation on a fresh SQLite file fails). Workers open it
    with ``create=False``. Either way the harness's own tables are checked (:func:`.schema.prepare`):
    made with their version when missing, an earlier release's brought up to date in place, a
    newer release's refused (a ``StorageError``, one line).
    """
    storage = _open_rdb(url, create)
    try:
        prepare(storage.engine)
    except BaseException:
        storage.engine.dispose()
        raise
    return storage


def _open_rdb(url: str, create: bool) -> RDBStorage:
    """Optuna's storage for ``url``, every failure one line (a ``StorageError``)."""
    engine_kwargs: dict[str, Any] = {}
    if is_sqlite(url):
        path = _sqlite_path(url)
        if not create and path is not None and not path.exists():
            raise StorageError(f"no study database at {redact_url(url)}; start the study with `harness run` first")
        # Several worker processes write the same file: wait for the lock instead of failing
        # (for as long as the URL says, when it says: sqlite:///x.db?timeout=30).
        if "timeout" not in dict(parse_qsl(urlsplit(url).query)):
            engine_kwargs["connect_args"] = {"timeout": 120}
    else:
        engine_kwargs["pool_pre_ping"] = True
    try:
        for attempt in range(_SCHEMA_RACE_TRIES):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    return RDBStorage(url, engine_kwargs=engine_kwargs, skip_table_creation=not create)
            except Exception as err:
                if attempt + 1 == _SCHEMA_RACE_TRIES or not _schema_race(err):
                    raise
                time.sleep(0.5 * (attempt + 1))  # another process is creating the schema
    except Exception as err:  # noqa: BLE001 - any driver error becomes one readable line
        if not create and _schema_race(err):
            raise StorageError(
                f"the Optuna storage {redact_url(url)} is not set up for the harness yet; "
                "start the study with `harness run` first"
            ) from None
        line = error_line(err, url)
        if isinstance(err, ImportError) and url.startswith("postgres"):
            line += " (for PostgreSQL: pip install 'harness[postgres]', which brings psycopg)"
        raise StorageError(f"cannot open the Optuna storage {redact_url(url)}: {line}") from None


_SCHEMA_RACE_TRIES = 6


def _sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL, its query string aside; a URL SQLAlchemy cannot read is a ``StorageError``."""
    try:
        return sqlite_file(url)
    except ValueError as err:
        raise StorageError(f"cannot read the SQLite URL {redact_url(url)}: {err}") from None


def _chain_text(err: BaseException) -> str:
    """``err`` and the errors it came from (Optuna wraps driver errors), as lower-case text."""
    parts, seen = [], err
    for _ in range(5):
        if seen is None:
            break
        parts.append(f"{type(seen).__name__} {seen}".lower())
        seen = seen.__cause__ or seen.__context__
    return " | ".join(parts)


def _schema_race(err: BaseException) -> bool:
    """Whether ``err`` may be two processes setting up a fresh database at once.

    Opening an RDB storage writes its version tables even with ``skip_table_creation`` (Optuna's
    alembic stamp), so a ``harness worker`` that opens a new PostgreSQL database while
    ``harness run`` creates the schema either collides with it on a unique index or finds a
    table missing; it simply tries again a moment later.

    A database missing on the server (``database "x" does not exist``) is none of these: it is
    reported as it is, since ``harness run`` cannot create a PostgreSQL database.
    """
    text = _chain_text(err)
    return any(
        k in text
        for k in (
            "integrityerror",
            "uniqueviolation",
            "duplicate key",
            "already exists",
            "undefinedtable",
            "no such table",
        )
    )
