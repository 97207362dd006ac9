"""A full disk under the study database is reported as such, at once, in one line: it is not an
outage (waiting frees no space), so it is neither called "unreachable" nor retried for a minute."""

from __future__ import annotations

import errno
import sqlite3
import time

import pytest
import sqlalchemy as sa
from optuna.exceptions import StorageInternalError

from harness.runner.queue.outages import is_outage, retry_storage
from harness.store import StorageError

URL = "postgresql://harness:s3cret-pw@db.example:5432/study"


def wrapped(driver_error: BaseException) -> StorageInternalError:
    """``driver_error`` as it reaches the harness: SQLAlchemy's error inside Optuna's wrapper."""
    try:
        try:
            raise sa.exc.OperationalError("INSERT INTO trials ...", {}, driver_error)
        except sa.exc.OperationalError as err:
            raise StorageInternalError("An exception is raised during the commit.") from err
    except StorageInternalError as err:
        return err


class DiskFull(Exception):  # psycopg.errors.DiskFull's name (SQLSTATE 53100), without the driver
    pass


FULL = {
    "sqlite": sqlite3.OperationalError("database or disk is full"),
    "postgresql": DiskFull('could not extend file "base/16384/2619": No space left on device'),
    "os": OSError(errno.ENOSPC, "No space left on device"),
}


@pytest.mark.parametrize("kind", sorted(FULL))
def test_a_full_disk_is_said_at_once_not_retried_as_an_outage(kind):
    err = wrapped(FULL[kind])
    assert not is_outage(err)
    said: list[str] = []
    calls: list[float] = []

    def write():
        calls.append(time.monotonic())
        raise err

    start = time.monotonic()
    with pytest.raises(StorageError) as caught:  # the worker stops on it with this one line
        retry_storage(
            write,
            what="recording the result",
            where="postgresql://harness:***@db.example:5432/study",
            url=URL,
            bound_s=3,
            say=said.append,
        )
    assert time.monotonic() - start < 1 and len(calls) == 1  # not retried
    message = str(caught.value)
    assert "\n" not in message and "s3cret-pw" not in message
    assert "unreachable" not in message and not said
    assert message.startswith(
        "the study storage postgresql://harness:***@db.example:5432/study is full: recording the result failed ("
    )
    assert "free space on the database's disk" in message


def test_an_outage_is_still_an_outage():
    refused = wrapped(sqlite3.OperationalError("unable to open database file"))
    assert is_outage(refused)
