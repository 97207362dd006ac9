"""Run a study: queue its trials in Optuna storage and execute them with a pool of workers.

``run_study(path)`` is what ``harness run`` does:

1. load and check the study (bad input raises ``ConfigError`` before anything is created);
2. write ``<study_dir>/study.yaml`` (the resolved study) and create the Optuna storage once
   (default ``sqlite:///<study_dir>/optuna.db``) before any worker opens it;
3. queue the design idempotently: a trial id already queued, running or completed is not added
   again; one whose last attempt failed is queued again (a re-run retries failures);
4. start the workers (:mod:`harness.workers`): one per GPU, or ``--workers`` CPU workers, each
   a process that runs every trial in a child process of its own;
5. print one progress line on stderr whenever the counts change (and every 30 s);
6. return a :class:`RunSummary` whose ``exit_code`` is 0 (all completed), 1 (some failed or
   not run) or 130 (interrupted; re-running resumes).

With ``tuning:`` the tuning phase runs first: an Optuna study ``<name>.tune.<arm>`` per arm with
exactly ``n_trials`` trials each (equal budget; completed ones count on resume), then the best
parameters of each arm (``study.apply_best``) give the comparison trials, run like any study.

``run_worker`` joins an existing study from any machine (no queueing); ``study_status`` reports
trials by state with failure reasons.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from harness.errors import ConfigError
from harness.trial_process import DEFAULT_TRIAL_FN
from harness.urls import redact_url
from harness.workers import Slot, WorkerConfig, plan_slots

HEARTBEAT_INTERVAL_S = 10
GRACE_PERIOD_S = 60
POLL_S = 1.0
PROGRESS_EVERY_S = 30.0
SHUTDOWN_TIMEOUT_S = 60.0
EXIT_OK, EXIT_SOME_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


@dataclass
class RunOptions:
    workers: int | None = None  # CPU workers (default 1); with GPUs: default one per GPU
    storage: str | None = None  # Optuna storage URL; default sqlite in the study folder
    tracking_uri: str | None = None  # MLflow; default sqlite in the study folder
    tracking: bool = True  # mirror records to MLflow
    retries: int = 0
    trial_timeout: float | None = None
    trial_fn: str = DEFAULT_TRIAL_FN
    heartbeat_interval: float = HEARTBEAT_INTERVAL_S
    grace_period: float | None = None  # default: max(GRACE_PERIOD_S, 3 x heartbeat_interval)
    poll_interval: float = POLL_S
    kill_grace: float = 10.0  # SIGTERM -> SIGKILL for a trial process
    progress_every: float = PROGRESS_EVERY_S
    shutdown_timeout: float = SHUTDOWN_TIMEOUT_S
    gpus: list[str] | None = None  # None: detect
    stream: TextIO | None = None  # progress and notices (default stderr)

    @property
    def grace(self) -> float:
        if self.grace_period is not None:
            return self.grace_period
        return max(GRACE_PERIOD_S, 3 * self.heartbeat_interval)

    def out(self) -> TextIO:
        return self.stream or sys.stderr

    def check(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise ConfigError(f"--workers: must be at least 1, got {self.workers}")
        if self.retries < 0:
            raise ConfigError(f"--retries: must be 0 or more, got {self.retries}")
        if self.trial_timeout is not None and not self.trial_timeout > 0:
            raise ConfigError(f"--trial-timeout: must be a positive number of seconds, got {self.trial_timeout}")
        if not self.heartbeat_interval > 0:
            raise ConfigError("--heartbeat-interval: must be positive")
        if not self.grace > self.heartbeat_interval:
            raise ConfigError("--grace-period: must be longer than the heartbeat interval")
        check_trial_fn(self.trial_fn)


def check_trial_fn(path: str) -> None:
    """``module:function`` whose module can be found (it is imported only by trial processes)."""
    module, sep, attr = path.partition(":")
    if not sep or not module or not attr.isidentifier():
        raise ConfigError(f"--trial-fn: expected 'module:function', got {path!r}")
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise ConfigError(f"--trial-fn: no module named {module!r}")


# --------------------------------------------------------------------------------------------
# summaries


@dataclass
class TrialOutcome:
    phase: str  # "compare" or "tune"
    key: str  # trial id, or "<arm> #<slot>" for tuning trials
    status: str  # completed / running / waiting / failed / not queued
    attempts: int = 0
    reasons: list[tuple[int, str]] = field(default_factory=list)  # (attempt, why) of failures
    worker: str | None = None

    @property
    def reason(self) -> str | None:
        return self.reasons[-1][1] if self.reasons else None


@dataclass
class RunSummary:
    study: str
    study_dir: Path
    storage_url: str
    trials: list[TrialOutcome] = field(default_factory=list)
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)

    def by_status(self, status: str, phase: str | None = None) -> list[TrialOutcome]:
        return [t for t in self.trials if t.status == status and (phase is None or t.phase == phase)]

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return EXIT_INTERRUPTED
        if self.trials and all(t.status == "completed" for t in self.trials) and not self.notes:
            return EXIT_OK
        return EXIT_SOME_FAILED

    def format(self) -> str:
        lines = []
        for phase in ("tune", "compare"):
            trials = [t for t in self.trials if t.phase == phase]
            if not trials:
                continue
            what = "tuning trials" if phase == "tune" else "trials"
            counts = ", ".join(
                f"{n} {status}"
                for status in ("completed", "failed", "running", "waiting", "not queued")
                if (n := sum(t.status == status for t in trials))
            )
            lines.append(f"{self.study}: {len(trials)} {what}: {counts}")
            for t in trials:
                if t.status == "failed":
                    lines.append(f"  failed {t.key} (attempt {t.attempts}): {t.reason}")
        lines.extend(self.notes)
        if self.interrupted:
            lines.append(
                "interrupted: running trials went back to the queue; "
                "run the same command again to resume"
            )
        elif self.exit_code == EXIT_SOME_FAILED and any(t.status == "failed" for t in self.trials):
            lines.append(
                "run the same command again to retry the failed trials "
                f"(logs: {self.study_dir / 'logs'})"
            )
        lines.append(f"records: {self.study_dir / 'records'}")
        return "\n".join(lines)


def _outcomes(q, phase: str, keys: list[str] | None = None, label=None) -> list[TrialOutcome]:
    from harness import queue

    groups = queue.attempts(queue.jobs(q))
    order = keys if keys is not None else sorted(groups)
    out = []
    for key in order:
        tries = groups.get(key)
        if not tries:
            out.append(TrialOutcome(phase, label(key) if label else key, "not queued"))
            continue
        last = tries[-1]
        reasons = [(j.attempt, str(j.reason)) for j in tries if j.status == "failed" and j.reason]
        out.append(
            TrialOutcome(
                phase,
                label(key) if label else key,
                last.status,
                attempts=last.attempt,
                reasons=reasons,
                worker=last.attrs.get(queue.WORKER),
            )
        )
    return out


def _queue_outcomes(q, phase: str) -> list[TrialOutcome]:
    """Every trial of one queue (tuning slots labelled ``<arm> #<slot>``)."""
    if phase == "tune":
        return _outcomes(q, phase, label=_slot_label(q.study_name.rsplit(".tune.", 1)[-1]))
    return _outcomes(q, phase)


def _slot_label(arm: str):
    return lambda key: f"{arm} #{int(key[4:])}" if key.startswith("slot") else f"{arm} {key}"


# --------------------------------------------------------------------------------------------
# progress


class Progress:
    """One line per change on a stream: ``done/total, running, failed, waiting, ETA``."""

    def __init__(self, label: str, queues: list, *, keys: set[str] | None, workers: int,
                 stream: TextIO, every_s: float):
        self.label, self.queues, self.keys = label, queues, keys
        self.workers, self.stream, self.every_s = max(1, workers), stream, every_s
        self._last: tuple | None = None
        self._last_at = 0.0

    def retarget(self, label: str, queues: list, keys: set[str] | None) -> None:
        self.label, self.queues, self.keys, self._last = label, queues, keys, None

    def counts(self):
        from harness import queue

        total = queue.Counts()
        for q in self.queues:
            total = total.add(queue.count(q, self.keys))
        return total

    def tick(self, force: bool = False) -> None:
        try:
            c = self.counts()
        except Exception as err:  # noqa: BLE001 - a busy database only delays the display
            if force:
                print(f"[{self.label}] progress unavailable: {type(err).__name__}", file=self.stream)
            return
        state = c.as_tuple()
        now = time.monotonic()
        if not force and state == self._last and now - self._last_at < self.every_s:
            return
        self._last, self._last_at = state, now
        print(self.line(c), file=self.stream, flush=True)

    def line(self, c) -> str:
        from harness.study import format_duration

        text = (
            f"[{self.label}] {c.completed}/{c.total} done, {c.running} running, "
            f"{c.failed} failed, {c.waiting} waiting"
        )
        if c.durations:
            median = statistics.median(c.durations)
            left = c.running + c.waiting
            text += f"; median {format_duration(median)}/trial"
            if left:
                rounds = math.ceil(left / self.workers)
                text += f", ETA ~{format_duration(rounds * median)}"
        return text


# --------------------------------------------------------------------------------------------
# the worker pool


class _Interrupt:
    """SIGINT/SIGTERM while the pool runs: the first stops workers cleanly, a second kills."""

    def __init__(self) -> None:
        self.count = 0
        self.wake = threading.Event()
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _Interrupt:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame) -> None:  # noqa: ARG002
        self.count += 1
        self.wake.set()

    def __exit__(self, *exc) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


