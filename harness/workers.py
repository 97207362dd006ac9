"""Workers: processes that take trials from the queue and run each in its own child process.

A worker is pinned to one device (a GPU through ``CUDA_VISIBLE_DEVICES``, or a share of the CPU
cores through the thread-count variables) and loops: claim a waiting job, run its trial in a
child process (``python -m harness.trial_process``) under a timeout, then

1. write the local record (authoritative),
2. mirror it to MLflow (a failure only warns),
3. tell Optuna (COMPLETE with the primary metric, or FAIL with the reason, re-queued while the
   retry budget lasts).

Before running a job it looks for a completed local record of that trial: a worker that died
after writing the record but before telling Optuna left exactly that, and the trial is not run
again. While a job runs, a thread records Optuna heartbeats; jobs of dead workers are found by
their stale heartbeats and re-queued (see :mod:`harness.queue`).

SIGINT/SIGTERM stop a worker cleanly: the running trial's process group is terminated and its
job goes back to WAITING, so the next run resumes it. A worker started by ``harness run`` also
stops when the runner dies.

Entry point for the runner: ``python -m harness.workers CONFIG.json`` (a :class:`WorkerConfig`).
"""

from __future__ import annotations

import contextlib
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
from typing import Any

from harness.trial_process import DEFAULT_TRIAL_FN, THREADS_ENV, one_line

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", THREADS_ENV)


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
# one trial in a child process


@dataclass
class Outcome:
    """What came back from a trial process: a result, a failure reason, or an interruption."""

    result: dict[str, Any] | None = None  # TrialResult fields
    reason: str | None = None
    interrupted: bool = False
    wall_time_s: float = 0.0


START_ENV = "HARNESS_TRIAL_START"  # "fork" (default where available) or "exec"
_forkserver = None


def _start_method() -> str:
    import multiprocessing

    wanted = os.environ.get(START_ENV, "fork")
    if wanted == "fork" and "forkserver" in multiprocessing.get_all_start_methods():
        return "fork"
    return "exec"


def prestart_forkserver() -> None:
    """Boot the forkserver now, so its imports overlap the worker's own (saves seconds)."""
    if _start_method() == "fork":
        from multiprocessing import forkserver

        _fork_context()
        forkserver.ensure_running()


def _fork_context():
    """This worker's forkserver, with the heavy, CUDA-free imports done once."""
    global _forkserver
    if _forkserver is None:
        import importlib.util
        import multiprocessing

        ctx = multiprocessing.get_context("forkserver")
        preload = ["harness.trial_process", "harness.spec"]
        if importlib.util.find_spec("torch") is not None:
            preload.append("torch")  # importing torch never initialises CUDA
        ctx.set_forkserver_preload(preload)
        _forkserver = ctx
    return _forkserver


class _Child:
    """A started trial process, however it was started: wait, kill its group, exit status."""

    def __init__(self, handle, pid: int):
        self.handle, self.pid = handle, pid

    def wait(self, timeout: float) -> bool:
        if isinstance(self.handle, subprocess.Popen):
            try:
                self.handle.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return False
            return True
        self.handle.join(timeout)
        return self.handle.exitcode is not None

    @property
    def returncode(self) -> int | None:
        if isinstance(self.handle, subprocess.Popen):
            return self.handle.returncode
        return self.handle.exitcode

    def kill_group(self, grace_s: float) -> None:
        """SIGTERM the trial's process group, then SIGKILL what is left after ``grace_s``."""
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 30.0)):
            self._signal(sig)
            if self.wait(wait):
                break
        self._signal(signal.SIGKILL, quiet=True)  # stray children left in its group

    def _signal(self, sig: int, quiet: bool = False) -> None:
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            if not quiet and self.returncode is None:  # not yet its own group leader
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, sig)
        except PermissionError:
            pass


def _start_child(spec_path: Path, result_path: Path, trial_fn: str, log_path: Path, env) -> _Child:
    if _start_method() == "fork":
        from harness.trial_process import child_main

        proc = _fork_context().Process(
            target=child_main, args=(str(spec_path), str(result_path), trial_fn, str(log_path)),
            name="trial", daemon=False,
        )
        proc.start()
        return _Child(proc, proc.pid)
    cmd = [
        sys.executable, "-m", "harness.trial_process",
        "--spec", str(spec_path), "--result", str(result_path), "--trial-fn", trial_fn,
    ]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, start_new_session=True,  # its own group: Ctrl-C reaches the worker only
        )
    return _Child(proc, proc.pid)


def _signal_reason(returncode: int) -> str:
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    hint = " (out of memory? the kernel's OOM killer sends SIGKILL)" if name == "SIGKILL" else ""
    return f"trial process killed by {name}{hint}"


def _log_tail(log_path: Path, lines: int = 1) -> str:
    try:
        with open(log_path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 4096))
            tail = fh.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(tail[-lines:])


