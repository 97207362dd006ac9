"""The checked cache: entries that are built once, kept in a folder, and trusted only while their
bytes are the ones that were built. The warm start, the reward models and the probe's results
keep their entries this way.

One entry is one folder. Its files are written by the entry's builder; ``manifest.json`` is
written last and atomically: the fields that say what the entry is (its key), what the builder
records, the sha256 of every other file and, over all of those fields, their own sha256
(``manifest_sha256``, of their canonical JSON), so an edit of a field (a metric, the key, a
file's checksum beside the file it describes) is caught like an edit of a file. A folder without
a manifest is unfinished (a build that stopped). Everything happens under a lock beside the
folder (``<folder>.lock``), so two processes that want the same entry build it once, and neither
reads a half-written one.

``get_or_build`` is the whole protocol: under the lock, an entry whose manifest is readable,
matches its own checksum, records the expected key and lists file checksums that all match is
loaded as it is; anything else (a missing, extra or changed file, a bad or edited manifest, an
entry its loader refuses) is reported in one line through ``on_unusable`` and rebuilt, under the
same lock. Torch-free: any part may use it.

A manifest written before fields were checksummed is rebuilt too (one line says so): its fields
cannot be told apart from edited ones, and every builder here is seeded, so the rebuild gives
the same entry; adopting it would stamp a checksum on fields nobody checked.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from harness.errors import one_line
from harness.ground.files import atomic_write, file_lock

MANIFEST_FILE = "manifest.json"  # written last: {"sha256": {file: digest}, ...the key, ...what the builder records,
#                                   FIELDS_SHA256: the sha256 of all the others}
FIELDS_SHA256 = "manifest_sha256"

W = TypeVar("W")  # what an entry's work produces, before anything is written
T = TypeVar("T")  # what a caller gets from an entry

Manifest = dict[str, Any]


class Unusable(Exception):
    """Why a cached entry cannot be used as it is, in one line."""


@dataclass(frozen=True)
class Entry(Generic[T]):
    """A usable entry: what its loader (or its builder) gave, its manifest as stored, and whether
    it came from the cache (``cached``) or was built now."""

    value: T
    manifest: Manifest
    cached: bool


def get_or_build(
    folder: str | Path,
    *,
    key_fields: Mapping[str, Any],
    work: Callable[[], W],
    save: Callable[[Path, W], tuple[Manifest, T]],
    load: Callable[[Path, Manifest], T],
    on_unusable: Callable[[str], None],
    adopt: Callable[[Path], tuple[Manifest, T]] | None = None,
) -> Entry[T]:
    """The entry in ``folder``, checked and loaded, or built there now.

    - ``key_fields``: what the entry is (e.g. ``{"key": ...}``); written into the manifest, and an
      entry whose manifest records other values is unusable. ``{}`` when the folder's name says it all.
    - ``work()``: the part of a build that can fail or take long (training, sampling, probing). It
      runs before the folder is touched, so a build that fails leaves what was there.
    - ``save(folder, work_result) -> (fields, value)``: writes the entry's files into the emptied
      ``folder``; ``fields`` go into the manifest beside the key and the checksums, ``value`` is
      what the caller gets (e.g. the model as loaded back from the folder).
    - ``load(folder, manifest) -> value``: a checked entry (its files match their checksums)
      read back; it raises ``Unusable`` for an entry it cannot use (a field missing, a load error).
    - ``on_unusable(line)``: told, in one line, why an entry is rebuilt (e.g. ``warnings.warn``).
    - ``adopt(folder) -> (fields, value)``: for a folder with files but no manifest (from before
      checksums), a check of another kind; when it passes, the folder gets its manifest and is kept.
      Without it, such a folder is unfinished and is rebuilt.
    """
    folder = Path(folder)
    with file_lock(folder.with_name(folder.name + ".lock")):
        if folder.is_dir() and any(folder.iterdir()):
            try:
                return _open(folder, key_fields, load, adopt)
            except Unusable as problem:
                on_unusable(str(problem))
        done = work()
        _clear(folder)
        fields, value = save(folder, done)
        return Entry(value, _write_manifest(folder, {**fields, **key_fields}), cached=False)


def read_manifest(folder: Path) -> Manifest:
    """The manifest of ``folder`` as a JSON object whose fields match their own checksum (the
    files' checksums unchecked: see ``verify``), or ``Unusable``."""
    path = folder / MANIFEST_FILE
    if not path.is_file():
        raise Unusable(f"{MANIFEST_FILE} is missing (the build did not finish)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise Unusable(f"{MANIFEST_FILE} is unreadable ({one_line(err, limit=300)})") from err
    if not isinstance(manifest, dict):
        raise Unusable(f"{MANIFEST_FILE} is not a JSON object")
    if FIELDS_SHA256 not in manifest:
        raise Unusable(f"{MANIFEST_FILE} carries no checksum of its own fields (written by an older harness)")
    if manifest[FIELDS_SHA256] != fields_sha256(manifest):
        raise Unusable(f"{MANIFEST_FILE} was edited after it was written (its fields do not match its {FIELDS_SHA256})")
    return manifest


def fields_sha256(manifest: Manifest) -> str:
    """The sha256 of ``manifest``'s fields but ``FIELDS_SHA256``, as canonical JSON (sorted keys,
    no spaces, UTF-8): the same fields give the same digest whatever the file's layout."""
    fields = {name: value for name, value in manifest.items() if name != FIELDS_SHA256}
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def verify(folder: Path, manifest: Manifest) -> None:
    """``Unusable`` unless ``folder`` holds exactly the files ``manifest`` lists, each with its sha256."""
    digests = manifest.get("sha256")
    if not (isinstance(digests, dict) and all(isinstance(v, str) for v in digests.values())):
        raise Unusable(f"{MANIFEST_FILE} does not list the files' sha256 checksums")
    names = {p.name for p in _saved_files(folder)}
    missing = sorted(set(digests) - names)
    if missing:
        raise Unusable(f"{', '.join(missing)} listed in {MANIFEST_FILE} but missing")
    extra = sorted(names - set(digests))
    if extra:
        raise Unusable(f"{', '.join(extra)} not listed in {MANIFEST_FILE}")
    for name in sorted(digests):
        if _sha256(folder / name) != digests[name]:
            raise Unusable(f"{name} does not match its sha256 in {MANIFEST_FILE}")


def _open(
    folder: Path,
    key_fields: Mapping[str, Any],
    load: Callable[[Path, Manifest], T],
    adopt: Callable[[Path], tuple[Manifest, T]] | None,
) -> Entry[T]:
    if adopt is not None and not (folder / MANIFEST_FILE).exists():
        fields, value = adopt(folder)
        return Entry(value, _write_manifest(folder, {**fields, **key_fields}), cached=True)
    manifest = read_manifest(folder)
    for name, expected in key_fields.items():
        if manifest.get(name) != expected:
            raise Unusable(f"{MANIFEST_FILE} records {name} {manifest.get(name)!r}, not {expected!r}")
    verify(folder, manifest)
    return Entry(load(folder, manifest), manifest, cached=True)


def _clear(folder: Path) -> None:
    """``folder``, emptied: its old files unlinked, not overwritten (a process still reading one
    keeps it)."""
    if folder.is_dir():
        shutil.rmtree(folder)
    elif folder.exists():
        folder.unlink()
    folder.mkdir(parents=True)


def _saved_files(folder: Path) -> list[Path]:
    """The files a manifest covers: all but itself and hidden temporaries."""
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name != MANIFEST_FILE and not p.name.startswith("."))


def _sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _write_manifest(folder: Path, fields: Manifest) -> Manifest:
    """``fields``, every file's sha256 and the checksum of both as ``folder``'s manifest, whole or
    absent; returned as a later load reads it (JSON's types: a tuple comes back a list, which is
    also what the fields' checksum is taken of)."""
    digests = {p.name: _sha256(p) for p in _saved_files(folder)}
    manifest = json.loads(json.dumps({**fields, "sha256": digests}))
    manifest[FIELDS_SHA256] = fields_sha256(manifest)
    atomic_write(folder / MANIFEST_FILE, json.dumps(manifest, indent=2, sort_keys=True))
    return manifest
