"""The MLflow mirror of trial records ("records before mirrors").

The local record (``harness.tracking.records``) is the truth; MLflow is a mirror that can always be
rebuilt from it with ``harness mirror-to-mlflow``. Layout in MLflow:

- one experiment per study name (default store: ``sqlite:///<study_dir>/mlflow.db`` with
  artifacts in ``<study_dir>/mlartifacts``);
- one parent run per study, tagged ``harness.role=study`` and found again by that tag
  (``harness report`` attaches its files there under ``report/`` and sets ``verdict.<condition>`` tags,
  with benchmarks also ``verdict.<benchmark>.<condition>`` and ``verdict.overall.<condition>``);
- one child run per trial (``mlflow.parentRunId``), tagged ``harness.role=trial`` and
  ``trial_id``, holding the flattened spec as params, the per-step history as metrics
  (with their step numbers), the final metrics as ``final/<name>``, and artifacts
  ``config.json``, ``config.yaml``, ``history.json``, ``history.csv``, ``record.json``, and
  ``prompt_scores.csv.gz`` (step, prompt_id, metric, value) when the record has per-prompt scores.

A child run is complete only when it carries ``harness.synced=1`` (set last) and
``harness.record_sha`` equal to the record's fingerprint. MLflow holds a record when the trial has
exactly one active run and that run is its complete mirror: a run left RUNNING by an interrupted
mirror, a run of an earlier attempt, or a duplicate from a mirror that raced this one means it
does not (``harness mirror-to-mlflow`` mends it). Mending keeps one run per record: an interrupted mirror of
the same record is completed in place (its run id stays), every other run of the trial is marked
KILLED if it was left RUNNING, then deleted. Mirrors that raced and both completed a run settle on
the oldest (start time, then run id), as the parent run does.
Tracking failures never raise: :meth:`Tracker.log_record` warns and returns False.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import sys
import tempfile
import time
import urllib.request
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from harness.errors import ConfigError, one_line, squeeze
from harness.ground.files import file_lock
from harness.ground.urls import redact_text, redact_url, sqlite_file
from harness.tracking import mlflow_env
from harness.tracking.mlflow_layout import (
    FINAL_PREFIX,
    METRICS_PER_BATCH,
    PARAMS_PER_BATCH,
    PARENT_TAG,
    RECORD_SHA_TAG,
    REPORT_ARTIFACTS,
    ROLE_TAG,
    SYNCED_TAG,
    history_csv,
    history_timestamps,
    mlflow_key,
    param_items,
    prompt_scores_csv_gz,
    trial_tags,
)
from harness.tracking.records import (
    TrialRecord,
    history_points,
    iso_to_ms,
    read_records,
    record_path,
)

CONNECT_TIMEOUT_S = 3.0
_DAMAGED_SQLITE = ("file is not a database", "database disk image is malformed", "malformed database schema")


class TrackingWarning(UserWarning):
    """MLflow could not be reached or written; the local record is unaffected."""


def quiet_mlflow() -> None:
    """Silence MLflow's chatter, not harness's warnings: its loggers (and alembic's, which logs
    its schema migrations) at WARNING unless ``MLFLOW_LOGGING_LEVEL`` was set, and the
    deprecation/future warnings raised from inside MLflow and alembic.
    :class:`TrackingWarning` is raised from this module, so it is never filtered."""
    if mlflow_env.USER_MLFLOW_LEVEL is None:
        for name in ("mlflow", "alembic"):
            logging.getLogger(name).setLevel(logging.WARNING)
    for category in (DeprecationWarning, FutureWarning, PendingDeprecationWarning):
        for module in (r"mlflow(\.|$)", r"alembic(\.|$)"):
            warnings.filterwarnings("ignore", category=category, module=module)


def default_tracking_uri(study_dir: str | os.PathLike) -> str:
    """The study's own MLflow store: ``sqlite:///<abs study_dir>/mlflow.db``."""
    return f"sqlite:///{Path(study_dir).resolve() / 'mlflow.db'}"


def default_artifact_location(study_dir: str | os.PathLike) -> str:
    return (Path(study_dir).resolve() / "mlartifacts").as_uri()


def _is_local_store(uri: str) -> bool:
    scheme = urlsplit(uri).scheme
    return scheme in {"", "file", "sqlite"}


def local_store_path(uri: str) -> Path | None:
    """Where a local store lives: the SQLite file, or the folder of a file store; None for a
    server or an in-memory SQLite store."""
    if uri.startswith("sqlite:"):
        try:
            return sqlite_file(uri)
        except ValueError:  # not a URL SQLAlchemy reads: MLflow says so when it opens it
            return None
    parts = urlsplit(uri)
    if parts.scheme == "file":
        return Path(parts.path)
    return Path(uri) if parts.scheme == "" else None