def _watch(procs, interrupt: _Interrupt, progress, on_tick, opts: RunOptions) -> None:
    """Until every worker has exited: queue phases, show progress, relay Ctrl-C."""
    out = opts.out()
    signalled_at: float | None = None
    killed = False
    while True:
        alive = [p for _, p in procs if p.poll() is None]
        if on_tick is not None and not interrupt.count:
            on_tick()
        if progress is not None:
            progress.tick()
        if not alive:
            return
        if interrupt.count and signalled_at is None:
            print("[harness] stopping: terminating running trials and re-queueing them "
                  "(Ctrl-C again to kill)", file=out, flush=True)
            for p in alive:
                with contextlib.suppress(ProcessLookupError):
                    p.send_signal(signal.SIGTERM)
            signalled_at = time.monotonic()
        overdue = signalled_at is not None and time.monotonic() - signalled_at > opts.shutdown_timeout
        if (interrupt.count > 1 or overdue) and not killed:
            for p in alive:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
            killed = True
        interrupt.wake.wait(opts.poll_interval)
        interrupt.wake.clear()


def run_pool(
    *,
    study_file: Path,
    study_dir: Path,
    storage_url: str,
    queue_names: list[str],
    slots: list[Slot],
    opts: RunOptions,
    progress: Progress | None,
    watch_parent: bool = True,
    hold_file: Path | None = None,
    on_tick: Any = None,
) -> bool:
    """Run one worker process per slot until the queues are drained; True if interrupted.

    While ``hold_file`` exists, idle workers wait for more jobs instead of exiting;
    ``on_tick()`` runs every poll (the runner queues the next phase from there).
    """
    config_dir = study_dir / "tmp"
    config_dir.mkdir(parents=True, exist_ok=True)
    procs: list[tuple[Slot, subprocess.Popen]] = []
    out = opts.out()
    with _Interrupt() as interrupt:
        for slot in slots:
            config = WorkerConfig(
                name=slot.name,
                study_file=str(study_file),
                study_dir=str(study_dir),
                storage_url=storage_url,
                queues=list(queue_names),
                trial_fn=opts.trial_fn,
                tracking_uri=opts.tracking_uri,
                tracking=opts.tracking,
                trial_timeout=opts.trial_timeout,
                device=slot.device,
                heartbeat_interval=opts.heartbeat_interval,
                grace_period=opts.grace,
                poll_interval=opts.poll_interval,
                kill_grace=opts.kill_grace,
                watch_parent=watch_parent,
                hold_file=str(hold_file) if hold_file is not None else None,
            )
            path = config_dir / f"worker-{os.getpid()}-{slot.name}.json"
            path.write_text(config.to_json(), encoding="utf-8")
            env = {**os.environ, **slot.env, **config.secret_env()}
            proc = subprocess.Popen([sys.executable, "-m", "harness.workers", str(path)], env=env)
            procs.append((slot, proc))
        try:
            _watch(procs, interrupt, progress, on_tick, opts)
        except BaseException:
            for _, p in procs:  # the runner failed: do not leave workers waiting on a hold file
                with contextlib.suppress(ProcessLookupError):
                    p.terminate()
            raise
        for slot, p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=30)
            if p.returncode not in (0, None) and not interrupt.count:
                print(f"[harness] worker {slot.name} exited with code {p.returncode}", file=out, flush=True)
        for slot in slots:
            (config_dir / f"worker-{os.getpid()}-{slot.name}.json").unlink(missing_ok=True)
        if progress is not None:
            progress.tick()
        return bool(interrupt.count)


