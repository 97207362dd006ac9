"""Run a study: queue its trials in Optuna storage and execute them with a pool of workers.

``run_study(path)`` is what ``harness run`` does:

1. load and check the study (bad input raises ``ConfigError`` before anything is created);
2. write ``<study_dir>/study.yaml`` (the resolved study) and create the Optuna storage once
   (default ``sqlite:///<study_dir>/optuna.db``) before any worker opens it;
3. queue the design idempotently: a trial id already queued, running or completed is not added
   again; one whose last attempt failed is queued again (a re-run retries failures);
4. start the workers (:mod:`harness.runner.worker`): one per GPU (per set of ``resources.gpus``
   GPUs), or ``--workers`` CPU workers, each a process that runs every trial in a child process of
   its own; or, with ``--executor slurm|ray``, submit one scheduler job per trial, each running
   that trial through the same worker machinery (:mod:`harness.runner.executors`);
5. print one progress line on stderr whenever the counts change (and every 30 s);
6. return a :class:`RunSummary` whose ``exit_code`` is 0 (all completed), 1 (some failed or
   not run) or 130 (interrupted; re-running resumes).

With ``tuning:`` the tuning phase runs first: an Optuna study ``<name>.tune.<arm>.<space key>``
per arm and search space with exactly ``n_trials`` trials each (equal budget; completed ones
count on resume), then the best parameters of each arm (``study.apply_best``) give the
comparison trials, run like any study.

With ``sequential:`` only the first look is queued at first; each next look is queued, for the
undecided arms and their controls, as soon as the look before it has been read
(:mod:`harness.runner.looks`: by this runner or by any worker, exactly once). A study that
stopped early is complete: the looks it never needed are not "not run".

Before anything is queued the study folder must be writable with some free space
(:func:`harness.runner.output_dir.check_output_dir`; a clear error, exit 2, otherwise).

``run_worker`` joins an existing study from any machine (it queues nothing but a sequential
study's next looks, which its workers work out themselves). The pool of worker
processes lives in :mod:`harness.runner.pool`, summaries and ``study_status`` in :mod:`harness.runner.outcomes`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from optuna.trial import TrialState

from harness import store as study_db
from harness.decide.sequential.segments import every_segment, phase_of
from harness.decide.sequential.versions import check_study_rule
from harness.ground.console import say
from harness.ground.files import atomic_write, file_lock
from harness.ground.urls import redact_url
from harness.runner import queue
from harness.runner.executors import executor_name, make_executor
from harness.runner.executors.local import local_slots
from harness.runner.executors.scheduled import Scheduled
from harness.runner.looks import Looks, has_looks, look_lines
from harness.runner.options import RunOptions
from harness.runner.outcomes import (
    RunSummary,
    StatusReport,
    TrialOutcome,
    existing_queues,
    queue_outcomes,
    slot_label,
    study_from,
    study_status,
    trial_outcomes,
)
from harness.runner.output_dir import check_output_dir, make_output_dir
from harness.runner.pool import Progress, run_pool
from harness.runner.seed_check import seed_check
from harness.study.expand import apply_best, expand, study_dir
from harness.study.load import dump_study, load_study
from harness.study.noop import check_arms_differ
from harness.study.search_space import tuning_space_key
from harness.tracking.mlflow_mirror import sync

# --------------------------------------------------------------------------------------------
# run


@dataclass
class _Setup:
    study: Any
    study_dir: Path
    study_file: Path  # the snapshot the workers load
    storage_url: str
    storage: Any


QUEUE_LOCK = ".queue.lock"  # in the study folder: one runner queues at a time (two `harness run` at once)


def prepare(study_path: str | Path, opts: RunOptions, check: Callable[[Any], None] | None = None) -> _Setup:
    """Check everything (``check(study)`` too: the executor's), then create the study folder, the
    storage (once) and its snapshot.

    A sequential study whose file changes the rule fixed at its first look is refused before
    the snapshot is written (``opts.new_version``: its next version is fixed instead)."""

    study = load_study(study_path)
    if study.tuning is None:
        expand(study)  # every trial must build (raises ConfigError)
    check_arms_differ(study)  # a no-op arm would spend its seeds measuring noise
    if check is not None:
        check(study)
    opts.warn_over_capacity()
    folder = study_dir(study)
    check_output_dir(folder, min_free_mb=opts.min_free_mb)  # a full disk fails before anything starts
    storage = None
    if opts.storage:  # a bad URL fails before anything is created locally
        storage = study_db.open_storage(opts.storage, create=True)
    make_output_dir(folder)
    url = opts.storage or study_db.default_storage_url(folder)
    if storage is None:
        storage = study_db.open_storage(url, create=True)
    check_study_rule(study, storage, folder, new_version=opts.new_version, say=partial(say, stream=opts.out()))
    snapshot = folder / "study.yaml"
    atomic_write(snapshot, dump_study(study))
    return _Setup(study, folder, snapshot.resolve(), url, storage)


def best_params(setup: _Setup) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Each arm's best tuning parameters (ties: the lowest slot), and notes for arms with none."""

    study = setup.study
    best, notes = {}, []
    sign = 1 if study.direction == "maximize" else -1
    for arm in study.arms:
        q = queue.load_queue(setup.storage, study_db.tune_study_name(study.name, arm.name, tuning_space_key(study)))
        done = [
            j for j in queue.latest(queue.jobs(q)).values() if j.state == TrialState.COMPLETE and j.value is not None
        ]
        if not done:
            notes.append(f"arm {arm.name}: no completed tuning trial; its comparison trials were not run")
            continue
        top = max(done, key=lambda j: (sign * j.value, -int(j.attrs.get(study_db.SLOT, 0))))
        best[arm.name] = dict(top.params)
    return best, notes


class _Phases:
    """What ``harness run`` queues, in order: the tuning budget, then the comparison trials.

    With tuning, the comparison trials are queued from inside the pool as soon as every tuning
    job has finished, so the same workers carry on (no restart between phases); the queue's
    ``compare_queued`` attribute tells the workers of other machines to wait for them until then.
    A sequential study queues its looks one by one as they fall due (the workers do too).
    """

    def __init__(self, setup: _Setup, opts: RunOptions, workers: int):

        self.setup, self.opts, self.out = setup, opts, opts.out()
        study = setup.study
        self.main_q = queue.create_queue(setup.storage, study_db.compare_study_name(study.name), study.direction)
        self.tune: dict[str, Any] = {}
        self.specs: list | None = None
        self.notes: list[str] = []
        self.progress = Progress(
            study.name, [self.main_q], keys=None, workers=workers, stream=self.out, every_s=opts.progress_every
        )
        self.hold_file = setup.study_dir / "tmp" / f"hold-{os.getpid()}"
        self.looks = None
        if has_looks(study):
            self.looks = Looks(study, setup.study_file, setup.storage_url, self.main_q, self._say)
        if study.tuning is not None:
            self.tune = {
                a.name: queue.create_queue(
                    setup.storage,
                    study_db.tune_study_name(study.name, a.name, tuning_space_key(study)),
                    study.direction,
                )
                for a in study.arms
            }

    @property
    def queues(self) -> list:
        return [*self.tune.values(), self.main_q]

    @property
    def slot_keys(self) -> list[str]:
        return [queue.slot_key(i) for i in range(self.setup.study.tuning.n_trials)]

    def _say(self, message: str) -> None:
        say(message, stream=self.out)

    def start(self) -> None:
        """Queue what can be queued now: a sequential study's due looks, the design, or the
        tuning budget (then the comparison trials follow from :meth:`tick`)."""
        study = self.setup.study
        if self.looks is not None:
            self.queue_looks()
            return
        if not self.tune:
            self.queue_compare(expand(study))
            return
        queue.set_queue_attr(self.main_q, queue.COMPARE_QUEUED, False)
        with file_lock(self.setup.study_dir / QUEUE_LOCK):
            for arm, q in self.tune.items():
                report = queue.enqueue_slots(q, arm=arm, n_trials=study.tuning.n_trials, retries=self.opts.retries)
                if report.added or report.requeued:
                    self._say(f"tuning {arm}: queued {report}")
        self.progress.retarget(f"{study.name} tune", list(self.tune.values()), set(self.slot_keys))
        self.hold_file.parent.mkdir(parents=True, exist_ok=True)
        self.hold_file.touch()
        self.tick()

    def tick(self) -> None:
        """Queue what has fallen due (called every poll of the pool): a sequential study's next
        looks; the comparison trials once tuning is over."""

        if self.looks is not None:
            self.looks.advance()
            return
        if self.specs is not None or not self.tune or any(queue.has_work(q) for q in self.tune.values()):
            return
        best, self.notes = best_params(self.setup)
        if self.notes:
            self.specs = []
        else:
            for arm, params in best.items():
                shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())
                self._say(f"best {arm}: {shown}")
            self.queue_compare(apply_best(self.setup.study, best))
        queue.set_queue_attr(self.main_q, queue.COMPARE_QUEUED, True)
        self.hold_file.unlink(missing_ok=True)

    def queue_compare(self, specs: list) -> None:

        with file_lock(self.setup.study_dir / QUEUE_LOCK):
            report = queue.enqueue_specs(self.main_q, specs, phase="compare", retries=self.opts.retries)
        self._say(f"queued {report} ({len(specs)} trials in the design)")
        self.specs = specs
        self.progress.retarget(self.setup.study.name, [self.main_q], {s.trial_id for s in specs})

    def queue_looks(self) -> None:
        """A sequential study: retry the failed trials of the looks queued before (a re-run),
        then queue what is due (the first look of a new study)."""

        design = expand(self.setup.study)
        queued = every_segment(self.setup.study)  # a compute-look study's: every segment (else the design)
        queue.set_queue_attr(self.main_q, queue.RETRIES, self.opts.retries)  # for looks queued anywhere
        with file_lock(self.setup.study_dir / QUEUE_LOCK):
            report = queue.enqueue_specs(self.main_q, queued, phase=phase_of, retries=self.opts.retries, add_new=False)
        if report.requeued or report.cancelled:
            self._say(f"queued {report}")
        self.specs = design
        self.progress.retarget(self.setup.study.name, [self.main_q], {s.trial_id for s in queued})
        self.looks.advance(force=True)

    def compare_keys(self) -> list[str]:
        """The comparison trials to report: the design's; of a sequential study, those its looks
        queued (a study that stopped early never needed the rest); of a compute-look study, every
        segment its looks queued (an arm stopped at a look never ran its later ones)."""

        keys = [s.trial_id for s in self.specs]
        if self.looks is None:
            return keys
        if self.setup.study.compute_looks is not None:
            keys = [s.trial_id for s in every_segment(self.setup.study)]
        queued = queue.latest(queue.jobs(self.main_q))
        return [k for k in keys if k in queued]

    def pending(self) -> bool:
        """Whether workers are needed: something waiting or running, or a phase or look still to queue."""

        unfinished = self.looks is not None and not self.looks.finished
        return self.specs is None or unfinished or any(queue.has_work(q) for q in self.queues)

    def close(self) -> None:
        self.hold_file.unlink(missing_ok=True)


