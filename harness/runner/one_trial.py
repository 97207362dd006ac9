"""One trial, then exit: ``python -m harness.runner.one_trial CONFIG.json KEY``, the body of every
Slurm job and Ray task (:mod:`harness.runner.executors`).

``CONFIG.json`` is a :class:`~harness.runner.worker_config.WorkerConfig` naming one queue; the URLs
come in the environment, as for a worker process, and are removed from it before the trial starts.
The process claims exactly the trial ``KEY`` of that queue and runs it as a worker does (claim,
heartbeats, fencing, local record, commit, mirror), so the study database stays the one record
whatever scheduler started the process. What it finds decides what it does:

- the trial is **complete** (or failed with no attempt left): nothing; exit 0. A job that Slurm
  requeued, or a task that Ray retried, after another attempt finished never runs it again;
- the trial is **waiting**: claim it and run it;
- the trial is **running** under another claim: first the stale check (a dead attempt's claim,
  whose heartbeats stopped for the grace period, is failed and queued again, and then claimed
  here); a claim that stays live past the grace period and three heartbeats belongs to a live
  attempt, which is left alone (exit 0).

Exit code 0 when it did what the trial needed (a trial that failed is recorded as failed, and
queued again while its retries last: the runner submits the next attempt); 2 when it could not
start or the storage stayed unreachable.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from optuna.trial import TrialState

from harness import store as study_db
from harness.errors import HarnessError
from harness.ground.console import say
from harness.ground.exit_codes import EXIT_BAD_INPUT
from harness.runner import queue
from harness.runner.worker import Worker
from harness.runner.worker_config import WorkerConfig
from harness.runner.worker_process import serve


class OneTrial(Worker):
    """A worker that runs the one trial ``key`` of its (single) queue, if it still needs running."""

    def __init__(self, config: WorkerConfig, key: str, stop: threading.Event | None = None):
        super().__init__(config, stop)
        self.key = key
        self.outcome = ""  # what it did, one line

    def live_claim_wait_s(self) -> float:
        """How long another attempt's claim must stay live before it counts as a live attempt."""
        return self.opts.grace_period + 3 * self.opts.heartbeat_interval

    def _work(self) -> None:
        q = self.queues[0]
        deadline = time.monotonic() + self.live_claim_wait_s()
        while not self.stop.is_set():
            self._check_stale(force=True)  # a dead earlier attempt goes back to the queue first
            job = self._db("reading the queue", lambda: queue.latest(queue.jobs(q)).get(self.key))
            if job is None:
                self.outcome = f"{self.key}: no such trial in {q.study_name}"
                self.stats.stopped = self.outcome
                break
            if job.state == TrialState.COMPLETE:
                self.outcome = f"{self.key}: already completed (attempt {job.attempt}); nothing to do"
                break
            if job.state == TrialState.FAIL:
                self.outcome = f"{self.key}: failed at attempt {job.attempt}/{job.max_attempt}; no attempt left"
                break
            if job.state == TrialState.WAITING and self._db("claiming the trial", queue.claim, q, job, self.identity):
                job.state = TrialState.RUNNING
                self._run_job(q, job)
                self.outcome = f"{self.key}: attempt {job.attempt} ran here"
                break
            if job.state == TrialState.RUNNING and time.monotonic() > deadline:
                who = job.attrs.get(study_db.WORKER, "?")
                self.outcome = f"{self.key}: attempt {job.attempt} is running live on {who}; leaving it"
                break
            self.stop.wait(self.opts.poll_interval)
        if self.outcome:
            self._say(self.outcome)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m harness.runner.one_trial CONFIG.json KEY", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        config = WorkerConfig.from_json(Path(argv[0]).read_text(encoding="utf-8"))
    except (HarnessError, OSError) as err:
        say(f"error: {err}", prefix="[trial]")
        return EXIT_BAD_INPUT
    # scancel, preemption: the stop handlers stop the trial and put it back in the queue
    return serve(config, lambda stop: OneTrial(config, argv[1], stop).run(), label=f"[trial {argv[1]}]")


if __name__ == "__main__":
    sys.exit(main())
