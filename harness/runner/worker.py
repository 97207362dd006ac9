"""Workers: processes that take trials from the queue and run each in its own child process.

A worker is pinned to one device (a GPU through ``CUDA_VISIBLE_DEVICES``, or a share of the CPU
cores through the thread-count variables) and loops: claim a waiting job, run its trial in a
child process (``python -m harness.runner.child``) under a timeout, then

1. write the local record (authoritative),
2. mirror it to MLflow (a failure only warns),
3. tell Optuna (COMPLETE with the primary metric, or FAIL with the reason, re-queued while the
   retry budget lasts).

Between 2 and 3 it stores the record in the shared storage as well (:mod:`harness.tracking.shared_records`),
so results reach every machine. Before running a job it looks for a completed record of that
trial, locally and then in the shared storage: a worker that died after writing the record but
before telling Optuna left exactly that (on any machine), and the trial is not run again.
While a job runs, a thread records Optuna heartbeats; jobs of dead workers are found by their
stale heartbeats and re-queued (see :mod:`harness.runner.trial_queue`). Starting and watching the trial's
process is :mod:`harness.runner.launch`.

SIGINT/SIGTERM stop a worker cleanly: the running trial's process group is terminated and its
job goes back to WAITING, so the next run resumes it. A worker started by ``harness run`` also
stops when the runner dies.

Entry point for the runner: ``python -m harness.runner.worker CONFIG.json`` (a :class:`WorkerConfig`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import optuna

from harness.engine.spec import TrialResult, TrialSpec
from harness.errors import HarnessError
from harness.runner import trial_queue as queue
from harness.runner.child import DEFAULT_TRIAL_FN, THREADS_ENV, one_line
from harness.runner.launch import prestart_forkserver, run_trial_process
from harness.study.expand import tuning_specs
from harness.study.load import load_study
from harness.study.search_space import suggest_params
from harness.tracking import storage as study_db
from harness.tracking.mlflow_mirror import Tracker
from harness.tracking.records import (
    make_record,
    now_iso,
    read_record,
    record_path,
    write_record,
)
from harness.tracking.shared_records import RecordStore
from harness.tracking.urls import redact_text

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", THREADS_ENV)
URL_ENV_VARS = ("HARNESS_STORAGE", "HARNESS_TRACKING_URI")  # what the CLI reads --storage etc. from


# --------------------------------------------------------------------------------------------
# devices


@dataclass
class Slot:
    """Where one worker runs: its name, its device, and the environment that pins it there."""

    name: str
    device: str
    env: dict[str, str] = field(default_factory=dict)
    threads: int = 1


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def visible_gpus() -> list[str]:
    """GPU ids this machine may use: ``CUDA_VISIBLE_DEVICES`` if set, else ``nvidia-smi -L``.

    Asks no CUDA library, so the runner stays light and never initialises a GPU itself.
    """
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        ids = [part.strip() for part in env.split(",") if part.strip()]
        return [] if not ids or ids[0] == "-1" else ids
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(out.stdout.splitlines()) if line.startswith("GPU ")]


def plan_slots(workers: int | None = None, *, gpus: list[str] | None = None, cores: int | None = None) -> list[Slot]:
    """One worker per GPU when there are GPUs (``workers`` > GPUs shares them round-robin),
    else ``workers`` CPU workers (default 1) that split the cores evenly."""
    gpus = visible_gpus() if gpus is None else gpus
    cores = usable_cores() if cores is None else cores
    if workers is not None and workers < 1:
        raise ValueError("--workers must be at least 1")
    if gpus:
        n = workers or len(gpus)
        threads = max(1, cores // n)
        return [
            Slot(
                name=f"gpu{gpus[i % len(gpus)]}" + (f".{i // len(gpus)}" if n > len(gpus) else ""),
                device=f"cuda:{gpus[i % len(gpus)]}",
                env={"CUDA_VISIBLE_DEVICES": gpus[i % len(gpus)], **{v: str(threads) for v in THREAD_VARS}},
                threads=threads,
            )
            for i in range(n)
        ]
    n = workers or 1
    threads = max(1, cores // n)
    return [
        Slot(name=f"cpu{i}", device="cpu", env={v: str(threads) for v in THREAD_VARS}, threads=threads)
        for i in range(n)
    ]


# --------------------------------------------------------------------------------------------
# the worker


@dataclass
class WorkerConfig:
    name: str
    study_file: str  # the study snapshot (or file) to load
    study_dir: str
    storage_url: str | None
    queues: list[str]  # Optuna study names, worked through in this order
    trial_fn: str = DEFAULT_TRIAL_FN
    tracking_uri: str | None = None
    tracking: bool = True
    trial_timeout: float | None = None
    device: str = "cpu"
    heartbeat_interval: float = 10.0
    grace_period: float = 60.0
    poll_interval: float = 1.0
    kill_grace: float = 10.0
    watch_parent: bool = False  # stop when the process that started this worker dies
    hold_file: str | None = None  # while this file exists, an idle worker waits for more jobs

    # URLs may carry credentials: they travel in the environment, never in the config file
    _SECRETS = {"storage_url": "HARNESS_WORKER_STORAGE", "tracking_uri": "HARNESS_WORKER_TRACKING"}

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        for key in self._SECRETS:
            data.pop(key)
        return json.dumps(data)

    def secret_env(self) -> dict[str, str]:
        return {var: getattr(self, key) for key, var in self._SECRETS.items() if getattr(self, key) is not None}

    @classmethod
    def from_json(cls, text: str, env: dict[str, str] | None = None) -> WorkerConfig:
        env = os.environ if env is None else env
        data = json.loads(text)
        for key, var in cls._SECRETS.items():
            data[key] = env.get(var)
        return cls(**data)


@dataclass
class WorkerStats:
    completed: int = 0
    failed: int = 0
    skipped: int = 0  # completed records found: told Optuna without running
    released: int = 0  # interrupted jobs put back to WAITING
    requeued_stale: int = 0


class _Heartbeat:
    """Records Optuna heartbeats for one job while it runs (in a thread of the worker)."""

    def __init__(self, study, job, interval_s: float):
        self.study, self.job, self.interval_s = study, job, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="heartbeat", daemon=True)

    def _beat(self) -> None:

        while not self._stop.wait(self.interval_s):
            try:
                queue.heartbeat(self.study, self.job)
            except Exception as err:  # noqa: BLE001 - a missed beat is retried next interval
                _say(f"heartbeat failed ({one_line(err, 200)}); retrying")

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def _say(message: str, name: str | None = None) -> None:
    prefix = f"[worker {name}] " if name else "[worker] "
    print(prefix + message, file=sys.stderr, flush=True)


def tune_sampler_seed(sampler_seed: int, arm: str, slot: int) -> int:
    """A distinct, reproducible TPE seed per (arm, slot): parallel workers must not draw alike."""
    digest = hashlib.sha256(f"{sampler_seed}:{arm}:{slot}".encode()).hexdigest()
    return int(digest[:8], 16)


class Worker:
    """Claims jobs from the queues and runs them until nothing is left or it is stopped."""

    def __init__(self, config: WorkerConfig, stop: threading.Event | None = None):

        self.config = config
        self.stop = stop or threading.Event()
        self.study = load_study(config.study_file)
        self.study_dir = Path(config.study_dir)
        self.storage = study_db.open_storage(config.storage_url)
        self.queues = []
        for name in config.queues:
            q = queue.load_queue(self.storage, name)
            if q is None:
                raise study_db.StorageError(f"the storage holds no study {name!r}; start it with `harness run`")
            self.queues.append(q)

        self.records = RecordStore.of(self.storage, self.study.name)
        self.stats = WorkerStats()
        self.identity = f"{socket.gethostname()}:{os.getpid()} {config.device}"
        self._tracker = None
        self._last_stale_check = 0.0

    # ---- main loop ---------------------------------------------------------------------------

    def run(self) -> WorkerStats:

        while not self.stop.is_set():
            self._check_stale()
            claimed = None
            for q in self.queues:
                job = queue.claim_next(q)
                if job is not None:
                    claimed = (q, job)
                    break
            if claimed is not None:
                self._run_job(*claimed)
                continue
            held = self.config.hold_file is not None and Path(self.config.hold_file).exists()
            if not held and not any(queue.has_work(q) for q in self.queues):
                break  # nothing waiting, nothing running anywhere, nothing more coming: done
            self.stop.wait(self.config.poll_interval)  # others still run: one may fail and retry
        return self.stats

    def _check_stale(self, force: bool = False) -> None:

        now = time.monotonic()
        if not force and now - self._last_stale_check < min(self.config.heartbeat_interval, 5.0):
            return
        self._last_stale_check = now
        for q in self.queues:
            for job in queue.fail_stale(q, self.config.grace_period):
                self.stats.requeued_stale += 1
                self._say(f"re-queued {job.key} (attempt {job.attempt}): {job.reason}")

    def _say(self, message: str) -> None:
        _say(message, self.config.name)

    # ---- one job -----------------------------------------------------------------------------

    def _run_job(self, q, job) -> None:

        queue.set_attr(q, job, study_db.WORKER, self.identity)
        with _Heartbeat(q, job, self.config.heartbeat_interval):
            try:
                if job.phase == "tune":
                    self._run_tune_job(q, job)
                else:
                    self._run_compare_job(q, job)
            except Exception as err:  # noqa: BLE001 - a broken job must not stop the worker
                reason = f"harness error: {one_line(err)}"
                self.stats.failed += 1
                queue.fail(q, job, reason, retry=False)  # the same job would break again
                self._say(f"{job.key} failed: {reason}")

    def _run_compare_job(self, q, job) -> None:

        spec = TrialSpec.model_validate(job.attrs[study_db.SPEC])
        record, skipped = self._execute(spec, attempt=job.attempt, phase="compare")
        if record is None:
            self._release(q, job)
            return
        self._tell(q, job, record, skipped)

    def _run_tune_job(self, q, job) -> None:

        arm = str(job.attrs[study_db.ARM])
        slot = int(job.attrs[study_db.SLOT])
        tuning = self.study.tuning
        sampler = optuna.samplers.TPESampler(seed=tune_sampler_seed(tuning.sampler_seed, arm, slot))
        tq = queue.load_queue(self.storage, q.study_name, sampler=sampler)
        trial = optuna.trial.Trial(tq, job.optuna_id)
        params = suggest_params(self.study, trial)
        job.params = dict(params)
        specs = [tuning_specs(self.study, arm, params, seed) for seed in tuning.seeds]
        queue.set_attr(tq, job, study_db.TRIAL_IDS, [s.trial_id for s in specs])
        values = []
        for spec in specs:
            record, skipped = self._execute(spec, attempt=job.attempt, phase="tune")
            if record is None:
                self._release(tq, job)
                return
            if record.status != "completed":
                reason = f"seed {spec.seed}: {record.error}"
                self._fail(tq, job, reason)
                return
            values.append(record.final[self.study.primary_metric])
        value = sum(values) / len(values)
        if queue.complete(tq, job, value):
            self.stats.completed += 1
        else:
            self._say(f"{arm} tuning trial {slot} was finished by another process; kept its record")

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
            record = self.records.completed(trial_id)
        except Exception as err:  # noqa: BLE001 - the claim succeeded: the storage is back soon
            self._say(f"could not look up {trial_id} in the shared storage: {one_line(err, 200)}")
            return None
        if record is None or not self._usable(record):
            return None
        write_record(self.study_dir, record)
        self._say(f"{trial_id}: completed record found in the shared storage (from {record.host})")
        return record

    def _usable(self, record) -> bool:
        value = record.final.get(self.study.primary_metric)
        return record.status == "completed" and value is not None and math.isfinite(value)

    def _execute(self, spec, *, attempt: int, phase: str):
        """Run one spec (or find its completed record); returns (record, skipped) or (None, False)
        when the worker was stopped before the trial finished."""

        existing = self._completed_record(spec.trial_id)
        if existing is not None:
            self.stats.skipped += 1
            self._share(existing)  # it may have been written just before a crash
            return existing, True
        if self.stop.is_set():
            return None, False
        started_at = now_iso()
        stem = record_path(self.study_dir, spec.trial_id).stem
        header = f"=== {spec.trial_id} attempt {attempt} ({phase}) on {self.identity} at {started_at} ==="
        outcome = run_trial_process(
            spec.model_dump_json(),
            trial_fn=self.config.trial_fn,
            work_dir=self.study_dir / "tmp",
            log_path=self.study_dir / "logs" / f"{stem}.log",
            stem=stem,
            timeout_s=self.config.trial_timeout,
            stop=self.stop,
            kill_grace_s=self.config.kill_grace,
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
                trial_id=spec.trial_id, status="failed", error=outcome.reason,
                wall_time_s=outcome.wall_time_s,
            )
        record = make_record(
            spec, result, attempt=attempt, phase=phase, started_at=started_at,
            device=self.config.device, study=self.study.name,
        )
        write_record(self.study_dir, record)  # 1. the authoritative local record
        self._mirror(record)  # 2. MLflow (a failure only warns)
        self._share(record)  # 3. the shared storage, for the other machines
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
        if not self.config.tracking:
            return
        try:
            if self._tracker is None:

                self._tracker = Tracker(self.config.tracking_uri, self.study_dir, self.study.name)
            self._tracker.log_record(record)  # warns (TrackingWarning) and returns False on failure
        except Exception as err:  # noqa: BLE001 - the mirror never breaks a trial
            self._say(f"MLflow mirror failed for {record.trial_id}: {one_line(err, 300)}")

    def _share(self, record) -> None:
        try:
            self.records.put(record)
        except Exception as err:  # noqa: BLE001 - the local record is safe; sync sends it later

            self._say(
                f"could not store {record.trial_id}'s record in the shared storage "
                f"({redact_text(one_line(err, 300), self.config.storage_url)}); it is safe in "
                f"{self.study_dir / 'records'}; `harness sync --storage URL` sends it later"
            )

    def _tell(self, q, job, record, skipped: bool) -> None:

        if record.status == "completed":  # 3. Optuna
            if queue.complete(q, job, record.final[self.study.primary_metric]):
                self.stats.completed += 1
                if skipped:
                    self._say(f"{job.key}: completed record found; told Optuna without re-running")
            else:
                self._say(f"{job.key} was finished by another process; its record is kept")
        else:
            self._fail(q, job, record.error or "failed")

    def _fail(self, q, job, reason: str) -> None:

        self.stats.failed += 1
        retried = queue.fail(q, job, reason)
        what = f"attempt {job.attempt}/{job.max_attempt}"
        self._say(f"{job.key} failed ({what}): {reason}" + ("; re-queued" if retried else ""))

    def _release(self, q, job) -> None:

        if queue.release(q, job):
            self.stats.released += 1
            self._say(f"stopped; {job.key} is back in the queue")


# --------------------------------------------------------------------------------------------
# process entry


def install_stop_handlers(stop: threading.Event) -> None:
    def handler(signum, frame):  # noqa: ARG001
        stop.set()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


def watch_parent(stop: threading.Event, poll_s: float = 0.5) -> None:
    parent = os.getppid()

    def watch() -> None:
        while not stop.is_set():
            if os.getppid() != parent:
                _say("the runner is gone; stopping")
                stop.set()
                return
            time.sleep(poll_s)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m harness.runner.worker CONFIG.json", file=sys.stderr)
        return 2
    config = WorkerConfig.from_json(Path(argv[0]).read_text(encoding="utf-8"))
    for var in (*WorkerConfig._SECRETS.values(), *URL_ENV_VARS):  # trial processes never see the URLs
        os.environ.pop(var, None)
    prestart_forkserver()
    stop = threading.Event()
    install_stop_handlers(stop)
    if config.watch_parent:
        watch_parent(stop)
    try:
        Worker(config, stop).run()
    except Exception as err:  # noqa: BLE001 - one line, not a traceback, for known errors

        if not isinstance(err, HarnessError):
            raise
        _say(f"error: {err}", config.name)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
