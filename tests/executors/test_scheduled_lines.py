"""What the scheduler loop and ``harness status`` say about a trial's job, without a scheduler (an
executor in memory): a runner started again names the live jobs it adopts, a trial whose job
ended unfinished (``scancel``) is submitted again with the reason, and ``status`` shows a job the
scheduler no longer holds as over, never as the waiting trial's live job."""

from __future__ import annotations

import io

from executors_helpers import options, trial_env_fixture, write_study  # noqa: F401  (the fixture trial_env)

from harness.runner import queue
from harness.runner.executors.base import GONE, Executor, JobHandle
from harness.runner.executors.scheduled import Scheduled
from harness.runner.outcomes import TrialOutcome
from harness.runner.pool import Progress
from harness.runner.run import prepare
from harness.study.expand import expand


class MemoryScheduler(Executor):
    """Holds the jobs it is given; ``end(id)`` is a job cancelled outside the harness."""

    name = "slurm"

    def __init__(self, held: dict[str, str] | None = None):
        self.held = dict(held or {})
        self.next_id = 100

    def check(self, needs) -> None:
        pass

    def submit(self, request) -> JobHandle:
        self.next_id += 1
        self.held[str(self.next_id)] = "PENDING"
        return JobHandle(self.name, str(self.next_id), request.name, (f"/runs/t/slurm/{self.next_id}_0_log.out",))

    def states(self, handles):
        return {h.id: self.held.get(h.id, GONE) for h in handles}

    def cancel(self, handles):
        return [h.id for h in handles if self.held.pop(h.id, None)]


def queued(tmp_path):
    """One trial queued as `harness run` queues it: (setup, queue, key)."""
    setup = prepare(write_study(tmp_path, ["ok"]), options())
    q = queue.create_queue(setup.storage, setup.study.name, "maximize")
    queue.enqueue_specs(q, expand(setup.study), phase="compare", retries=0)
    (key,) = queue.latest(queue.jobs(q))
    return setup, q, key


def runner(setup, q, executor: Executor) -> tuple[Scheduled, io.StringIO]:
    """One `harness run`'s scheduler loop over the queue, and what it prints."""
    opts = options()
    progress = Progress("t", [q], keys=None, workers=1, stream=io.StringIO(), every_s=60)
    loop = Scheduled(
        executor,
        study=setup.study,
        study_file=setup.study_file,
        study_dir=setup.study_dir,
        storage=setup.storage_url,
        queues=[q],
        opts=opts,
        progress=progress,
    )
    return loop, opts.stream


def test_a_runner_started_again_names_the_live_job_it_adopts(tmp_path, trial_env):
    setup, q, key = queued(tmp_path)
    executor = MemoryScheduler()
    first, _ = runner(setup, q, executor)
    first.submit_waiting(set())  # the first runner submits, then dies (kill -9)
    (job_id,) = executor.held
    again, out = runner(setup, q, executor)
    again.adopt()
    said = out.getvalue()
    assert f"adopted {key} (attempt 1): its slurm job {job_id} from an earlier `harness run` is still PENDING" in said
    again.submit_waiting({(q.study_name, key)})
    assert list(executor.held) == [job_id]  # watched, not submitted twice


def test_a_job_that_ended_unfinished_is_submitted_again_with_the_reason(tmp_path, trial_env):
    setup, q, key = queued(tmp_path)
    executor = MemoryScheduler()
    loop, out = runner(setup, q, executor)
    loop.submit_waiting(set())
    (first,) = executor.held
    assert out.getvalue().strip().endswith(f"submitted {key} (attempt 1) as slurm job {first}")
    del executor.held[first]  # scancel
    loop.submit_waiting(set())
    last = out.getvalue().strip().splitlines()[-1]
    assert f"submitted {key} (attempt 1) as slurm job {int(first) + 1}: slurm job {first} ended" in last
    assert "cancelled, e.g. by scancel" in last and f"/runs/t/slurm/{first}_0_log.out" in last
    again, out = runner(setup, q, executor)  # a runner started after the scancel says it too
    del executor.held[str(int(first) + 1)]
    again.adopt()
    again.submit_waiting(set())
    assert f"slurm job {int(first) + 1} ended with the trial unfinished" in out.getvalue()
    assert "adopted" not in out.getvalue()


def test_status_shows_a_gone_job_as_over_not_as_the_trials_live_job():
    job = {"executor": "slurm", "id": "7", "name": "t/ok/seed0", "logs": "/runs/t/slurm/7_0_log.out"}
    waiting = TrialOutcome("compare", "ok-s0-abc", "waiting", attempts=1, job=job, job_state=GONE)
    line = waiting.job_line()
    assert GONE not in line and "job 7 RUNNING" not in line
    assert line.startswith("; its last slurm job 7 has ended (cancelled or lost): the next `harness run` submits")
    running = TrialOutcome("compare", "ok-s0-abc", "running", attempts=1, job=job, job_state=GONE)
    assert "goes back to the queue once its heartbeat is stale" in running.job_line()
    live = TrialOutcome("compare", "ok-s0-abc", "running", attempts=1, job=job, job_state="RUNNING")
    assert live.job_line() == "; slurm job 7 RUNNING (logs: /runs/t/slurm/7_0_log.out)"
