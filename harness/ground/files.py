"""The one file lock and the one atomic write (of one file, or of a set of files all or none)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import BinaryIO


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
    failure the temporary is removed and the ``OSError`` names ``path``.

    The file gets the mode a plain ``open`` would give it: ``path``'s own when it replaces one
    (a file the user made private stays private), else 0o666 less the user's umask, applied by the
    kernel (``tempfile``'s 0o600 would make every report and record private whatever the umask)."""
    payload = data.encode(encoding) if isinstance(data, str) else data
    try:
        handle, name = _new_temporary(path)
    except OSError as err:
        raise _naming(err, path) from err
    try:
        with handle:
            with contextlib.suppress(FileNotFoundError):
                os.fchmod(handle.fileno(), stat.S_IMODE(path.stat().st_mode))
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException as err:
        Path(name).unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise _naming(err, path) from err
        raise
    return name


#: tries at a fresh temporary name before giving up (each name has 64 random bits)
_NAME_TRIES = 100


def _new_temporary(path: Path) -> tuple[BinaryIO, str]:
    """A new, uniquely named file beside ``path``, open for writing, and its name; created with
    mode 0o666 so that the kernel applies the umask."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(_NAME_TRIES):
        name = str(path.parent / f".{path.name}.{secrets.token_hex(8)}.partial")
        try:
            return os.fdopen(os.open(name, flags, 0o666), "wb"), name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(path))


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