def run_study(study_path: str | Path, opts: RunOptions | None = None) -> RunSummary:
    """``harness run``: queue the study's design and run it to the end (see the module doc);
    ``opts.new_version``: a sequential study whose file changes its rule starts the rule's next version.
    ``opts.executor`` (else the study's ``executor:``) says where the trials run
    (:mod:`harness.runner.executors`)."""
    opts = opts or RunOptions()
    setup, executor, slots = _prepare_with_executor(study_path, opts)
    study, out = setup.study, opts.out()
    where = (
        f"{len(slots)} worker(s) on {', '.join(s.device for s in slots)}"
        if executor is None
        else f"executor {executor.name}: one job per trial"
    )
    say(f"study {study.name}: {setup.study_dir} | storage {redact_url(setup.storage_url)} | {where}", stream=out)
    say(seed_check(study, setup.study_dir, opts, before_jobs=executor is not None), stream=out)
    summary = RunSummary(study.name, setup.study_dir, setup.storage_url)
    phases = _Phases(setup, opts, len(slots) if executor is None else len(study.conditions()) * len(study.seeds))
    try:
        phases.start()
        summary.interrupted = _work(setup, opts, phases, executor, slots)
        if not summary.interrupted:
            phases.tick()  # tuning ended with the last worker: queue comparisons for the next run
    finally:
        phases.close()
        if executor is not None:
            executor.close()
    _sum_up(summary, phases)
    return summary


