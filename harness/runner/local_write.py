"""Writing a trial's record into the local folder so that it can be taken back: a worker whose
fenced commit then finds its claim revoked puts the folder back as it was."""

from __future__ import annotations

from pathlib import Path

from harness.errors import HarnessError
from harness.ground.files import atomic_write
from harness.tracking.records import (
    SUPERSEDED_DIR,
    TrialRecord,
    failed_record_path,
    read_record,
    record_path,
    records_dir,
    write_record,
)


class LocalWrite:
    """One record written to the local folder, with what it takes to put the folder back as it
    was (a write whose commit then finds the claim revoked)."""

    def __init__(self, study_dir: Path, record):
        self.study_dir, self.record = study_dir, record
        self.path = record_path(study_dir, record.trial_id)
        self.fingerprint = record.fingerprint()
        self.previous = self.path.read_bytes() if self.path.exists() else None
        self.archive: Path | None = None  # where write_record moves the previous attempt's record
        if self.previous is not None:
            try:
                before = TrialRecord.model_validate_json(self.previous)
            except ValueError:
                before = None
            if before is not None and before.attempt != record.attempt:
                self.archive = (
                    failed_record_path(study_dir, before.trial_id, before.attempt)
                    if before.status == "failed"
                    else records_dir(study_dir) / SUPERSEDED_DIR / f"{self.path.stem}.{before.attempt}.json"
                )
        self.archive_existed = self.archive is not None and self.archive.exists()

    def write(self) -> LocalWrite:
        write_record(self.study_dir, self.record)
        return self

    def _holds_ours(self, path: Path) -> bool:
        try:
            return read_record(path).fingerprint() == self.fingerprint
        except (HarnessError, OSError):
            return False

    def revert(self) -> None:
        """Put back what the folder held, where nothing newer has replaced this record since."""
        if self._holds_ours(self.path):
            if self.previous is None:
                self.path.unlink(missing_ok=True)
            else:
                atomic_write(self.path, self.previous)
            if self.archive is not None and not self.archive_existed:
                self.archive.unlink(missing_ok=True)
        # a later write archived this record: that copy goes too (this attempt never counted)
        stem, attempt = self.path.stem, self.record.attempt
        for archived in (
            failed_record_path(self.study_dir, self.record.trial_id, attempt),
            records_dir(self.study_dir) / SUPERSEDED_DIR / f"{stem}.{attempt}.json",
        ):
            if archived.exists() and self._holds_ours(archived):
                archived.unlink(missing_ok=True)
