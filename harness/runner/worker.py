"""Workers: processes that take trials from the queue and run each in its own child process.

A worker is pinned to one device (a GPU through ``CUDA_VISIBLE_DEVICES``, or a share of the CPU
cores through the thread-count variables) and loops: claim a waiting job (the claim names the
worker, see :mod:`harness.runner.queue`), run its trial in a child process
(``python -m harness.runner.child``) under a timeout, then keeps the result in this order:

1. **fence check**: the job must still be RUNNING under this worker's claim and still be the
   current attempt of its trial (:func:`~harness.runner.queue.fencing.renew`, which also renews
   the heartbeat, so the claim cannot go stale in the next grace period). A worker that was
   paused (``kill -STOP``, a swapped-out VM) past the grace period finds its claim revoked: its
   trial was failed as ``worker lost`` and queued again as a newer attempt. It then discards
   its result with one line on stderr and writes nothing: no record, no MLflow run, no Optuna
   state.
2. **the local record** (authoritative), written only after a successful fence check. Records
   come before everything that reports them (Optuna's state, the shared copy, MLflow), so a
   worker that dies from here on leaves a record: a later worker on this machine finds it and
   completes the trial from it without running it again.
3. **commit, fenced**: one database transaction that locks the job with a conditional update
   (RUNNING, under this claim), checks again that no newer attempt exists, stores the job's new
   state (COMPLETE with the primary metric, or FAIL with the reason) and the copy of the record
   in the shared storage (:mod:`harness.tracking.shared_records`). Another worker's stale check
   is a conditional update of the same row, so exactly one of them wins. If the claim was
   revoked between 1 and 3 (the worker paused right there), the transaction changes nothing and
   the local record of step 2 is put back as it was (unless a worker already took it over as
   the completed result of the trial); the result is discarded as in 1.
4. **MLflow mirror** (a failure only warns), after the commit: only the attempt that won is ever
   mirrored, so a late attempt cannot replace the current attempt's run.
5. a failed job is queued again while the retry budget lasts (after 2-4, so the next attempt's
   record and run always come after this one's).

Before running a job it looks for a completed record of that trial, locally and then in the
shared storage: a worker that died after writing the record (step 2) but before committing left
exactly that (on any machine), and the trial is completed from it, mirrored, and not run again.
A worker that died between 3 and 4 leaves a record without its MLflow run: every worker first
mirrors the local records that MLflow lacks (:func:`harness.tracking.mlflow_mirror.sync`, one
worker of a machine at a time), so the next worker, or the next ``harness run``, repairs it.

**When the queue is empty** a worker exits only once nothing more can come: nothing waiting or
running anywhere, and the study finished. A sequential study is finished when its replay says
so; until then an idle worker works out the next look itself and queues it (exactly once across
machines, :mod:`harness.runner.looks`). A tuned study is finished once ``harness run`` has queued
its comparison trials (the queue's ``compare_queued`` attribute) and they are done, so workers
on other machines carry on from the tuning phase into the comparison.

While a job runs, a thread records fenced heartbeats; jobs of dead workers are found by their
stale heartbeats and re-queued (see :mod:`harness.runner.queue`). A worker whose heartbeat
finds its claim revoked stops its trial process at once. Starting and watching the trial's
process is :mod:`harness.runner.launch`.

**Failures of the machine around the trial.** Every storage call is retried with back-off while
the database is unreachable, for a bounded time (``RunOptions.storage_retry``, else
``$HARNESS_STORAGE_RETRY_S``, default 60 s; heartbeats just try again at the next beat); after
that the worker stops with one line naming the storage (its URL redacted) and leaves its claimed
trial as it is: another worker takes it over after the grace period. A record that cannot be
written (a full disk, ``ENOSPC``; a read-only folder) fails its trial with that reason (re-queued
while its retry budget lasts, for another worker) and stops the worker with one line: the next
trials could not be recorded either. Neither prints a traceback.

SIGINT/SIGTERM stop a worker cleanly: the running trial's process group is terminated and its
job goes back to WAITING, so the next run resumes it. A worker started by ``harness run`` also
stops when the runner dies.

The process that runs a worker, its signal handlers and its watch on the runner, is
:mod:`harness.runner.worker_process` (``python -m harness.runner.worker_process CONFIG.json``).
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import socket
import threading
import time
from pathlib import Path

import optuna
from optuna.trial import TrialState

from harness import store as study_db
from harness.engine.spec import TrialResult, TrialSpec
from harness.errors import HarnessError, one_line
from harness.ground.console import say
from harness.ground.files import file_lock
from harness.ground.urls import redact_url
from harness.runner import queue
from harness.runner.checkpoints import WORK_FOLDER, remove_checkpoints
from harness.runner.launch import run_trial_process
from harness.runner.local_write import LocalWrite
from harness.runner.looks import Looks, has_looks
from harness.runner.queue import fencing, outages
from harness.runner.queue.heartbeat import Either, Heartbeat
from harness.runner.worker_config import WorkerConfig, WorkerStats
from harness.store import SPEC
from harness.study.design import earlier_design_of
from harness.study.expand import tuning_specs
from harness.study.load import load_study
from harness.study.search_space import suggest_params
from harness.tracking.mlflow_mirror import Tracker
from harness.tracking.mlflow_mirror import sync as mirror_sync
from harness.tracking.records import (
    make_record,
    now_iso,
    read_record,
    record_path,
    records_dir,
    write_record,
)
from harness.tracking.shared_records import RecordStore

# --------------------------------------------------------------------------------------------
# the worker


class _StopWorker(Exception):
    """The worker cannot go on (its records cannot be written); the message is its last line."""


def left_design(study, job) -> str | None:
    """Why a comparison job's spec is no longer in ``study``'s design (None if it is); tuning jobs
    are the tuning phase's to judge."""
    if job.phase != "compare" or SPEC not in job.attrs:
        return None
    reason = earlier_design_of(study, job.attrs[SPEC], job.key)
    return None if reason is None else f"from {reason}"