def _prepare_with_executor(study_path: str | Path, opts: RunOptions) -> tuple[_Setup, Any, list]:
    """:func:`prepare`, with the executor's check: the executor chosen (None: local) and the
    local slots; an executor made for a study that then fails its checks is closed."""
    chosen: dict[str, Any] = {}

    def check_executor(study) -> None:  # before anything is created: resources that cannot fit
        where = executor_name(study, opts)
        if where == "local":
            chosen["slots"] = local_slots(study, opts)
            return
        executor = make_executor(where, study_dir=study_dir(study), opts=opts)
        chosen["executor"] = executor
        executor.check({arm.name: study.resources_of(arm.name) for arm in study.arms})

    try:
        setup = prepare(study_path, opts, check=check_executor)
    except BaseException:
        if "executor" in chosen:
            chosen["executor"].close()
        raise
    return setup, chosen.get("executor"), chosen.get("slots", [])


def _work(setup: _Setup, opts: RunOptions, phases: _Phases, executor, slots: list) -> bool:
    """Run what is queued to the end, on the executor's jobs or the local pool; whether it was
    interrupted. With nothing to run, mirror what a killed worker left unmirrored."""
    if phases.pending() and executor is not None:
        return Scheduled(
            executor,
            study=setup.study,
            study_file=setup.study_file,
            study_dir=setup.study_dir,
            storage=setup.storage_url,
            queues=phases.queues,
            opts=opts,
            progress=phases.progress,
            on_tick=phases.tick,
        ).run()
    if phases.pending():
        return run_pool(
            study_file=setup.study_file,
            study_dir=setup.study_dir,
            storage=setup.storage_url,
            queue_names=[q.study_name for q in phases.queues],
            slots=slots,
            opts=opts,
            progress=phases.progress,
            hold_file=phases.hold_file if phases.specs is None else None,
            on_tick=phases.tick,
        )
    out = opts.out()
    phases.progress.tick()
    say("nothing to run: every trial has completed", stream=out)
    if opts.tracking:  # no worker starts, so mirror here what a killed worker left unmirrored
        mirrored = sync(setup.study_dir, opts.tracking_uri)
        if mirrored.sent or mirrored.failed:
            say(str(mirrored), stream=out)
    return False


