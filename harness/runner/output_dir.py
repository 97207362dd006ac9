"""Check a study's output folder before any trial starts: it must exist (or be creatable), take
writes, and have some free space. A full disk or a read-only folder then fails in a second with
one clear line (exit 2), not after hours with trials that cannot write their records.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from harness.errors import HarnessError

MIN_FREE_MB_ENV = "HARNESS_MIN_FREE_MB"
DEFAULT_MIN_FREE_MB = 100.0  # records and logs are small; a full disk is what this catches
_MB = 1024 * 1024
_PROBE_BYTES = 64 * 1024


class OutputDirError(HarnessError):
    """The study's output folder cannot take the study's records."""


def required_free_mb(value: float | None = None) -> float:
    """``value``, else ``$HARNESS_MIN_FREE_MB``, else the default."""
    if value is not None:
        return float(value)
    text = os.environ.get(MIN_FREE_MB_ENV)
    if not text:
        return DEFAULT_MIN_FREE_MB
    try:
        return float(text)
    except ValueError:
        raise OutputDirError(f"{MIN_FREE_MB_ENV}={text!r}: expected a number of megabytes") from None


def _why(err: OSError) -> str:
    return err.strerror or type(err).__name__


def _existing_ancestor(folder: Path) -> Path:
    for path in (folder, *folder.parents):
        if path.exists() or path.is_symlink():
            return path
    return Path(folder.anchor or ".")


def check_output_dir(folder: str | os.PathLike, *, min_free_mb: float | None = None) -> Path:
    """Prove that ``folder`` can take the study's records; raise :class:`OutputDirError` with
    one line otherwise. Creates nothing (a bad storage URL checked next leaves no trace).

    Checks, in order: the nearest existing ancestor is a folder; its disk has at least
    ``min_free_mb`` MB free (``$HARNESS_MIN_FREE_MB``, default 100); a 64 KiB file can be
    written, flushed to disk and removed in the folder (or, before it exists, in that ancestor,
    where it will be created), and in its ``records/`` when that exists.
    """
    folder = Path(folder)
    need = required_free_mb(min_free_mb)
    base = _existing_ancestor(folder.absolute())
    if not base.is_dir():
        raise OutputDirError(f"output folder {folder} cannot be created: {base} is a file, not a folder")
    try:
        free = shutil.disk_usage(base).free
    except OSError as err:
        raise OutputDirError(f"output folder {folder}: cannot read its free space ({_why(err)})") from None
    if free < need * _MB:
        raise OutputDirError(
            f"output folder {folder}: only {free / _MB:.1f} MB free on its disk, need at least "
            f"{need:g} MB (free some space, pick another output_dir, or set {MIN_FREE_MB_ENV})"
        )
    _probe(base, folder)
    if (folder / "records").is_dir():
        _probe(folder / "records", folder)
    return folder


def make_output_dir(folder: str | os.PathLike) -> Path:
    """Create ``folder`` and its ``records/`` (after :func:`check_output_dir`)."""
    folder = Path(folder)
    try:
        (folder / "records").mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutputDirError(f"output folder {folder} cannot be created: {_why(err)}") from None
    return folder


def _probe(where: Path, folder: Path) -> None:
    path = where / f".harness-write-check-{os.getpid()}"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as err:
        raise OutputDirError(f"output folder {folder} is not writable: {_why(err)}") from None
    try:
        try:
            os.write(fd, b"\0" * _PROBE_BYTES)
            os.fsync(fd)
        except OSError as err:
            raise OutputDirError(f"output folder {folder} cannot take writes: {_why(err)}") from None
        finally:
            os.close(fd)
    finally:
        try:
            path.unlink()
        except OSError:
            pass