def run_trial_process(
    spec_json: str,
    *,
    trial_fn: str,
    work_dir: Path,
    log_path: Path,
    stem: str,
    timeout_s: float | None = None,
    stop: threading.Event | None = None,
    env: dict[str, str] | None = None,
    kill_grace_s: float = 10.0,
    poll_s: float = 0.1,
    header: str = "",
) -> Outcome:
    """Run one trial in a fresh process and wait for it (bounded by ``timeout_s`` and ``stop``)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    spec_path = work_dir / f"{stem}.{os.getpid()}.spec.json"
    result_path = work_dir / f"{stem}.{os.getpid()}.result.json"
    result_path.unlink(missing_ok=True)
    spec_path.write_text(spec_json, encoding="utf-8")
    if header:
        with open(log_path, "ab") as log:
            log.write(header.encode() + b"\n")
    timed_out = interrupted = False
    try:
        child = _start_child(spec_path, result_path, trial_fn, log_path, env)
        started = time.monotonic()  # after start: a (first) forkserver boot is not trial time
        while not child.wait(poll_s):
            if stop is not None and stop.is_set():
                interrupted = True
            elif timeout_s is not None and time.monotonic() - started > timeout_s:
                timed_out = True
            if interrupted or timed_out:
                child.kill_group(kill_grace_s)
                break
        wall = time.monotonic() - started
        payload = None
        if result_path.exists():
            try:
                payload = json.loads(result_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                payload = None
        if payload is not None and payload.get("ok"):
            return Outcome(result=payload["result"], wall_time_s=wall)  # finished, even if stopped
        if interrupted:
            return Outcome(interrupted=True, wall_time_s=wall)
        if timed_out:
            return Outcome(reason=f"timeout: exceeded --trial-timeout {timeout_s:g}s", wall_time_s=wall)
        if payload is not None:
            return Outcome(reason=str(payload.get("error") or "trial failed"), wall_time_s=wall)
        code = child.returncode
        if code is not None and code < 0:
            return Outcome(reason=_signal_reason(code), wall_time_s=wall)
        tail = _log_tail(log_path)
        return Outcome(
            reason=f"trial process exited with code {code}" + (f": {tail}" if tail else ""),
            wall_time_s=wall,
        )
    finally:
        spec_path.unlink(missing_ok=True)
        result_path.unlink(missing_ok=True)


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
        from harness import queue

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
        from harness import queue
        from harness.study import load_study

        self.config = config
        self.stop = stop or threading.Event()
        self.study = load_study(config.study_file)
        self.study_dir = Path(config.study_dir)
        self.storage = queue.open_storage(config.storage_url)
        self.queues = []
        for name in config.queues:
            q = queue.load_queue(self.storage, name)
            if q is None:
                raise queue.StorageError(f"the storage holds no study {name!r}; start it with `harness run`")
            self.queues.append(q)
        self.stats = WorkerStats()
        self.identity = f"{socket.gethostname()}:{os.getpid()} {config.device}"
        self._tracker = None
        self._last_stale_check = 0.0

    # ---- main loop ---------------------------------------------------------------------------

    def run(self) -> WorkerStats:
        from harness import queue

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
        from harness import queue

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
        from harness import queue

        queue.set_attr(q, job, queue.WORKER, self.identity)
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
        from harness import queue
        from harness.spec import TrialSpec

        spec = TrialSpec.model_validate(job.attrs[queue.SPEC])
        record, skipped = self._execute(spec, attempt=job.attempt, phase="compare")
        if record is None:
            self._release(q, job)
            return
        self._tell(q, job, record, skipped)

    def _run_tune_job(self, q, job) -> None:
        import optuna

        from harness import queue
        from harness.study import suggest_params, tuning_specs

        arm = str(job.attrs[queue.ARM])
        slot = int(job.attrs[queue.SLOT])
        tuning = self.study.tuning
        sampler = optuna.samplers.TPESampler(seed=tune_sampler_seed(tuning.sampler_seed, arm, slot))
        tq = queue.load_queue(self.storage, q.study_name, sampler=sampler)
        trial = optuna.trial.Trial(tq, job.optuna_id)
        params = suggest_params(self.study, trial)
        job.params = dict(params)
        specs = [tuning_specs(self.study, arm, params, seed) for seed in tuning.seeds]
        queue.set_attr(tq, job, queue.TRIAL_IDS, [s.trial_id for s in specs])
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
        from harness.errors import HarnessError
        from harness.records import read_record, record_path

        path = record_path(self.study_dir, trial_id)
        if not path.exists():
            return None
        try:
            record = read_record(path)
        except HarnessError:
            return None
        value = record.final.get(self.study.primary_metric)
        if record.status == "completed" and value is not None and math.isfinite(value):
            return record
        return None

    def _execute(self, spec, *, attempt: int, phase: str):
        """Run one spec (or find its completed record); returns (record, skipped) or (None, False)
        when the worker was stopped before the trial finished."""
        from harness.records import make_record, now_iso, record_path, write_record
        from harness.spec import TrialResult

        existing = self._completed_record(spec.trial_id)
        if existing is not None:
            self.stats.skipped += 1
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
                from harness.tracking import Tracker

                self._tracker = Tracker(self.config.tracking_uri, self.study_dir, self.study.name)
            self._tracker.log_record(record)  # warns (TrackingWarning) and returns False on failure
        except Exception as err:  # noqa: BLE001 - the mirror never breaks a trial
            self._say(f"MLflow mirror failed for {record.trial_id}: {one_line(err, 300)}")

    def _tell(self, q, job, record, skipped: bool) -> None:
        from harness import queue

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
        from harness import queue

        self.stats.failed += 1
        retried = queue.fail(q, job, reason)
        what = f"attempt {job.attempt}/{job.max_attempt}"
        self._say(f"{job.key} failed ({what}): {reason}" + ("; re-queued" if retried else ""))

    def _release(self, q, job) -> None:
        from harness import queue

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
        print("usage: python -m harness.workers CONFIG.json", file=sys.stderr)
        return 2
    config = WorkerConfig.from_json(Path(argv[0]).read_text(encoding="utf-8"))
    prestart_forkserver()
    stop = threading.Event()
    install_stop_handlers(stop)
    if config.watch_parent:
        watch_parent(stop)
    try:
        Worker(config, stop).run()
    except Exception as err:  # noqa: BLE001 - one line, not a traceback, for known errors
        from harness.errors import HarnessError

        if not isinstance(err, HarnessError):
            raise
        _say(f"error: {err}", config.name)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