def require_existing_store(tracking_uri: str | None) -> None:
    """The rule for a store named explicitly (``--tracking-uri`` or ``HARNESS_TRACKING_URI``):
    the commands that start trials (run, worker, trial) create the store they are given; the
    commands that read or add to a study's store (mirror-to-mlflow, report, ui) only use an existing
    one, so a mistyped path is an error, not a new, empty store. (Without a URI, the study's own
    ``mlflow.db`` is created by whichever command needs it: mirror-to-mlflow rebuilds it from the
    records.)"""
    path = local_store_path(tracking_uri) if tracking_uri is not None else None
    if path is not None and not path.exists():
        raise ConfigError(
            f"--tracking-uri {redact_url(tracking_uri)}: no MLflow store at {path}; mirror-to-mlflow, report "
            "and ui only use an existing store (run, worker and trial create the one they are given): check the URI "
            "(or HARNESS_TRACKING_URI)"
        )


def failure_text(err: BaseException, tracking_uri: str) -> str:
    """``err`` as one short line, without the credentials of ``tracking_uri``: masked in the whole
    line before it is cut, so that no part of a secret is left at the cut."""
    return squeeze(redact_text(one_line(err, limit=sys.maxsize), tracking_uri), 300)


def _quotable(value: str) -> bool:
    return "'" not in value and "\\" not in value and "\n" not in value


def _oldest(runs: list):
    """The run every mirror settles on when several qualify: the oldest, then the lowest id."""
    return min(runs, key=lambda r: (r.info.start_time or 0, r.info.run_id))


def _mirrors(run, sha: str, *, complete: bool) -> bool:
    """Whether ``run`` mirrors the record with fingerprint ``sha`` (completely, or not yet)."""
    return run.data.tags.get(RECORD_SHA_TAG) == sha and (run.data.tags.get(SYNCED_TAG) == "1") == complete


def _point(key: str, step: int, timestamp: int, value: float) -> tuple:
    """A metric point as a set member (NaN equals NaN here)."""
    return key, step, timestamp, "nan" if math.isnan(value) else value


class TrackingUnavailable(Exception):
    """The tracking server did not answer (raised internally, never out of log_record)."""