def tune_sampler_seed(sampler_seed: int, arm: str, slot: int) -> int:
    """A distinct, reproducible TPE seed per (arm, slot): parallel workers must not draw alike."""
    digest = hashlib.sha256(f"{sampler_seed}:{arm}:{slot}".encode()).hexdigest()
    return int(digest[:8], 16)


MIRROR_LOCK = ".mlflow-mirror.lock"  # in the study folder: one mirroring worker at a time per machine


class Worker:
    """Claims jobs from the queues and runs them until nothing is left or it is stopped."""

    def __init__(self, config: WorkerConfig, stop: threading.Event | None = None):

        self.config, self.opts = config, config.run
        self.stop = stop or threading.Event()
        self.study = load_study(config.study_file)
        self.study_dir = Path(config.study_dir)
        self.storage = study_db.open_storage(self.opts.storage)
        self.where = redact_url(self.opts.storage)
        self.retry_s = outages.storage_retry_s(self.opts.storage_retry)
        self.queues = []
        for name in config.queues:
            q = self._db("opening the queue", queue.load_queue, self.storage, name)
            if q is None:
                raise study_db.StorageError(f"the storage holds no study {name!r}; start it with `harness run`")
            self.queues.append(q)

        self.records = RecordStore.of(self.storage, self.study.name)
        self.stats = WorkerStats()
        self.identity = f"{socket.gethostname()}:{os.getpid()} {config.device}"
        self._tracker = None
        self._last_stale_check = 0.0
        self._job = None  # the job being run (named when the worker has to stop)
        self._beats: Heartbeat | None = None
        self._compare_q = next(
            (q for q in self.queues if q.study_name == study_db.compare_study_name(self.study.name)), None
        )
        self._looks = None
        if has_looks(self.study) and self._compare_q is not None:
            self._looks = Looks(self.study, config.study_file, self.opts.storage, self._compare_q, self._say)
        self._said_waiting = False

    # ---- main loop ---------------------------------------------------------------------------

    def run(self) -> WorkerStats:
        """Claim and run jobs until the study is finished (nothing waiting or running anywhere, and
        nothing more to come: see the module doc) or :attr:`stop` is set; the counts of what it did.

        Every storage call rides out an outage of up to ``storage_retry`` seconds. A longer outage,
        or a record that cannot be written, ends the loop with one line on stderr and
        ``stats.stopped`` saying why (its claimed job, if any, stays claimed for another worker to
        take over). A job that breaks the harness itself fails that job only."""
        return self._guarded(self._work)

    def _guarded(self, work) -> WorkerStats:
        """Run ``work()``; a storage outage past its bound, or a record that cannot be written,
        ends it with one line on stderr and ``stats.stopped`` saying why."""
        try:
            work()
        except outages.StorageUnavailable as err:
            left = ""
            if self._job is not None:
                left = (
                    f"; {self._job.key} (attempt {self._job.attempt}) stays claimed: another worker "
                    f"takes it over after the grace period ({self.opts.grace_period:g}s)"
                )
            self.stats.stopped = str(err)
            self._say(f"stopping: {err}{left}")
        except _StopWorker as err:
            self.stats.stopped = str(err)
            self._say(str(err))
        return self.stats

    def _work(self) -> None:
        self._mirror_missing()
        while not self.stop.is_set():
            self._check_stale()
            claimed = None
            for q in self.queues:
                job = self._db("claiming a trial", queue.claim_next, q, self.identity)
                if job is not None:
                    claimed = (q, job)
                    break
            if claimed is not None:
                self._run_job(*claimed)
                continue
            if self._looks is not None and self._db("working out the next look", self._looks.advance):
                continue  # this worker queued a look: claim its trials
            held = self.config.hold_file is not None and Path(self.config.hold_file).exists()
            if (
                not held
                and not any(self._db("polling the queue", queue.has_work, q) for q in self.queues)
                and self._finished()
            ):
                break  # nothing waiting, nothing running anywhere, nothing more coming: done
            self.stop.wait(self.opts.poll_interval)  # others still run: one may fail and retry

    def _finished(self) -> bool:
        """Whether the study is over, once no job is waiting or running anywhere (see the module
        doc): a sequential study by its replay, a tuned one once its comparison trials were queued."""
        if self._looks is not None:
            return self._looks.finished
        if self.study.tuning is None or self._compare_q is None:
            return True
        if self._db("polling the queue", queue.queue_attr, self._compare_q, queue.COMPARE_QUEUED, True):
            return True
        if not self._said_waiting:
            self._say(
                "tuning is over; waiting for `harness run` to queue the comparison trials "
                "(run it again if it has stopped)"
            )
            self._said_waiting = True
        return False

    def _db(self, what: str, fn, *args, **kwargs):
        """A storage call, retried through an outage of up to ``storage_retry`` seconds."""
        return outages.retry_storage(
            lambda: fn(*args, **kwargs),
            what=what,
            where=self.where,
            url=self.opts.storage,
            bound_s=self.retry_s,
            say=self._say,
            stop=self.stop,
        )

    def _check_stale(self, force: bool = False) -> None:

        now = time.monotonic()
        if not force and now - self._last_stale_check < min(self.opts.heartbeat_interval, 5.0):
            return
        self._last_stale_check = now
        for q in self.queues:
            handled = self._db(
                "checking for stale trials",
                queue.fail_stale,
                q,
                self.opts.grace_period,
                left_design=functools.partial(left_design, self.study),
            )
            for stale in handled:
                job = stale.job
                if stale.requeued:
                    self.stats.requeued_stale += 1
                    self._say(f"re-queued {job.key} (attempt {job.attempt}): {stale.reason}")
                else:
                    self.stats.superseded += 1
                    self._say(f"{job.key} (attempt {job.attempt}) {stale.reason}")

    def _say(self, message: str) -> None:
        say(message, prefix=f"[worker {self.config.name}]")

    # ---- one job -----------------------------------------------------------------------------

    def _run_job(self, q, job) -> None:

        self._job = job
        self._beats = Heartbeat(
            q, job, self.opts.heartbeat_interval, owner=self.identity, say=self._say, url=self.opts.storage
        )
        with self._beats:
            try:
                if job.phase == "tune":
                    self._run_tune_job(q, job)
                else:
                    self._run_compare_job(q, job)
            except (outages.StorageUnavailable, _StopWorker):
                raise  # the worker stops; the job stays claimed and goes stale for another worker
            except Exception as err:  # noqa: BLE001 - a broken job must not stop the worker
                reason = f"harness error: {one_line(err)}"
                lost = self._db(
                    "failing the trial", fencing.commit, q, job, self.identity, state=TrialState.FAIL, reason=reason
                )  # no retry: it would break again
                if lost is not None:
                    self._discard(job, lost)
                else:
                    self.stats.failed += 1
                    self._say(f"{job.key} failed: {reason}")
        self._job = None

    def _run_compare_job(self, q, job) -> None:

        spec = TrialSpec.model_validate(job.attrs[study_db.SPEC])
        record, skipped = self._execute(spec, attempt=job.attempt, phase=job.phase)  # compare, or a segment
        if record is None:
            self._stopped(q, job)
            return
        kept = self._keep(q, job, record, skipped=skipped, final=True)
        segmented = spec.looks is not None and spec.looks.run_to is not None
        if kept and record.status == "completed" and segmented and spec.looks.is_last:
            remove_checkpoints(self.study_dir, [spec.trial_id])  # it reached the budget: nothing resumes from them

    def _run_tune_job(self, q, job) -> None:

        arm = str(job.attrs[study_db.ARM])
        slot = int(job.attrs[study_db.SLOT])
        tuning = self.study.tuning
        sampler = optuna.samplers.TPESampler(seed=tune_sampler_seed(tuning.sampler_seed, arm, slot))
        tq = self._db("opening the queue", queue.load_queue, self.storage, q.study_name, sampler=sampler)
        trial = optuna.trial.Trial(tq, job.optuna_id)
        params = self._db("drawing parameters", suggest_params, self.study, trial)
        job.params = dict(params)
        specs = [tuning_specs(self.study, arm, params, seed) for seed in tuning.seeds]
        self._db("naming the seeds' trials", queue.set_attr, tq, job, study_db.TRIAL_IDS, [s.trial_id for s in specs])
        values = []
        for spec in specs:
            record, skipped = self._execute(spec, attempt=job.attempt, phase="tune")
            if record is None:
                self._stopped(tq, job)
                return
            if not self._keep(tq, job, record, skipped=skipped, final=False):
                return  # the claim was revoked: discarded
            if record.status != "completed":
                reason = f"seed {spec.seed}: {record.error}"
                lost = self._db(
                    "failing the trial", fencing.commit, tq, job, self.identity, state=TrialState.FAIL, reason=reason
                )
                if lost is not None:
                    self._discard(job, lost)
                else:
                    self._failed(tq, job, reason)
                return
            values.append(record.final[self.study.primary_metric])
        value = sum(values) / len(values)
        lost = self._db(
            "completing the trial", fencing.commit, tq, job, self.identity, state=TrialState.COMPLETE, value=value
        )
        if lost is not None:
            self._discard(job, lost)
        else:
            self.stats.completed += 1

    # ---- keeping a result ----------------------------------------------------------------------

    def _keep(self, q, job, record, *, skipped: bool, final: bool) -> bool:
        """Fence check, local record, fenced commit (with the shared copy), MLflow; in this order
        (see the module doc). ``final``: the job ends with this record (COMPLETE or FAIL), else
        it goes on (one seed of a tuning job). False when the claim was revoked: nothing kept."""

        lost = self._db("checking the claim", fencing.renew, q, job, self.identity)
        if lost is not None:
            self._discard(job, lost)
            return False
        written = None
        if not skipped:
            try:
                written = LocalWrite(self.study_dir, record).write()  # the authoritative record
            except OSError as err:
                self._unwritable(q, job, record, err)  # raises _StopWorker
        completed = record.status == "completed"
        state = None if not final else TrialState.COMPLETE if completed else TrialState.FAIL
        value = record.final[self.study.primary_metric] if final and completed else None
        reason = None if completed or not final else (record.error or "failed")
        lost = self._db(
            "recording the result",
            fencing.commit,
            q,
            job,
            self.identity,
            state=state,
            value=value,
            reason=reason,
            record=record,
            record_study=self.study.name,
        )
        if lost is not None:
            if written is not None and not self._adopted(record):
                try:
                    written.revert()
                except OSError as err:
                    self._say(f"{record.trial_id}: could not put back {written.path} ({one_line(err, 200)})")
            self._discard(job, lost)
            return False
        self._mirror(record)
        if final:
            if completed:
                self.stats.completed += 1
                if skipped:
                    self._say(f"{job.key}: completed record found; told Optuna without re-running")
            else:
                self._failed(q, job, reason)
        return True

    def _adopted(self, record) -> bool:
        """Whether another worker took this record over (stored it as the trial's result)."""
        try:
            held = self._db("looking up the record", self.records.fingerprints)
        except outages.StorageUnavailable:
            return True  # cannot tell: keep the record (records are authoritative)
        return (record.trial_id, record.attempt, record.fingerprint()) in held

    def _discard(self, job, lost) -> None:
        self.stats.discarded += 1
        self._say(f"{job.key} attempt {job.attempt}: {lost}; discarding this attempt's result (nothing written)")

    def _unwritable(self, q, job, record, err: OSError) -> None:
        """The record cannot be written (full disk, read-only folder): fail the trial with that
        reason, then stop the worker with one line."""
        where = records_dir(self.study_dir)
        why = err.strerror or type(err).__name__
        code = f"[Errno {err.errno}] " if err.errno else ""
        reason = f"record not written: {type(err).__name__}: {code}{why} ({where})"
        lost = self._db(
            "failing the trial", fencing.commit, q, job, self.identity, state=TrialState.FAIL, reason=reason
        )
        if lost is not None:
            self._discard(job, lost)
            outcome = "its claim had been revoked"
        else:
            self.stats.failed += 1
            retried = job.attempt < job.max_attempt
            if retried:
                self._db("queueing the next attempt", queue.requeue, q, job)
            outcome = f"{job.key} (attempt {job.attempt}/{job.max_attempt}) failed with that reason" + (
                "; re-queued for another worker" if retried else ""
            )
        raise _StopWorker(f"stopping: cannot write {record.trial_id}'s record in {where}: {code}{why}; {outcome}")

    def _stopped(self, q, job) -> None:
        """No record came back: the worker was stopped (release the job) or the claim revoked."""
        if self._beats is not None and self._beats.revoked.is_set():
            lost = fencing.Revoked(job.key, job.attempt, None)
            try:
                lost = self._db("checking the claim", fencing.revocation, q, job, self.identity) or lost
            except outages.StorageUnavailable:
                pass
            self._discard(job, lost)
            return
        self._release(q, job)

    # ---- helpers -----------------------------------------------------------------------------

    def _completed_record(self, trial_id: str):
        """A completed record of ``trial_id``: this machine's, else one that another machine
        stored in the shared storage (written here too, so this folder holds it from now on)."""

        path = record_path(self.study_dir, trial_id)
        if path.exists():
            try:
                record = read_record(path)
            except HarnessError:
                record = None
            if record is not None and self._usable(record):
                return record
        try:
            record = self._db("looking up the record", self.records.completed, trial_id)
        except outages.StorageUnavailable:
            raise
        except Exception as err:  # noqa: BLE001 - the claim succeeded: the storage is back soon
            self._say(f"could not look up {trial_id} in the shared storage: {one_line(err, 200)}")
            return None
        if record is None or not self._usable(record):
            return None
        try:
            write_record(self.study_dir, record)
        except OSError as err:  # the shared copy still holds it; `harness results --storage` brings it
            self._say(f"{trial_id}: could not copy its record from the shared storage here ({one_line(err, 200)})")
        self._say(f"{trial_id}: completed record found in the shared storage (from {record.host})")
        return record

    def _usable(self, record) -> bool:
        value = record.final.get(self.study.primary_metric)
        return record.status == "completed" and value is not None and math.isfinite(value)

    def _execute(self, spec, *, attempt: int, phase: str):
        """Run one spec (or find its completed record); returns (record, skipped) or (None, False)
        when the worker was stopped (or its claim revoked) before the trial finished. Writes
        nothing: the caller keeps the record (:meth:`_keep`)."""

        existing = self._completed_record(spec.trial_id)
        if existing is not None:
            self.stats.skipped += 1
            return existing, True
        halt = Either(self.stop, *([self._beats.revoked] if self._beats is not None else []))
        if halt.is_set():
            return None, False
        started_at = now_iso()
        stem = record_path(self.study_dir, spec.trial_id).stem
        header = f"=== {spec.trial_id} attempt {attempt} ({phase}) on {self.identity} at {started_at} ==="
        outcome = run_trial_process(
            spec.model_dump_json(),
            trial_fn=self.opts.trial_fn,
            work_dir=self.study_dir / WORK_FOLDER,
            log_path=self.study_dir / "logs" / f"{stem}.log",
            stem=stem,
            timeout_s=self.opts.trial_timeout,
            stop=halt,
            kill_grace_s=self.opts.kill_grace,
            header=header,
        )
        if outcome.interrupted:
            return None, False
        if outcome.result is not None:
            result = TrialResult.model_validate(outcome.result)
            reason = self._check_result(result)
            if reason is not None:
                result = result.model_copy(update={"status": "failed", "error": reason})
        else:
            result = TrialResult(
                trial_id=spec.trial_id,
                status="failed",
                error=outcome.reason,
                wall_time_s=outcome.wall_time_s,
            )
        record = make_record(
            spec,
            result,
            attempt=attempt,
            phase=phase,
            started_at=started_at,
            device=self.config.device,
            study=self.study.name,
            scheduler_job=self._job.attrs.get(study_db.EXECUTOR_JOB) if self._job is not None else None,
        )
        return record, False

    def _check_result(self, result) -> str | None:
        if result.status != "completed":
            return result.error or "the trial reported failure"
        metric = self.study.primary_metric
        if metric not in result.final:
            return f"primary metric {metric!r} missing from the trial's final metrics"
        value = result.final[metric]
        if not math.isfinite(value):
            return f"NonFiniteError: primary metric {metric} is {value}"
        return None

    def _mirror(self, record) -> None:
        if not self.opts.tracking:
            return
        try:
            if self._tracker is None:
                self._tracker = Tracker(self.opts.tracking_uri, self.study_dir, self.study.name)
            with file_lock(self.study_dir / MIRROR_LOCK):  # not while another worker here syncs
                self._tracker.log_record(record)  # warns (TrackingWarning) and returns False on failure
        except Exception as err:  # noqa: BLE001 - the mirror never breaks a trial
            self._say(f"MLflow mirror failed for {record.trial_id}: {one_line(err, 300)}")

    def _mirror_missing(self) -> None:
        """Mirror the local records MLflow lacks (a worker stopped between its commit and its
        mirror): ``harness mirror-to-mlflow``'s own pass, by one worker of this machine at a time."""
        if not self.opts.tracking or not any(records_dir(self.study_dir).glob("*.json")):
            return
        try:
            with file_lock(self.study_dir / MIRROR_LOCK, wait=False) as mine:
                if not mine:
                    return  # another worker of this machine is at it
                report = mirror_sync(self.study_dir, self.opts.tracking_uri)
        except Exception as err:  # noqa: BLE001 - the mirror never stops a worker
            self._say(f"could not mirror the local records to MLflow: {one_line(err, 300)}")
            return
        if report.sent:
            self.stats.mirrored_late += report.sent
            self._say(f"mirrored {report.sent} local record(s) that MLflow lacked")

    def _failed(self, q, job, reason: str) -> None:
        """The job ended FAIL (committed): count it, queue the next attempt while the budget lasts."""
        self.stats.failed += 1
        retried = job.attempt < job.max_attempt
        if retried:
            self._db("queueing the next attempt", queue.requeue, q, job)
        what = f"attempt {job.attempt}/{job.max_attempt}"
        self._say(f"{job.key} failed ({what}): {reason}" + ("; re-queued" if retried else ""))

    def _release(self, q, job) -> None:

        if self._db("putting the trial back", queue.release, q, job):
            self.stats.released += 1
            self._say(f"stopped; {job.key} is back in the queue")
