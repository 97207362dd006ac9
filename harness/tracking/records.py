"""Trial records: the authoritative, local result of one trial ("records before mirrors").

A trial writes ``<study_dir>/records/<trial_id>.json`` atomically (temporary file, fsync,
rename) *before* it tells MLflow or Optuna, so a crashed mirror never loses a result and can be
replayed with ``harness mirror-to-mlflow``. A retried trial keeps only its latest attempt there; the failed
records of earlier attempts are archived as ``records/failed/<trial_id>.<attempt>.json``.

Every file carries a ``checksum`` of its content (:func:`content_checksum`), and a file whose
content no longer matches it (a record edited after it was written, by a program trainer or by
hand) is not believed: reading it raises :class:`RecordMismatch`, which the readers turn into one
warning line naming the file, and the shared storage's copy stands in where there is one
(:mod:`harness.tracking.shared_records`). A file without a checksum (written before records had
one) is read as it is. The checksum is no signature: whoever can write the folder can recompute
it; it catches an edited value, and the storage database is the copy out of a program's reach.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import os
import socket
import subprocess
import warnings
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_serializer

from harness.engine.spec import FLOPS_COUNTING, TrialResult, TrialSpec
from harness.errors import HarnessError, one_line
from harness.ground.console import warn_once
from harness.ground.files import atomic_write
from harness.tracking.prompt_scores import encode_scores
from harness.version import __version__

RECORDS_DIR = "records"
FAILED_DIR = "failed"
SUPERSEDED_DIR = "superseded"
#: the key of a record file holding the checksum of the rest of its content
CHECKSUM_KEY = "checksum"


class RecordMismatch(HarnessError):
    """A record file whose content does not match its checksum: it is not believed."""


class TrialRecord(BaseModel):
    """One trial's outcome with its provenance; its fields are the JSON of ``records/<trial_id>.json``."""

    # Unknown keys are ignored on read so a newer harness's records stay readable.
    model_config = ConfigDict(extra="ignore", ser_json_inf_nan="constants")

    trial_id: str
    study: str
    arm: str
    seed: int
    config_hash: str
    spec: dict[str, Any]
    status: Literal["completed", "failed"]
    error: str | None = None
    final: dict[str, float] = {}
    history: list[dict[str, Any]] = []
    wall_time_s: float = 0.0
    started_at: str
    finished_at: str
    host: str
    device: str
    git_commit: str | None = None
    harness_version: str
    harness_path: str | None = None  # the package that ran the trial (None: older records)
    attempt: int = 1
    phase: Literal["compare", "tune", "segment"] = "compare"  # segment: a compute-look trial before its last
    # every evaluation's per-prompt scores, compressed (harness.tracking.prompt_scores); None:
    # none recorded (a failed trial, or a record older than the field)
    prompt_scores: str | None = None
    # the trial's warnings, one line each ("<code>: ...", harness.engine.spec.TrialResult.warnings)
    warnings: list[str] = []
    # the scheduler's job that ran it (executor, id, name, log files); None: run by a local worker
    scheduler_job: dict[str, str] | None = None
    # how its compute/flops was counted (harness.engine.spec.FLOPS_COUNTING); None: no compute/flops,
    # or a record from before the field (counting 1)
    flops_counting: int | None = None

    @model_serializer(mode="wrap")
    def _without_absent_fields(self, handler):
        """A record without per-prompt scores, warnings, a scheduler job or a FLOPs counting dumps as
        before those fields existed, so its file and fingerprint (what MLflow and the shared storage
        match on) stay the same."""
        data = handler(self)
        if data.get("prompt_scores") is None:
            data.pop("prompt_scores", None)
        if not data.get("warnings"):
            data.pop("warnings", None)
        if data.get("scheduler_job") is None:
            data.pop("scheduler_job", None)
        if data.get("flops_counting") is None:
            data.pop("flops_counting", None)
        return data

    def fingerprint(self) -> str:
        """Short hash of the whole record: MLflow holds this record iff its run carries it."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# provenance


def now_iso() -> str:
    """The current UTC time as ISO 8601 with an explicit offset."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


def to_iso(when: _dt.datetime | str | float | int | None) -> str:
    """A datetime, an epoch in seconds or an ISO string, as an ISO string (None: now)."""
    if when is None:
        return now_iso()
    if isinstance(when, str):
        return _dt.datetime.fromisoformat(when).isoformat(timespec="milliseconds")
    if isinstance(when, (int, float)):
        when = _dt.datetime.fromtimestamp(float(when), _dt.UTC)
    if when.tzinfo is None:
        when = when.astimezone()  # a naive datetime is local time
    return when.isoformat(timespec="milliseconds")