class Tracker:
    """Mirrors trial records of one study into MLflow.

    ``tracking_uri=None`` means the study's own sqlite store (see :func:`default_tracking_uri`).
    Nothing connects until the first :meth:`log_record`.
    """

    def __init__(self, tracking_uri: str | None, study_dir: str | os.PathLike, study_name: str):
        self.study_dir = Path(study_dir)
        self.study_name = study_name
        self.explicit_uri = tracking_uri is not None
        self.tracking_uri = tracking_uri if tracking_uri is not None else default_tracking_uri(study_dir)
        self._client = None
        self._experiment_id: str | None = None
        self._parent_run_id: str | None = None

    # ---- connection -------------------------------------------------------------------------

    @property
    def client(self):
        if self._client is None:
            from mlflow import MlflowClient

            quiet_mlflow()  # after MLflow's import, which configures its loggers

            if self.tracking_uri.startswith("sqlite:"):
                # Creating a sqlite store runs MLflow's migrations; two workers doing it at once
                # can collide, so the first use is serialised through a lock file.
                self.study_dir.mkdir(parents=True, exist_ok=True)
                with file_lock(self.study_dir / ".mlflow-store.lock"):
                    client = MlflowClient(tracking_uri=self.tracking_uri)
                    client.search_experiments(max_results=1)
            else:
                client = MlflowClient(tracking_uri=self.tracking_uri)
            self._client = client
        return self._client

    def prepare(self) -> bool:
        """Create the store, the experiment and the parent run now (call once before workers
        start). Never raises: returns False with a :class:`TrackingWarning` on failure."""
        try:
            self._preflight()
            self.parent_run_id()
            return True
        except Exception as err:  # noqa: BLE001
            self._warn_failure(None, err)
            return False

    def _preflight(self) -> None:
        """Fail in seconds, not minutes, when an HTTP tracking server is not listening."""
        parts = urlsplit(self.tracking_uri)
        if parts.scheme not in {"http", "https"}:
            return
        if urllib.request.getproxies().get(parts.scheme) and not urllib.request.proxy_bypass(parts.hostname or ""):
            return  # reached through a proxy: a direct connect proves nothing; MLflow's timeouts apply
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as err:
            raise TrackingUnavailable(f"bad port in tracking URI: {err}") from None
        try:
            with socket.create_connection((parts.hostname or "localhost", port), timeout=CONNECT_TIMEOUT_S):
                pass
        except OSError as err:
            raise TrackingUnavailable(f"cannot connect to {parts.hostname}:{port} ({err.strerror or err})") from None

    def experiment_id(self) -> str:
        """The study's experiment, created (with the study's artifact folder) if missing."""
        if self._experiment_id is not None:
            return self._experiment_id
        client = self.client
        experiment = client.get_experiment_by_name(self.study_name)
        if experiment is None:
            artifact_location = (
                default_artifact_location(self.study_dir) if _is_local_store(self.tracking_uri) else None
            )
            try:
                experiment_id = client.create_experiment(
                    self.study_name,
                    artifact_location=artifact_location,
                    tags={"harness.study.load": self.study_name},
                )
            except Exception:
                experiment = client.get_experiment_by_name(self.study_name)
                if experiment is None:
                    raise
                experiment_id = experiment.experiment_id
        else:
            experiment_id = experiment.experiment_id
            if experiment.lifecycle_stage == "deleted":
                client.restore_experiment(experiment_id)
        self._experiment_id = experiment_id
        return experiment_id

    def _search(self, filter_string: str, *, order_by: list[str] | None = None) -> list:
        client, out, token = self.client, [], None
        while True:
            page = client.search_runs(
                [self.experiment_id()], filter_string, max_results=1000, order_by=order_by, page_token=token
            )
            out.extend(page)
            token = page.token
            if not token:
                return out

    def parent_run_id(self) -> str:
        """The study's parent run: found by tag ``harness.role=study``, created once.

        Workers on one machine serialise creation with a lock file in the study folder; if
        workers elsewhere still race, everyone settles on the oldest parent and a worker
        deletes the duplicate it made itself.
        """
        if self._parent_run_id is not None:
            return self._parent_run_id
        query = f"tags.`{ROLE_TAG}` = 'study'"
        runs = self._search(query)
        created = None
        if not runs:
            with file_lock(self.study_dir / ".mlflow.lock"):
                runs = self._search(query)
                if not runs:
                    created = self.client.create_run(
                        self.experiment_id(),
                        run_name=self.study_name,
                        tags={ROLE_TAG: "study", "study": self.study_name},
                    )
                    self._describe_parent(created.info.run_id)
                    runs = self._search(query)
                    if created.info.run_id not in {r.info.run_id for r in runs}:
                        runs.append(created)
        chosen = _oldest(runs)
        if created is not None and created.info.run_id != chosen.info.run_id:
            self.client.delete_run(created.info.run_id)
        self._parent_run_id = chosen.info.run_id
        return self._parent_run_id

    def _describe_parent(self, run_id: str) -> None:
        snapshot = self.study_dir / "study.yaml"
        if snapshot.is_file():
            self.client.log_artifact(run_id, str(snapshot))
        self.client.set_terminated(run_id, "FINISHED")

    # ---- reading back -----------------------------------------------------------------------

    def trial_runs(self, trial_id: str | None = None) -> dict[str, list]:
        """Active child runs by trial id (all trials, or one)."""
        query = f"tags.`{ROLE_TAG}` = 'trial'"
        if trial_id is not None and _quotable(trial_id):
            query += f" and tags.`trial_id` = '{trial_id}'"
        out: dict[str, list] = {}
        for run in self._search(query):
            tid = run.data.tags.get("trial_id")
            if tid is not None and (trial_id is None or tid == trial_id):
                out.setdefault(tid, []).append(run)
        return out

    def find_trial_run(self, trial_id: str):
        """The complete child run that mirrors ``trial_id``'s record, or None."""
        runs = self.trial_runs(trial_id).get(trial_id, [])
        complete = [r for r in runs if r.data.tags.get(SYNCED_TAG) == "1"]
        return max(complete, key=lambda r: r.info.start_time or 0) if complete else None

    @staticmethod
    def holds(runs: list, record: TrialRecord) -> bool:
        """Whether ``runs`` (a trial's active runs) are exactly one complete mirror of this record:
        nothing partial, out of date or duplicated beside it."""
        return len(runs) == 1 and _mirrors(runs[0], record.fingerprint(), complete=True)

    # ---- writing ----------------------------------------------------------------------------

    def log_record(self, record: TrialRecord, *, _existing: list | None = None) -> bool:
        """Mirror one record into MLflow. Idempotent; never raises on tracking failure.

        Returns True when MLflow holds the record completely (already, or now), False when
        tracking failed (a :class:`TrackingWarning` says why and how to replay).
        """
        delays = [0.5, 1.0, 2.0]
        while True:
            try:
                self._log_record(record, _existing)
                return True
            except Exception as err:  # noqa: BLE001 - the mirror must never break a trial
                if delays and "locked" in str(err).lower():
                    time.sleep(delays.pop(0))  # a busy sqlite store: try again shortly
                    _existing = None
                    continue
                self._warn_failure(record.trial_id, err)
                return False

    def _warn_failure(self, trial_id: str | None, err: BaseException) -> None:
        command = f"harness mirror-to-mlflow {self.study_dir.resolve()}"
        if self.explicit_uri:
            command += f" --tracking-uri {redact_url(self.tracking_uri)}"
        if trial_id is None:
            what, safe = "", f"The local records are safe ({self.study_dir / 'records'})"
        else:
            what = f" for trial {trial_id}"
            safe = f"The local record is safe ({record_path(self.study_dir, trial_id)})"
        store = self._damaged_store(err)
        if store is not None:  # sync would fail on it too
            aside = store.with_name(store.name + ".damaged")
            advice = (
                f"the MLflow store {store} is damaged: move it aside (mv {store} {aside}), "
                f"then run `{command}` to rebuild it from the local records"
            )
        else:
            advice = f"run `{command}` to send it later"
        warnings.warn(
            f"MLflow tracking at {redact_url(self.tracking_uri)} failed{what}: "
            f"{failure_text(err, self.tracking_uri)}. {safe}; {advice}.",
            TrackingWarning,
            stacklevel=3,
        )

    def _damaged_store(self, err: BaseException) -> Path | None:
        """The SQLite file of the store when ``err`` says it is not a database, or a damaged one."""
        store = local_store_path(self.tracking_uri) if self.tracking_uri.startswith("sqlite:") else None
        if store is None:
            return None
        seen: BaseException | None = err
        for _ in range(8):
            if seen is None:
                return None
            if any(text in str(seen) for text in _DAMAGED_SQLITE):
                return store.resolve()
            seen = seen.__cause__ or seen.__context__
        return None

    def _log_record(self, record: TrialRecord, existing: list | None) -> None:
        self._preflight()
        if existing is None:
            existing = self.trial_runs(record.trial_id).get(record.trial_id, [])
        if self.holds(existing, record):
            return
        sha = record.fingerprint()
        complete = [r for r in existing if _mirrors(r, sha, complete=True)]
        if not complete:
            unfinished = [r for r in existing if _mirrors(r, sha, complete=False)]  # an interrupted mirror
            filled = self._fill(record, _oldest(unfinished) if unfinished else None)
            existing = self.trial_runs(record.trial_id).get(record.trial_id, [])  # with any that raced this one
            complete = [r for r in existing if _mirrors(r, sha, complete=True)]
        keep = _oldest(complete).info.run_id if complete else filled
        self._retire([r for r in existing if r.info.run_id != keep])

    def _fill(self, record: TrialRecord, unfinished) -> str:
        """Write ``record`` into a new run, or complete ``unfinished`` (a run of this very record
        that an interrupted mirror left), logging only what it lacks; returns the run id."""
        from mlflow.entities import Metric, Param, RunTag

        client = self.client
        tags = trial_tags(record)
        tags[PARENT_TAG] = self.parent_run_id()
        if unfinished is None:
            run_id = client.create_run(
                self.experiment_id(), start_time=iso_to_ms(record.started_at), tags=tags, run_name=record.trial_id
            ).info.run_id
            logged: set[tuple] = set()
        else:
            run_id = unfinished.info.run_id
            client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()], synchronous=True)
            logged = {
                _point(m.key, m.step, m.timestamp, m.value)
                for key in unfinished.data.metrics
                for m in client.get_metric_history(run_id, key)
            }

        params = [Param(k, v) for k, v in param_items(record.spec).items()]
        for i in range(0, len(params), PARAMS_PER_BATCH):
            client.log_batch(run_id, params=params[i : i + PARAMS_PER_BATCH], synchronous=True)

        stamps = history_timestamps(record)
        end_ms = iso_to_ms(record.finished_at)
        metrics = [
            Metric(mlflow_key(key), value, stamps.get(step, end_ms), step)
            for step, key, value in history_points(record)
        ]
        last_step = max(stamps, default=0)
        metrics += [
            Metric(mlflow_key(FINAL_PREFIX + key), float(value), end_ms, last_step)
            for key, value in record.final.items()
        ]
        metrics.append(Metric("wall_time_s", float(record.wall_time_s), end_ms, last_step))
        metrics = [m for m in metrics if _point(m.key, m.step, m.timestamp, m.value) not in logged]
        for i in range(0, len(metrics), METRICS_PER_BATCH):
            client.log_batch(run_id, metrics=metrics[i : i + METRICS_PER_BATCH], synchronous=True)

        with tempfile.TemporaryDirectory(prefix="harness-artifacts-") as tmp:
            self._write_artifacts(record, Path(tmp))
            client.log_artifacts(run_id, tmp)

        client.set_terminated(run_id, "FINISHED" if record.status == "completed" else "FAILED", end_time=end_ms)
        client.log_batch(run_id, tags=[RunTag(SYNCED_TAG, "1")], synchronous=True)  # complete: set last
        return run_id

    def _retire(self, runs: list) -> None:
        """Delete a trial's other runs (out of date, duplicated, or partial); one an interrupted
        mirror left RUNNING is marked KILLED first, so no run stays RUNNING, not even in the trash."""
        for run in runs:
            if run.info.status == "RUNNING":
                self.client.set_terminated(run.info.run_id, "KILLED")
            self.client.delete_run(run.info.run_id)

    def log_report(self, files: list[Path], tags: dict[str, str]) -> str:
        """Attach report files to the study's parent run (under ``report/``, replacing an earlier
        report) and set ``tags`` on it; returns the run id. Raises on failure: the caller says why."""
        from mlflow.entities import RunTag

        self._preflight()
        run_id = self.parent_run_id()
        for path in files:
            self.client.log_artifact(run_id, str(path), artifact_path=REPORT_ARTIFACTS)
        self.client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()], synchronous=True)
        return run_id

    def _write_artifacts(self, record: TrialRecord, folder: Path) -> None:
        (folder / "config.json").write_text(json.dumps(record.spec, indent=2, sort_keys=True) + "\n")
        (folder / "config.yaml").write_text(yaml.safe_dump(record.spec, sort_keys=True))
        (folder / "history.json").write_text(json.dumps(record.history, indent=1) + "\n")
        (folder / "history.csv").write_text(history_csv(record))
        (folder / "record.json").write_text(record.model_dump_json(indent=1) + "\n")
        if record.prompt_scores is not None:
            where = f"trial record {record_path(self.study_dir, record.trial_id)}"
            (folder / "prompt_scores.csv.gz").write_bytes(prompt_scores_csv_gz(record, where))


