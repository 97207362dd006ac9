"""Trial records in the shared storage, so that results reach every machine.

A worker writes each trial's record to the study folder of the machine it runs on (the
authoritative copy there, :mod:`harness.tracking.records`). When a study runs on several machines, each
folder holds only that machine's trials. So that they come together anywhere, a worker also
stores every record it writes in the study's Optuna storage database (a table of the harness's
own, ``harness_records``, next to Optuna's: :mod:`harness.store.records`), in the same transaction
as the trial's final Optuna state (``harness.runner.queue.fencing.commit``):

1. fence check, 2. local record (``records/<trial_id>.json``), 3. this table and the Optuna state
together, 4. MLflow mirror.

- :func:`import_records` copies the records a local folder lacks from the table (idempotent):
  ``harness mirror-to-mlflow/results/report/status --storage URL`` do it.
- :meth:`RecordStore.completed` lets a worker skip a trial whose completed record exists on any
  machine (it died after writing the record but before telling Optuna).
- :func:`publish_missing` sends local records the table lacks (a worker that lost its database
  connection between steps 2 and 3); ``harness mirror-to-mlflow --storage URL`` does it.

Every attempt is kept (unique by study, trial id and attempt); the highest attempt of a trial
is its current record, as in the local folder. Where a local record and the stored copy of the
same attempt differ (a local file edited after it was written: a program trainer can write the
study folder, not the database), the stored copy wins, with one warning line naming the file; a
local file that does not match its checksum is not read at all (``records.RecordMismatch``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import HarnessError
from harness.ground.console import warn_once
from harness.store import open_storage
from harness.store import records as record_table
from harness.tracking.records import (
    TrialRecord,
    archive_failed,
    failed_record_path,
    read_failed_attempts,
    read_record,
    read_records,
    record_path,
    write_record,
)
from harness.tracking.study_ref import resolve_study, study_name

if TYPE_CHECKING:
    import sqlalchemy as sa


def _newer(a: TrialRecord, b: TrialRecord | None) -> bool:
    """Whether ``a`` supersedes ``b``: a later attempt; for the same attempt, a completed one."""
    if b is None:
        return True
    return (a.attempt, a.status == "completed") > (b.attempt, b.status == "completed")


def _differs(stored: TrialRecord, local: TrialRecord | None) -> bool:
    """Whether ``local`` is the same attempt as ``stored`` (and as complete) with other content."""
    return (
        local is not None
        and (stored.attempt, stored.status) == (local.attempt, local.status)
        and stored.fingerprint() != local.fingerprint()
    )


def _say_differs(study_dir: str | os.PathLike | None, record: TrialRecord) -> None:
    where = record_path(study_dir, record.trial_id) if study_dir is not None else f"of trial {record.trial_id}"
    warn_once(
        f"the local record {where} differs from the shared storage's copy of attempt {record.attempt}; "
        "the storage's copy is used"
    )


class RecordStore:
    """The records of one study in a storage database (an SQLAlchemy engine): the rows of
    :mod:`harness.store.records`, read back as trial records."""

    def __init__(self, engine: sa.Engine, study: str):
        self.engine, self.study = engine, study

    @classmethod
    def of(cls, storage, study: str) -> RecordStore:
        """The store living in an Optuna ``RDBStorage``'s database."""
        return cls(storage.engine, study)

    def put(self, record: TrialRecord) -> None:
        """Store ``record`` (replaces a stored copy of the same attempt)."""
        record_table.put(self.engine, self.study, record)

    def _select(self, **where) -> list[TrialRecord]:
        out = []
        for text in record_table.texts(self.engine, self.study, **where):
            try:
                out.append(TrialRecord.model_validate_json(text))
            except ValueError:
                continue  # a record this version cannot read: the local copy, if any, stays
        return out

    def completed(self, trial_id: str) -> TrialRecord | None:
        """The latest completed record of ``trial_id`` stored by any machine, or None."""
        done = self._select(trial_id=trial_id, status="completed")
        return done[-1] if done else None

    def all_attempts(self) -> list[TrialRecord]:
        """Every stored record of the study, by (trial id, attempt)."""
        return self._select()

    def latest(self) -> dict[str, TrialRecord]:
        """Each trial's current record (its highest attempt)."""
        out: dict[str, TrialRecord] = {}
        for record in self.all_attempts():
            if _newer(record, out.get(record.trial_id)):
                out[record.trial_id] = record
        return out

    def fingerprints(self) -> set[tuple[str, int, str]]:
        return record_table.fingerprints(self.engine, self.study)


