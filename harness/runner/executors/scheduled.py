"""The runner's loop when a scheduler runs the trials (``--executor slurm|ray``).

The queue is filled as for the local pool; then, every poll, until nothing is waiting or running:

1. the phases move on (``on_tick``: a sequential study's next look, the comparison after tuning);
2. the stale check: a trial whose job died without a word (a node lost, ``kill -9``) has stopped
   beating, and after the grace period it is failed as ``worker lost`` and queued again;
3. every waiting trial without a live job gets one (:meth:`Scheduled.submit`): a new trial, a
   failed attempt queued again, a trial whose job was cancelled or requeued away. The job is
   recorded on the trial (``executor_job``: id, name, logs) for ``harness status``, the record and
   ``harness cancel``. A trial whose jobs of one attempt ended ``MAX_SUBMITS`` times without
   running it is left waiting with a note (its log says why);
4. one progress line when the counts change.

Ctrl-C (or ``harness cancel``, seen as the queues' ``cancel_requested``) cancels the jobs and puts
their running trials back in the queue: the next ``harness run`` resumes the study.
A runner started again adopts the live jobs its trials record, one line each, so it never submits
a second job for a trial that still has one; a waiting trial whose job ended without finishing it
(``scancel``, a preemption, a job that failed at start) gets a new one, and its line says why.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from optuna.trial import TrialState

from harness import store as study_db
from harness.ground.console import say
from harness.ground.files import atomic_write
from harness.runner import queue
from harness.runner.executors.base import GONE, Executor, JobHandle, JobRequest
from harness.runner.executors.cancel import CancelReport, cancel_jobs
from harness.runner.launch import module_command
from harness.runner.options import RunOptions
from harness.runner.pool import Interrupt, Progress
from harness.runner.worker import left_design
from harness.runner.worker_config import WorkerConfig

#: jobs of one attempt that may end without running it before the trial is left waiting
MAX_SUBMITS = 3


@dataclass
class _Tracked:
    queue: str
    key: str
    attempt: int
    handle: JobHandle


def ended_job_reason(handle: JobHandle) -> str:
    """Why a trial gets a second job for the same attempt: the one it had is no longer held by
    the scheduler and the trial is still waiting (``harness status`` shows it ``GONE``)."""
    logs = f"; its logs: {' '.join(handle.logs)}" if handle.logs else ""
    return (
        f"{handle.executor} job {handle.id} ended with the trial unfinished "
        f"(cancelled, e.g. by scancel, preempted, or failed at start{logs})"
    )


def job_name(study: str, job: queue.Job) -> str:
    """``study/arm/seedN`` (a tuning slot: ``study/arm/slotN``), the name the scheduler shows."""
    arm = job.attrs.get(study_db.ARM, "?")
    if job.phase == "tune":
        return f"{study}/{arm}/slot{int(job.attrs.get(study_db.SLOT, 0))}"
    return f"{study}/{arm}/seed{job.attrs.get(study_db.SEED)}"


class Scheduled:
    """Submits, watches and (on Ctrl-C or ``harness cancel``) cancels one job per trial."""

    def __init__(
        self,
        executor: Executor,
        *,
        study,
        study_file: Path,
        study_dir: Path,
        storage: str,
        queues: list,
        opts: RunOptions,
        progress: Progress,
        on_tick: Callable[[], None] | None = None,
    ):
        self.executor, self.study, self.queues = executor, study, queues
        self.study_file, self.study_dir, self.opts = study_file, study_dir, opts
        self.progress, self.on_tick = progress, on_tick
        self.run_opts = opts.model_copy(update={"storage": storage})  # the URL every job opens
        self.out = opts.out()
        self.tracked: dict[tuple[str, str], _Tracked] = {}
        self.submits: Counter = Counter()
        self.stuck: set[tuple[str, str, int]] = set()
        self.config_dir = study_dir / "tmp" / "jobs"
        self.written: set[Path] = set()

    # ---- one job per trial -------------------------------------------------------------------

    def config_file(self, queue_name: str, device: str) -> Path:
        """The job's :class:`WorkerConfig` (no URLs in it), one per queue and device kind, written
        once per run with this run's options (atomically: a job of an earlier run may be reading it)."""
        path = self.config_dir / f"{queue_name}.{device}.json"
        if path not in self.written:
            config = WorkerConfig(
                name=f"{self.executor.name} job",
                device=device,
                study_file=str(self.study_file),
                study_dir=str(self.study_dir),
                queues=[queue_name],
                run=self.run_opts,
            )
            self.config_dir.mkdir(parents=True, exist_ok=True)
            atomic_write(path, config.to_json())
            self.written.add(path)
        return path

    def request(self, q, job: queue.Job) -> JobRequest:
        resources = self.study.resources_of(str(job.attrs.get(study_db.ARM)))
        config = self.config_file(q.study_name, "cuda" if resources.gpus else "cpu")
        return JobRequest(
            name=job_name(self.study.name, job),
            argv=[*module_command("harness.runner.one_trial"), str(config.resolve()), job.key],
            resources=resources,
            secret_env=self.run_opts.secret_env(),
        )

    def submit(self, q, job: queue.Job) -> None:
        ended = self.tracked.get((q.study_name, job.key))
        handle = self.executor.submit(self.request(q, job))
        queue.set_attr(q, job, study_db.EXECUTOR_JOB, handle.as_attr())
        self.tracked[(q.study_name, job.key)] = _Tracked(q.study_name, job.key, job.attempt, handle)
        self.submits[(q.study_name, job.key, job.attempt)] += 1
        line = f"submitted {job.key} (attempt {job.attempt}) as {self.executor.name} job {handle.id}"
        if ended is not None and ended.attempt == job.attempt:  # a new attempt's reason was said when it was queued
            line += f": {ended_job_reason(ended.handle)}"
        say(line, stream=self.out)

    def adopt(self) -> None:
        """Track the jobs that waiting or running trials record (a runner started again), saying
        which are still alive: those are watched, not submitted again."""
        for q in self.queues:
            for job in queue.latest(queue.jobs(q)).values():
                attr = job.attrs.get(study_db.EXECUTOR_JOB)
                if attr and job.state in (TrialState.WAITING, TrialState.RUNNING):
                    handle = JobHandle.from_attr(attr)
                    if handle.executor == self.executor.name:
                        self.tracked[(q.study_name, job.key)] = _Tracked(q.study_name, job.key, job.attempt, handle)
        states = self.executor.states([t.handle for t in self.tracked.values()]) if self.tracked else {}
        for t in self.tracked.values():
            if states.get(t.handle.id, GONE) != GONE:
                say(
                    f"adopted {t.key} (attempt {t.attempt}): its {t.handle.executor} job {t.handle.id} from an earlier "
                    f"`harness run` is still {states[t.handle.id]}; watching it, not submitting another",
                    stream=self.out,
                )

    # ---- the loop ----------------------------------------------------------------------------

    def run(self) -> bool:
        """Until the study's trials are done; True when it was interrupted (Ctrl-C, ``harness cancel``)."""
        for q in self.queues:
            queue.set_queue_attr(q, queue.CANCEL_REQUESTED, False)
        self.adopt()
        with Interrupt() as interrupt:
            while True:
                if self.on_tick is not None:
                    self.on_tick()
                self.check_stale()
                states = self.executor.states([t.handle for t in self.tracked.values()])
                live = {k for k, t in self.tracked.items() if states.get(t.handle.id, GONE) != GONE}
                cancelled = any(queue.queue_attr(q, queue.CANCEL_REQUESTED, False) for q in self.queues)
                if interrupt.count or cancelled:
                    self.stop("interrupted" if interrupt.count else "`harness cancel` was run")
                    return True
                busy = self.submit_waiting(live)
                self.progress.tick()
                if not live and not busy:
                    return False
                interrupt.wake.wait(self.opts.poll_interval)
                interrupt.wake.clear()

    def submit_waiting(self, live: set[tuple[str, str]]) -> bool:
        """Submit a job for every waiting trial without a live one; whether any trial is still
        waiting for its job or running (a running trial without a job goes stale, then waits)."""
        busy = False
        for q in self.queues:
            for key, job in queue.latest(queue.jobs(q)).items():
                if job.state == TrialState.RUNNING:
                    busy = True
                if job.state != TrialState.WAITING or (q.study_name, key) in live:
                    continue
                attempt = (q.study_name, key, job.attempt)
                if self.submits[attempt] >= MAX_SUBMITS:
                    if attempt not in self.stuck:
                        self.stuck.add(attempt)
                        logs = job.attrs.get(study_db.EXECUTOR_JOB, {}).get("logs", "")
                        say(
                            f"{key}: {MAX_SUBMITS} jobs ended without running it; left waiting (logs: {logs})",
                            stream=self.out,
                        )
                    continue
                self.submit(q, job)
                busy = True
        return busy

    def check_stale(self) -> None:
        for q in self.queues:
            for stale in queue.fail_stale(
                q, self.opts.grace_period, left_design=functools.partial(left_design, self.study)
            ):
                what = "re-queued" if stale.requeued else "left"
                say(f"{what} {stale.job.key} (attempt {stale.job.attempt}): {stale.reason}", stream=self.out)

    def stop(self, why: str) -> None:
        report = CancelReport(self.study.name)
        cancel_jobs(self.executor, self.queues, report)
        say(f"stopping ({why}): " + "; ".join(report.lines()[:-1]), stream=self.out)