# --------------------------------------------------------------------------------------------
# run


@dataclass
class _Setup:
    study: Any
    study_dir: Path
    study_file: Path  # the snapshot the workers load
    storage_url: str
    storage: Any


def _lock(study_dir: Path):
    """An exclusive lock on the study folder while queueing (two `harness run` at once)."""
    import fcntl

    @contextlib.contextmanager
    def held():
        with open(study_dir / ".queue.lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    return held()


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def prepare(study_path: str | Path, opts: RunOptions) -> _Setup:
    """Check everything, then create the study folder, its snapshot and the storage (once)."""
    from harness import queue
    from harness.study import dump_study, expand, load_study, study_dir

    study = load_study(study_path)
    if study.tuning is None:
        expand(study)  # every trial must build (raises ConfigError)
    opts.check()
    folder = study_dir(study)
    storage = None
    if opts.storage:  # a bad URL fails before anything is created locally
        storage = queue.open_storage(opts.storage, create=True)
    folder.mkdir(parents=True, exist_ok=True)
    snapshot = folder / "study.yaml"
    _write_atomic(snapshot, dump_study(study))
    url = opts.storage or queue.default_storage_url(folder)
    if storage is None:
        storage = queue.open_storage(url, create=True)
    return _Setup(study, folder, snapshot.resolve(), url, storage)


def best_params(setup: _Setup) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Each arm's best tuning parameters (ties: the lowest slot), and notes for arms with none."""
    from optuna.trial import TrialState

    from harness import queue

    study = setup.study
    best, notes = {}, []
    sign = 1 if study.direction == "maximize" else -1
    for arm in study.arms:
        q = queue.load_queue(setup.storage, queue.tune_study_name(study.name, arm.name))
        done = [
            j for j in queue.latest(queue.jobs(q)).values()
            if j.state == TrialState.COMPLETE and j.value is not None
        ]
        if not done:
            notes.append(f"arm {arm.name}: no completed tuning trial; its comparison trials were not run")
            continue
        top = max(done, key=lambda j: (sign * j.value, -int(j.attrs.get(queue.SLOT, 0))))
        best[arm.name] = dict(top.params)
    return best, notes


class _Phases:
    """What ``harness run`` queues, in order: the tuning budget, then the comparison trials.

    With tuning, the comparison trials are queued from inside the pool as soon as every tuning
    job has finished, so the same workers carry on (no restart between phases).
    """

    def __init__(self, setup: _Setup, opts: RunOptions, workers: int):
        from harness import queue

        self.setup, self.opts, self.out = setup, opts, opts.out()
        study = setup.study
        self.main_q = queue.create_queue(setup.storage, queue.compare_study_name(study.name), study.direction)
        self.tune: dict[str, Any] = {}
        self.specs: list | None = None
        self.notes: list[str] = []
        self.progress = Progress(study.name, [self.main_q], keys=None, workers=workers,
                                 stream=self.out, every_s=opts.progress_every)
        self.hold_file = setup.study_dir / "tmp" / f"hold-{os.getpid()}"
        if study.tuning is not None:
            self.tune = {
                a.name: queue.create_queue(setup.storage, queue.tune_study_name(study.name, a.name), study.direction)
                for a in study.arms
            }

    @property
    def queues(self) -> list:
        return [*self.tune.values(), self.main_q]

    @property
    def slot_keys(self) -> list[str]:
        return [f"slot{i:04d}" for i in range(self.setup.study.tuning.n_trials)]

    def start(self) -> None:
        from harness import queue
        from harness.study import expand

        study = self.setup.study
        if not self.tune:
            self.queue_compare(expand(study))
            return
        with _lock(self.setup.study_dir):
            for arm, q in self.tune.items():
                report = queue.enqueue_slots(q, arm=arm, n_trials=study.tuning.n_trials, retries=self.opts.retries)
                if report.added or report.requeued:
                    print(f"[harness] tuning {arm}: queued {report}", file=self.out, flush=True)
        self.progress.retarget(f"{study.name} tune", list(self.tune.values()), set(self.slot_keys))
        self.hold_file.parent.mkdir(parents=True, exist_ok=True)
        self.hold_file.touch()
        self.tick()

    def tick(self) -> None:
        """Queue the comparison trials once tuning is over (called every poll of the pool)."""
        from harness import queue
        from harness.study import apply_best

        if self.specs is not None or not self.tune or any(queue.has_work(q) for q in self.tune.values()):
            return
        best, self.notes = best_params(self.setup)
        if self.notes:
            self.specs = []
        else:
            for arm, params in best.items():
                shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())
                print(f"[harness] best {arm}: {shown}", file=self.out, flush=True)
            self.queue_compare(apply_best(self.setup.study, best))
        self.hold_file.unlink(missing_ok=True)

    def queue_compare(self, specs: list) -> None:
        from harness import queue

        with _lock(self.setup.study_dir):
            report = queue.enqueue_specs(self.main_q, specs, phase="compare", retries=self.opts.retries)
        print(f"[harness] queued {report} ({len(specs)} trials in the design)", file=self.out, flush=True)
        self.specs = specs
        self.progress.retarget(self.setup.study.name, [self.main_q], {s.trial_id for s in specs})

    def pending(self) -> bool:
        """Whether workers are needed: something waiting or running, or a phase still to queue."""
        from harness import queue

        return self.specs is None or any(queue.has_work(q) for q in self.queues)

    def close(self) -> None:
        self.hold_file.unlink(missing_ok=True)