def iso_to_ms(when: str) -> int:
    """An ISO timestamp as epoch milliseconds (MLflow's time unit)."""
    parsed = _dt.datetime.fromisoformat(when)
    if parsed.tzinfo is None:
        parsed = parsed.astimezone()
    return int(parsed.timestamp() * 1000)


def host() -> str:
    return socket.gethostname()


def harness_version() -> str:

    return __version__


def harness_path() -> str:
    """The folder of the harness package this process imported (this file is harness/tracking/records.py)."""
    return str(Path(__file__).resolve().parents[1])


@functools.lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The commit of the harness checkout this code runs from, or None (not a git checkout)."""
    root = Path(harness_path()).parent
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = out.stdout.strip()
    return sha or None


# --------------------------------------------------------------------------------------------
# building records


def make_record(
    spec: TrialSpec,
    result: TrialResult,
    *,
    attempt: int = 1,
    phase: Literal["compare", "tune", "segment"] = "compare",
    started_at: _dt.datetime | str | float | None = None,
    device: str = "cpu",
    study: str | None = None,
    finished_at: _dt.datetime | str | float | None = None,
    scheduler_job: dict[str, str] | None = None,
) -> TrialRecord:
    """The record of one finished (or failed) trial; provenance is filled in here.

    ``started_at``/``finished_at`` accept a datetime, an epoch in seconds or an ISO string;
    ``finished_at`` defaults to now and ``study`` to ``spec.study``.
    """
    return TrialRecord(
        trial_id=spec.trial_id,
        study=study or spec.study,
        arm=spec.arm,
        seed=spec.seed,
        config_hash=spec.config_hash(),
        spec=spec.model_dump(mode="json"),
        status=result.status,
        error=result.error,
        final=dict(result.final),
        history=[_jsonable_step(step) for step in result.history],
        wall_time_s=float(result.wall_time_s),
        started_at=to_iso(started_at),
        finished_at=to_iso(finished_at),
        host=host(),
        device=str(device),
        git_commit=git_commit(),
        harness_version=harness_version(),
        harness_path=harness_path(),
        attempt=int(attempt),
        phase=phase,
        prompt_scores=encode_scores(result.prompts),
        warnings=list(result.warnings),
        scheduler_job=scheduler_job,
        flops_counting=FLOPS_COUNTING if "compute/flops" in result.final else None,
    )


def _jsonable_step(step: dict[str, Any]) -> dict[str, Any]:
    """Numbers stay numbers (tensors and numpy scalars become floats); anything else is kept."""
    out = {}
    for key, value in step.items():
        if hasattr(value, "item") and callable(value.item):
            value = value.item()
        out[str(key)] = value
    return out


# --------------------------------------------------------------------------------------------
# reading and writing


def records_dir(study_dir: str | os.PathLike) -> Path:
    return Path(study_dir) / RECORDS_DIR


def _file_stem(trial_id: str) -> str:
    """A trial id as a file name: path separators and NULs become '_' (ids are never paths)."""
    stem = trial_id.replace("/", "_").replace("\\", "_").replace("\0", "_")
    if stem in {"", ".", ".."}:
        raise HarnessError(f"trial id {trial_id!r} cannot name a record file")
    return stem


def record_path(study_dir: str | os.PathLike, trial_id: str) -> Path:
    return records_dir(study_dir) / f"{_file_stem(trial_id)}.json"


def failed_record_path(study_dir: str | os.PathLike, trial_id: str, attempt: int) -> Path:
    return records_dir(study_dir) / FAILED_DIR / f"{_file_stem(trial_id)}.{attempt}.json"


def content_checksum(data: dict[str, Any]) -> str:
    """The checksum of a record file's content (``data``, its JSON parsed): SHA-256 of the content
    without the checksum itself, in a canonical form (sorted keys, no spaces), so it does not
    depend on how the file is laid out, and covers fields this version does not know."""
    content = {key: value for key, value in data.items() if key != CHECKSUM_KEY}
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _write(path: Path, record: TrialRecord) -> None:
    """``record`` as the JSON file ``path`` with its checksum, whole or not at all, its folder
    made if need be."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(record.model_dump_json())
    data[CHECKSUM_KEY] = content_checksum(data)
    atomic_write(path, json.dumps(data, indent=1, ensure_ascii=False, allow_nan=True) + "\n")


