"""Cache folders whose bytes are checked, shared by the warm start and the reward model: a lock
beside each folder, a manifest of every file's sha256 written last and atomically (a folder
without one is unfinished), and the check of a folder against its manifest.

``Unusable`` says, in one line, why a cached folder cannot be used as it is; its caller warns
and rebuilds it under the same lock.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any

MANIFEST_FILE = "manifest.json"  # written last: {"sha256": {file: digest}, ...what its builder records}


class Unusable(Exception):
    """Why a cached folder cannot be used, in one line."""


@contextmanager
def locked(path: Path):
    """An exclusive lock on the file ``path`` (created, with its folder) while the block runs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def saved_files(folder: Path) -> list[Path]:
    """The files a manifest covers: all but itself and hidden temporaries."""
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name != MANIFEST_FILE and not p.name.startswith("."))


def sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def write_manifest(folder: Path, fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` and every file's sha256 as ``folder``'s manifest, atomically (whole or absent);
    returns it as a later load reads it."""
    manifest = {**fields, "sha256": {p.name: sha256(p) for p in saved_files(folder)}}
    partial = folder / f".{MANIFEST_FILE}.partial"
    partial.write_text(json.dumps(manifest, indent=2, sort_keys=True))
    os.replace(partial, folder / MANIFEST_FILE)
    return json.loads((folder / MANIFEST_FILE).read_text())


def verify(folder: Path, digests: dict[str, str]) -> None:
    """``Unusable`` unless ``folder`` holds exactly the files ``digests`` lists, each with its sha256."""
    names = {p.name for p in saved_files(folder)}
    missing = sorted(set(digests) - names)
    if missing:
        raise Unusable(f"{', '.join(missing)} listed in {MANIFEST_FILE} but missing")
    extra = sorted(names - set(digests))
    if extra:
        raise Unusable(f"{', '.join(extra)} not listed in {MANIFEST_FILE}")
    for name in sorted(digests):
        if sha256(folder / name) != digests[name]:
            raise Unusable(f"{name} does not match its sha256 in {MANIFEST_FILE}")


def one_line(err: BaseException) -> str:
    """``Type: message`` on one line, at most 300 characters."""
    text = " ".join(f"{type(err).__name__}: {err}".split())
    return text if len(text) <= 300 else text[:297] + "..."
