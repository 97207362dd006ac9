"""The study database: one SQL database (an Optuna RDB storage, SQLite by default, PostgreSQL
on many machines) that holds each study's trial queues and a copy of every finished record.

This module opens it and names what is stored there: the queue names of a study and the
attributes of a job. The queue operations are the runner's (``harness.runner.queue``); the
record copies are ``harness.tracking.shared_records``.
"""

from __future__ import annotations

import errno
import re
import time
import warnings
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from optuna.storages import RDBStorage
from optuna.trial import TrialState

from harness.errors import HarnessError, squeeze
from harness.tracking.urls import redact_text, redact_url

# user_attrs of a job
TRIAL_ID = "trial_id"  # compare jobs: the TrialSpec's trial_id
SLOT = "slot"  # tune jobs: 0..n_trials-1 of the arm's budget
ARM = "arm"
SEED = "seed"
PHASE = "phase"  # "compare" or "tune"
SPEC = "spec"  # compare jobs: TrialSpec.model_dump(mode="json")
ATTEMPT = "attempt"  # 1, 2, ...
MAX_ATTEMPT = "max_attempt"  # a failure is re-queued while attempt < max_attempt
REASON = "reason"  # why the job failed (or was re-queued)
WORKER = "worker"  # who ran it: host/pid and device
TRIAL_IDS = "trial_ids"  # tune jobs: the trial ids of its per-seed runs
EXECUTOR_JOB = "executor_job"  # Slurm or Ray: the scheduler's job of the current attempt (id, name, logs)

STATE_NAMES = {
    TrialState.COMPLETE: "completed",
    TrialState.RUNNING: "running",
    TrialState.WAITING: "waiting",
    TrialState.FAIL: "failed",
    TrialState.PRUNED: "failed",
}


class StorageError(HarnessError):
    """The Optuna storage cannot be opened, or holds no such study."""


class StorageUnreadable(StorageError):
    """The study's storage could not be read while loading its results (its message names the
    storage and the cause, without credentials); raised where the read fails, and a warning
    instead unless the caller asked for all or nothing (``load_results(strict_storage=True)``)."""


def compare_study_name(study_name: str) -> str:
    return study_name


def tune_study_name(study_name: str, arm: str, space: str) -> str:
    """The tuning queue of one arm over one search space (``space``: its key): a changed space
    starts a new tuning phase instead of reusing trials drawn from the old one."""
    return f"{study_name}.tune.{arm}.{space}"


def default_storage_url(study_dir: str | Path) -> str:
    return f"sqlite:///{(Path(study_dir) / 'optuna.db').resolve()}"


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite:")


def open_storage(url: str, *, create: bool = False) -> RDBStorage:
    """An RDB storage for ``url``.

    ``create=True`` creates the schema: do that once, from one process, before any worker opens
    the storage (concurrent schema creation on a fresh SQLite file fails). Workers open it with
    ``create=False``.
    """
    engine_kwargs: dict[str, Any] = {}
    if is_sqlite(url):
        path = url.split(":///", 1)[-1]
        if not create and path and not Path(path).exists():
            raise StorageError(f"no study database at {redact_url(url)}; start the study with `harness run` first")
        # Several worker processes write the same file: wait for the lock instead of failing.
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


def driver_error(err: BaseException) -> BaseException:
    """The error under Optuna's wrappers: Optuna reports every failed commit as a
    ``StorageInternalError`` ("invalid data in the commit"), whatever the database said."""
    seen = err
    for _ in range(8):
        below = seen.__cause__ or seen.__context__
        if below is None or not type(seen).__module__.startswith("optuna"):
            break
        seen = below
    return seen


def error_line(err: BaseException, url: str | None, limit: int = 300) -> str:
    """The one way a study-database error is written: ``Type: message`` on one line, in the
    database driver's words (not Optuna's wrapper's, nor SQLAlchemy's ``(psycopg.X)`` prefix),
    with the secrets of ``url`` masked."""
    err = driver_error(err)
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    text = re.sub(r"^\([\w.]+\)\s*", "", text)  # SQLAlchemy's "(psycopg.OperationalError) " prefix
    text = redact_text(text, url) if url else text
    return squeeze(f"{type(err).__name__}: {text}" if text else type(err).__name__, limit)


_DISK_FULL_TEXTS = ("database or disk is full", "no space left on device", "diskfull")  # SQLite, OS, PostgreSQL


def disk_full(err: BaseException) -> BaseException | None:
    """The error in ``err``'s chain that says the study database's disk is full (``ENOSPC``,
    SQLite's "database or disk is full", PostgreSQL's ``DiskFull``), or None. A full disk is
    not an outage: waiting does not free space, so it is reported at once."""
    seen: BaseException | None = err
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, OSError) and seen.errno == errno.ENOSPC:
            return seen
        if any(text in f"{type(seen).__name__} {seen}".lower() for text in _DISK_FULL_TEXTS):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


_SCHEMA_RACE_TRIES = 6


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


def create_table_once(engine: sa.Engine, table: sa.Table) -> None:
    """Create ``table`` (one of the harness's own tables in the study database) if it is missing,
    safely when several processes try at once."""
    if sa.inspect(engine).has_table(table.name):
        return
    try:
        table.create(engine, checkfirst=True)
    except sa.exc.SQLAlchemyError:
        # Another process created it between the check and the CREATE (PostgreSQL raises then).
        if not sa.inspect(engine).has_table(table.name):
            raise