# --------------------------------------------------------------------------------------------
# sync


@dataclass
class SyncReport:
    """What ``sync`` did: records already mirrored, newly sent, and failed (by trial id)."""

    tracking_uri: str
    already_present: int = 0
    sent: int = 0
    failed: int = 0
    failed_ids: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.already_present + self.sent + self.failed

    @property
    def ok(self) -> bool:
        return self.failed == 0

    def __str__(self) -> str:
        text = (
            f"sync to {redact_url(self.tracking_uri)}: {self.total} records; "
            f"{self.already_present} already present, {self.sent} sent, {self.failed} failed"
        )
        if self.failed_ids:
            shown = ", ".join(self.failed_ids[:10])
            more = f" (+{len(self.failed_ids) - 10} more)" if len(self.failed_ids) > 10 else ""
            text += f" [{shown}{more}]"
        return text


def study_name_of(study_dir: str | os.PathLike, records: list[TrialRecord] | None = None) -> str:
    """The study's name: its study.yaml snapshot, else its records, else the folder name."""
    snapshot = Path(study_dir) / "study.yaml"
    if snapshot.is_file():
        try:
            data = yaml.safe_load(snapshot.read_text(encoding="utf-8"))
        except yaml.YAMLError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            return data["name"]
    if records:
        names = [r.study for r in records]
        return max(sorted(set(names)), key=names.count)
    return Path(study_dir).resolve().name


def sync(study_dir: str | os.PathLike, tracking_uri: str | None = None) -> SyncReport:
    """Send every local record that MLflow does not fully hold; never raises on tracking failure."""
    study_dir = Path(study_dir)
    records = read_records(study_dir)
    tracker = Tracker(tracking_uri, study_dir, study_name_of(study_dir, records))
    report = SyncReport(tracking_uri=tracker.tracking_uri)
    if not records:
        return report
    try:
        tracker._preflight()
        held = tracker.trial_runs()
    except Exception as err:  # noqa: BLE001
        tracker._warn_failure(None, err)
        report.failed = len(records)
        report.failed_ids = [r.trial_id for r in records]
        return report
    for record in records:
        runs = held.get(record.trial_id, [])
        if Tracker.holds(runs, record):
            report.already_present += 1
        elif tracker.log_record(record, _existing=runs):
            report.sent += 1
        else:
            report.failed += 1
            report.failed_ids.append(record.trial_id)
    return report