def run_study(study_path: str | Path, opts: RunOptions | None = None) -> RunSummary:
    """``harness run``: queue the study's design and run it to the end (see the module doc)."""
    opts = opts or RunOptions()
    setup = prepare(study_path, opts)
    study, out = setup.study, opts.out()
    slots = plan_slots(opts.workers, gpus=opts.gpus)
    print(
        f"[harness] study {study.name}: {setup.study_dir} | storage {redact_url(setup.storage_url)} "
        f"| {len(slots)} worker(s) on {', '.join(s.device for s in slots)}",
        file=out, flush=True,
    )
    summary = RunSummary(study.name, setup.study_dir, setup.storage_url)
    phases = _Phases(setup, opts, len(slots))
    try:
        phases.start()
        if phases.pending():
            summary.interrupted = run_pool(
                study_file=setup.study_file, study_dir=setup.study_dir, storage_url=setup.storage_url,
                queue_names=[q.study_name for q in phases.queues], slots=slots, opts=opts,
                progress=phases.progress, hold_file=phases.hold_file if phases.specs is None else None,
                on_tick=phases.tick,
            )
        else:
            phases.progress.tick()
            print("[harness] nothing to run: every trial has completed", file=out, flush=True)
        if not summary.interrupted:
            phases.tick()  # tuning ended with the last worker: queue comparisons for the next run
    finally:
        phases.close()
    for arm, q in phases.tune.items():
        summary.trials += _outcomes(q, "tune", phases.slot_keys, label=_slot_label(arm))
    summary.notes += phases.notes
    if phases.specs is not None:
        summary.trials += _outcomes(phases.main_q, "compare", [s.trial_id for s in phases.specs])
    elif not summary.interrupted:
        summary.notes.append("the comparison trials were not queued (tuning did not finish)")
    return summary


