"""The one file lock and the one atomic write (of one file, or of a set of files all or none)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator, Mapping
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
    fails (a full disk) leaves the old file and no temporary, and its ``OSError`` names ``path``."""
    return atomic_write_all({path: data}, encoding=encoding)[0]


def atomic_write_all(files: Mapping[str | os.PathLike, bytes | str], *, encoding: str = "utf-8") -> list[Path]:
    """Write a set of files (path -> data) all or none: each goes to a temporary file in its own
    folder first, flushed to disk, and only when every one is written are they renamed over their
    paths (then the folders flushed). A write that fails (a full disk at the second file) removes
    every temporary and leaves every previous file as it was; the ``OSError`` it raises names the
    file that could not be written, not its temporary. Returns the paths, in the given order.

    The renames need no space and cannot fail on a full disk; between two of them a reader may see
    some files new and others old, never a part of one.
    """
    written: list[tuple[Path, str]] = []
    try:
        for path, data in files.items():
            target = Path(path)
            written.append((target, _write_temporary(target, data, encoding)))
        for target, temporary in written:
            os.replace(temporary, target)
    except BaseException:
        for _, temporary in written:
            Path(temporary).unlink(missing_ok=True)
        raise
    for folder in dict.fromkeys(target.parent for target, _ in written):
        _sync_folder(folder)
    return [target for target, _ in written]


def _write_temporary(path: Path, data: bytes | str, encoding: str) -> str:
    """``data`` in a new temporary file beside ``path``, flushed to disk; returns its name. On
    failure the temporary is removed and the ``OSError`` names ``path``."""
    payload = data.encode(encoding) if isinstance(data, str) else data
    try:
        handle = tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".partial", delete=False)  # noqa: SIM115 - closed below
    except OSError as err:
        raise _naming(err, path) from err
    try:
        with handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException as err:
        Path(handle.name).unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise _naming(err, path) from err
        raise
    return handle.name


def _naming(err: OSError, path: Path) -> OSError:
    """``err`` (same errno, so the same subclass) with ``path`` as its file name."""
    return OSError(err.errno, err.strerror or str(err), str(path))


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
