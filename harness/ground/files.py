"""The one file lock and the one atomic write."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def file_lock(path: str | os.PathLike, *, wait: bool = True) -> Iterator[bool]:
    """An exclusive advisory lock (``flock``) on the file ``path``, created with its folder.

    Yields True while the lock is held; with ``wait=False`` it yields False at once when another
    process holds it. The lock goes with the process, so a killed holder never leaves it stuck.
    When the lock file cannot be opened (a full disk, a read-only folder) the block runs
    unlocked: the callers' writes are atomic on their own, and the lock only orders them.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+")  # noqa: SIM115 - closed below
    except OSError:
        yield True
        return
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    finally:
        handle.close()


def atomic_write(path: str | os.PathLike, data: bytes | str, *, encoding: str = "utf-8") -> Path:
    """Write ``data`` to ``path`` whole or not at all: a uniquely named temporary file in the same
    folder, flushed to disk, then renamed over ``path``, and the folder flushed so that the rename
    survives a crash too. A reader sees the old file or the new one, never a part; a write that
    fails (a full disk) leaves the old file and no temporary."""
    path = Path(path)
    payload = data.encode(encoding) if isinstance(data, str) else data
    handle = tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".partial", delete=False)
    try:
        with handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(handle.name, path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
    _sync_folder(path.parent)
    return path


def _sync_folder(folder: Path) -> None:
    """Flush a folder's entries (a rename in it) to disk; a file system that cannot is let be."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
