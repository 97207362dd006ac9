"""What goes wrong with the study database, said one way: the error type every caller catches,
and the one line a driver's error becomes (in the driver's words, credentials masked)."""

from __future__ import annotations

import errno
import re

from harness.errors import HarnessError, squeeze
from harness.ground.urls import redact_text


class StorageError(HarnessError):
    """The study database cannot be opened or read, holds no such study, or was written by a
    harness this one cannot read."""


class StorageUnreadable(StorageError):
    """The study's storage could not be read while loading its results (its message names the
    storage and the cause, without credentials); raised where the read fails, and a warning
    instead unless the caller asked for all or nothing (``load_results(strict_storage=True)``)."""


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