# --------------------------------------------------------------------------------------------
# worker (join from anywhere) and status


def _existing_queues(study, storage) -> list[tuple[str, Any]]:
    from harness import queue

    names = []
    if study.tuning is not None:
        names += [("tune", queue.tune_study_name(study.name, a.name)) for a in study.arms]
    names.append(("compare", queue.compare_study_name(study.name)))
    return [(phase, q) for phase, name in names if (q := queue.load_queue(storage, name)) is not None]


def _study_from(ref: str | Path):
    """(study, its folder, its file) from a study file or a study folder holding ``study.yaml``."""
    from harness.study import load_study, study_dir

    ref = Path(ref)
    if ref.is_dir():
        if not (ref / "study.yaml").exists():
            raise ConfigError(f"{ref}: no study.yaml here; give the study file or its output folder")
        return load_study(ref / "study.yaml"), ref, (ref / "study.yaml").resolve()
    study = load_study(ref)
    return study, study_dir(study), ref.resolve()


def run_worker(study_ref: str | Path, opts: RunOptions | None = None) -> RunSummary:
    """``harness worker``: work on an existing study's queue until nothing is left (no queueing)."""
    from harness import queue

    opts = opts or RunOptions()
    study, folder, study_file = _study_from(study_ref)
    opts.check()
    url = opts.storage or queue.default_storage_url(folder)
    storage = queue.open_storage(url, create=False)
    found = _existing_queues(study, storage)
    if not found:
        raise queue.StorageError(
            f"no study {study.name!r} in {redact_url(url)}; start it with `harness run` first"
        )
    folder.mkdir(parents=True, exist_ok=True)
    slots = plan_slots(opts.workers, gpus=opts.gpus)
    out = opts.out()
    print(f"[harness] worker for {study.name}: storage {redact_url(url)} | {len(slots)} worker(s) on "
          f"{', '.join(s.device for s in slots)}", file=out, flush=True)
    progress = Progress(study.name, [q for _, q in found], keys=None, workers=len(slots),
                        stream=out, every_s=opts.progress_every)
    summary = RunSummary(study.name, folder, url)
    summary.interrupted = run_pool(study_file=study_file, study_dir=folder, storage_url=url,
                                   queue_names=[q.study_name for _, q in found], slots=slots,
                                   opts=opts, progress=progress)
    for phase, q in found:
        summary.trials += _queue_outcomes(q, phase)
    return summary