def merge(
    local: list[TrialRecord], stored: dict[str, TrialRecord], study_dir: str | os.PathLike | None = None
) -> list[TrialRecord]:
    """Local records, completed by stored ones they lack or that are newer (a later attempt ran
    on another machine), and replaced by the stored copy of the same attempt where the two differ
    (one warning line each, naming the file in ``study_dir``); sorted by trial id."""
    out = {r.trial_id: r for r in local}
    for trial_id, record in stored.items():
        if _differs(record, out.get(trial_id)):
            _say_differs(study_dir, record)
            out[trial_id] = record
        elif _newer(record, out.get(trial_id)):
            out[trial_id] = record
    return [out[k] for k in sorted(out)]


# --------------------------------------------------------------------------------------------
# import / publish


@dataclass
class ImportReport:
    imported: int = 0  # current records written to records/
    archived: int = 0  # earlier failed attempts written to records/failed/
    present: int = 0  # already in the local folder

    def __str__(self) -> str:
        text = f"{self.imported} records imported from the storage, {self.present} already here"
        if self.archived:
            text += f", {self.archived} earlier failed attempts archived"
        return text


def _local(path: Path) -> TrialRecord | None:
    if not path.exists():
        return None
    try:
        return read_record(path)
    except HarnessError:
        return None


def import_records(study_dir: str | os.PathLike, store: RecordStore) -> ImportReport:
    """Write into ``<study_dir>/records`` every stored record the folder lacks (idempotent).

    A trial's current record is replaced only by a later attempt (``write_record`` archives the
    old one); earlier failed attempts go to ``records/failed/`` like local ones.
    """
    report = ImportReport()
    attempts = store.all_attempts()
    current: dict[str, TrialRecord] = {}
    for record in attempts:
        if _newer(record, current.get(record.trial_id)):
            current[record.trial_id] = record
    for trial_id, record in current.items():
        here = _local(record_path(study_dir, trial_id))
        if _differs(record, here):
            _say_differs(study_dir, record)
        elif here is not None and not _newer(record, here):
            report.present += 1
            continue
        write_record(study_dir, record)
        report.imported += 1
    for record in attempts:
        if record.status != "failed" or current.get(record.trial_id) is record:
            continue
        if not failed_record_path(study_dir, record.trial_id, record.attempt).exists():
            archive_failed(study_dir, record)
            report.archived += 1
    return report


def publish_missing(study_dir: str | os.PathLike, store: RecordStore) -> int:
    """Store every local record (current and archived failed attempts) the table lacks; an
    attempt the table holds already is left as stored there, even where the local copy differs."""
    held = store.fingerprints()
    attempts = {(trial_id, attempt) for trial_id, attempt, _ in held}
    sent = 0
    for record in [*read_records(study_dir), *read_failed_attempts(study_dir)]:
        if (record.trial_id, record.attempt) not in attempts:
            store.put(record)
            sent += 1
    return sent


def open_store(storage_url: str, study: str) -> RecordStore:
    """The record store in the database at ``storage_url`` (StorageError, redacted, if unreachable)."""

    return RecordStore.of(open_storage(storage_url, create=False), study)


def import_from_storage(study_dir: str | os.PathLike, storage_url: str, study: str) -> ImportReport:
    """``--storage URL`` on the result commands: bring this machine's folder up to date."""
    return import_records(study_dir, open_store(storage_url, study))


def import_for_study(study_or_dir, storage_url: str) -> tuple[Path, ImportReport]:
    """``harness results/report/status/mirror-to-mlflow --storage URL``: the study's folder on this machine
    (a study file or folder, as those commands take it) brought up to date from the storage."""

    ref = resolve_study(study_or_dir)
    name = study_name(ref)
    return ref.dir, import_from_storage(ref.dir, storage_url, name)


__all__ = [
    "RecordStore",
    "ImportReport",
    "import_records",
    "import_for_study",
    "import_from_storage",
    "merge",
    "open_store",
    "publish_missing",
]