def archive_failed(study_dir: str | os.PathLike, record: TrialRecord) -> Path:
    """Keep a failed attempt's record under ``records/failed/<trial_id>.<attempt>.json``."""
    path = failed_record_path(study_dir, record.trial_id, record.attempt)
    _write(path, record)
    return path


def write_record(study_dir: str | os.PathLike, record: TrialRecord) -> Path:
    """Write ``records/<trial_id>.json`` atomically; returns its path.

    If the file already holds the record of another attempt, that record is archived first
    (a failed one to ``records/failed/<trial_id>.<attempt>.json``, a completed one that is
    being re-run to ``records/superseded/``), so no attempt's outcome is ever lost.
    """
    path = record_path(study_dir, record.trial_id)
    if path.exists():
        try:
            previous = read_record(path)
        except HarnessError:
            previous = None
        if previous is not None and previous.attempt != record.attempt:
            if previous.status == "failed":
                archive_failed(study_dir, previous)
            else:
                superseded = (
                    records_dir(study_dir)
                    / SUPERSEDED_DIR
                    / (f"{_file_stem(previous.trial_id)}.{previous.attempt}.json")
                )
                _write(superseded, previous)
    _write(path, record)
    return path


def read_record(path: str | os.PathLike) -> TrialRecord:
    """The record in ``path``: a ``HarnessError`` when it cannot be read, a ``RecordMismatch``
    when its content does not match its checksum."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        record = TrialRecord.model_validate_json(text)
        data = json.loads(text)
    except (OSError, ValueError, ValidationError) as err:
        raise HarnessError(f"unreadable trial record {path}: {one_line(err)}") from err
    if CHECKSUM_KEY in data and data[CHECKSUM_KEY] != content_checksum(data):
        raise RecordMismatch(f"trial record {path} does not match its checksum (edited since it was written)")
    return record


def read_records(study_dir: str | os.PathLike, *, strict: bool = False) -> list[TrialRecord]:
    """Every trial's latest record, sorted by trial id.

    An unreadable file is skipped with a warning naming it (``strict=True`` raises instead).
    """
    folder = records_dir(study_dir)
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.json")):
        if path.name.startswith("."):
            continue
        try:
            out.append(read_record(path))
        except RecordMismatch as err:
            if strict:
                raise
            _say_mismatch(err)
        except HarnessError as err:
            if strict:
                raise
            warnings.warn(f"{err}; skipped", stacklevel=2)
    out.sort(key=lambda r: r.trial_id)
    return out


def _say_mismatch(err: RecordMismatch) -> None:
    """One warning line for a record that is not believed (once per process: a command may read
    the folder more than once)."""
    warn_once(f"{err}: not believed, set aside (the shared storage's copy stands in where there is one)")


def read_failed_attempts(study_dir: str | os.PathLike) -> list[TrialRecord]:
    """The archived failed attempts, sorted by (trial id, attempt)."""
    folder = records_dir(study_dir) / FAILED_DIR
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.json")):
        if not path.name.startswith("."):
            try:
                out.append(read_record(path))
            except RecordMismatch as err:
                _say_mismatch(err)
            except HarnessError as err:
                warnings.warn(f"{err}; skipped", stacklevel=2)
    out.sort(key=lambda r: (r.trial_id, r.attempt))
    return out


# --------------------------------------------------------------------------------------------
# helpers shared by the mirror and the results frames


def flatten(mapping: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"algorithm": {"lr": 1e-3}}`` -> ``{"algorithm.lr": 1e-3}``; lists stay values."""
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def numeric(value: Any) -> float | None:
    """A metric value as a float, or None when it is not a number (bools count as 0/1)."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if hasattr(value, "item") and callable(value.item):
        try:
            return numeric(value.item())
        except (TypeError, ValueError):
            return None
    return None


def history_points(record: TrialRecord) -> list[tuple[int, str, float]]:
    """(step, metric, value) for every numeric value of the history, in record order."""
    points = []
    for index, row in enumerate(record.history):
        step = row.get("step", index)
        try:
            step = int(step)
        except (TypeError, ValueError):
            step = index
        for key, value in row.items():
            if key == "step":
                continue
            number = numeric(value)
            if number is not None:
                points.append((step, key, number))
    return points
