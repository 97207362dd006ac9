"""Storage outages: a database that stops answering (a restart, a network cut, a full disk on
the server) is retried with back-off for a bounded time, then reported in one line naming the
storage (password masked) as ``StorageUnavailable``. The queue's read-only queries and
``requeue`` retry on their own (``retried``); a worker wraps its other calls in ``retry_storage``.
A full disk under the database is not an outage (waiting frees no space): it is raised at once
as ``StorageFull``, one line that says so.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import optuna
import sqlalchemy as sa

from harness.ground import console
from harness.ground.urls import redact_url
from harness.store import StorageError, disk_full, error_line
from harness.store.optuna_tables import engine

STORAGE_RETRY_ENV = "HARNESS_STORAGE_RETRY_S"
DEFAULT_STORAGE_RETRY_S = 60.0
_FIRST_BACKOFF_S = 0.25
_MAX_BACKOFF_S = 8.0


class StorageUnavailable(StorageError):
    """The study storage stayed unreachable for longer than the retry bound (or is full)."""


class StorageFull(StorageUnavailable):
    """The study storage's disk is full: said at once, not retried (a worker stops on it as on
    an outage, leaving its claimed trial for another worker)."""


def storage_retry_s(value: float | None = None) -> float:
    """How long a storage outage is retried: ``value``, else ``$HARNESS_STORAGE_RETRY_S``, else 60 s."""
    if value is not None:
        return max(0.0, float(value))
    text = os.environ.get(STORAGE_RETRY_ENV)
    if not text:
        return DEFAULT_STORAGE_RETRY_S
    try:
        return max(0.0, float(text))
    except ValueError:
        raise StorageError(f"{STORAGE_RETRY_ENV}={text!r}: expected a number of seconds") from None


_OUTAGE_TYPES = (sa.exc.OperationalError, sa.exc.InterfaceError, sa.exc.DisconnectionError, sa.exc.TimeoutError)


def _outage_error(err: BaseException) -> BaseException | None:
    """The error in ``err``'s chain that says the database cannot be reached, or None."""
    if disk_full(err) is not None:
        return None  # a full disk: waiting frees no space
    seen: BaseException | None = err
    for _ in range(8):
        if seen is None or isinstance(seen, StorageUnavailable):  # already retried for the whole bound
            return None
        if isinstance(seen, _OUTAGE_TYPES):
            return seen
        if isinstance(seen, sa.exc.DBAPIError) and seen.connection_invalidated:
            return seen
        if type(seen).__name__ in {"OperationalError", "InterfaceError"}:  # a driver's own (sqlite3, psycopg)
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def is_outage(err: BaseException) -> bool:
    """Whether ``err`` (or an error it came from: Optuna wraps driver errors in
    ``StorageInternalError``) says the database cannot be reached or used right now: a refused or
    dropped connection, a locked SQLite file, a server shutting down. Programming errors and
    integrity errors are not outages."""
    return _outage_error(err) is not None


def _first_line(err: BaseException, url: str | None, limit: int = 200) -> str:
    return error_line(_outage_error(err) or err, url, limit)  # the driver's words, not Optuna's wrapper's


_retrying = threading.local()
_down_since: dict[str, float] = {}  # storages announced unreachable (once per outage, not per call)


def retry_storage(
    call: Callable[[], Any],
    *,
    what: str,
    where: str,
    url: str | None = None,
    bound_s: float | None = None,
    say: Callable[[str], None] | None = console.say,
    stop: threading.Event | None = None,
    nested: bool = False,
) -> Any:
    """``call()``, tried again with back-off (0.25 s doubling to 8 s) while the storage is
    unreachable (:func:`is_outage`), for at most ``bound_s`` seconds from the first failure
    (:func:`storage_retry_s`). Then, or as soon as ``stop`` is set during an outage, raises
    :class:`StorageUnavailable` with one line naming the storage ``where`` (a redacted URL) and
    the last error (``url``'s secrets masked in it). Any other error is raised at once.

    ``say`` gets one line when an outage starts and one when it ends (once per storage, however
    many calls run into the outage). Inside another
    ``retry_storage`` of the same thread the call is made once, unretried (the outer one retries
    the whole operation), unless ``nested=True``.
    """
    if getattr(_retrying, "depth", 0) and not nested:
        return call()
    bound = storage_retry_s(bound_s)
    first: float | None = None
    delay = _FIRST_BACKOFF_S
    _retrying.depth = getattr(_retrying, "depth", 0) + 1
    try:
        while True:
            try:
                result = call()
            except Exception as err:
                full = disk_full(err)
                if full is not None:
                    raise StorageFull(
                        f"the study storage {where} is full: {what} failed ({error_line(full, url, 200)}); "
                        "free space on the database's disk, then run again"
                    ) from None
                if not is_outage(err):
                    raise
                now = time.monotonic()
                if first is None:
                    first = now
                    if say is not None and where not in _down_since:
                        say(
                            f"the study storage {where} is unreachable ({what}: {_first_line(err, url)}); "
                            f"retrying for up to {bound:g}s"
                        )
                    _down_since.setdefault(where, now)
                left = bound - (now - first)
                if left <= 0 or (stop is not None and stop.is_set()):
                    raise StorageUnavailable(
                        f"the study storage {where} is unreachable: {what} failed for {now - first:.0f}s "
                        f"(retried up to {bound:g}s; last error {_first_line(err, url)})"
                    ) from None
                pause = min(delay, left)
                delay = min(delay * 2, _MAX_BACKOFF_S)
                if stop is not None:
                    stop.wait(pause)
                else:
                    time.sleep(pause)
                continue
            down = _down_since.pop(where, None)
            if down is not None and say is not None:
                say(f"the study storage {where} answers again ({what}, after {time.monotonic() - down:.0f}s)")
            return result
    finally:
        _retrying.depth -= 1


def _storage_url(study: optuna.Study) -> str | None:
    try:
        return engine(study).url.render_as_string(hide_password=False)
    except Exception:  # noqa: BLE001 - only for messages
        return None


def retried(what: str, *, nested: bool = False):
    """Retry a queue function (its first argument is the study) through storage outages."""

    def wrap(fn):
        @functools.wraps(fn)
        def inner(study, *args, **kwargs):
            url = _storage_url(study)
            return retry_storage(
                lambda: fn(study, *args, **kwargs),
                what=what,
                where=redact_url(url) if url else "(unknown)",
                url=url,
                nested=nested,
            )

        return inner

    return wrap