@dataclass
class StatusReport:
    study: str
    study_dir: Path
    storage_url: str
    trials: list[TrialOutcome] = field(default_factory=list)
    started: bool = True

    def format(self) -> str:
        lines = [f"study {self.study} ({self.study_dir}), storage {redact_url(self.storage_url)}"]
        if not self.started:
            lines.append("not started: no trials queued yet (run `harness run` on the study file)")
            return "\n".join(lines)
        for phase in ("tune", "compare"):
            trials = [t for t in self.trials if t.phase == phase]
            if not trials:
                continue
            counts = {s: sum(t.status == s for t in trials) for s in ("completed", "running", "waiting", "failed")}
            name = "tuning" if phase == "tune" else "comparison"
            lines.append(
                f"{name}: {len(trials)} trials: " + ", ".join(f"{n} {s}" for s, n in counts.items())
            )
            for t in trials:
                if t.status == "running":
                    lines.append(f"  running  {t.key} (attempt {t.attempts}) on {t.worker or '?'}")
            for t in trials:
                if t.status == "failed":
                    lines.append(f"  failed   {t.key} (attempt {t.attempts}): {t.reason}")
                    for attempt, why in t.reasons[:-1]:
                        lines.append(f"           earlier attempt {attempt}: {why}")
                elif t.reasons:
                    lines.append(f"  {t.status:<8} {t.key} (attempt {t.attempts}), earlier failures:")
                    for attempt, why in t.reasons:
                        lines.append(f"           attempt {attempt}: {why}")
        return "\n".join(lines)


def study_status(study_ref: str | Path, storage: str | None = None) -> StatusReport:
    """``harness status``: every trial's state (latest attempt), failure reasons and attempts."""
    from harness import queue

    study, folder, _ = _study_from(study_ref)
    url = storage or queue.default_storage_url(folder)
    report = StatusReport(study.name, folder, url)
    if storage is None and not (folder / "optuna.db").exists():
        report.started = False
        return report
    st = queue.open_storage(url, create=False)
    found = _existing_queues(study, st)
    if not found:
        report.started = False
        return report
    for phase, q in found:
        report.trials += _queue_outcomes(q, phase)
    return report


__all__ = [
    "RunOptions",
    "RunSummary",
    "StatusReport",
    "TrialOutcome",
    "run_study",
    "run_worker",
    "study_status",
    "prepare",
    "Progress",
]