def _sum_up(summary: RunSummary, phases: _Phases) -> None:
    """Each phase's trial outcomes, the notes, and where a sequential study's looks stand."""
    for arm, q in phases.tune.items():
        summary.trials += trial_outcomes(q, "tune", phases.slot_keys, label=slot_label(arm))
    summary.notes += phases.notes
    if phases.specs is not None:
        summary.trials += trial_outcomes(phases.main_q, "compare", phases.compare_keys())
    elif not summary.interrupted:
        summary.notes.append("the comparison trials were not queued (tuning did not finish)")
    if phases.looks is not None:
        summary.looks = phases.looks.state.lines() if phases.looks.state is not None else []
        if not phases.looks.finished and not summary.interrupted:
            summary.notes.append("the sequential study is not finished: run the same command again to go on")


# --------------------------------------------------------------------------------------------
# worker (join from anywhere)


def run_worker(study_ref: str | Path, opts: RunOptions | None = None) -> RunSummary:
    """``harness worker``: work on an existing study's queue until the study is finished (see
    :mod:`harness.runner.worker`: a sequential study's workers queue its next looks themselves)."""

    opts = opts or RunOptions()
    study, folder, study_file = study_from(study_ref)
    opts.warn_over_capacity()
    check_output_dir(folder, min_free_mb=opts.min_free_mb)
    url = opts.storage or study_db.default_storage_url(folder)
    storage = study_db.open_storage(url, create=False)
    found = existing_queues(study, storage)
    if not found:
        raise study_db.StorageError(f"no study {study.name!r} in {redact_url(url)}; start it with `harness run` first")
    make_output_dir(folder)
    slots = local_slots(study, opts)
    out = opts.out()
    check_study_rule(study, storage, folder, say=partial(say, stream=out))
    say(
        f"worker for {study.name}: storage {redact_url(url)} | {len(slots)} worker(s) on "
        f"{', '.join(s.device for s in slots)}",
        stream=out,
    )
    progress = Progress(
        study.name, [q for _, q in found], keys=None, workers=len(slots), stream=out, every_s=opts.progress_every
    )
    summary = RunSummary(study.name, folder, url)
    summary.interrupted = run_pool(
        study_file=study_file,
        study_dir=folder,
        storage=url,
        queue_names=[q.study_name for _, q in found],
        slots=slots,
        opts=opts,
        progress=progress,
    )
    for phase, q in found:
        summary.trials += queue_outcomes(q, phase)
    if has_looks(study) and not summary.interrupted:
        summary.looks = look_lines(study, study_file, url)
    return summary


__all__ = [
    "Progress",
    "RunOptions",
    "RunSummary",
    "StatusReport",
    "TrialOutcome",
    "prepare",
    "run_pool",
    "run_study",
    "run_worker",
    "study_status",
]
