"""Fenced claims: a worker paused past the grace period (``kill -STOP``) while another worker
re-ran its trial never overwrites the newer attempt; records, MLflow and Optuna agree on one
attempt. Plus the queue's fence itself (:func:`fencing.renew` and :func:`fencing.commit`).

Timings as in the other runner tests, shorter: heartbeats every 0.2 s, a grace period of 1 s on
an idle machine, stretched by the measured load so a live worker's late beat is not a lost one
(SQLite's clock has 1 s resolution, so a claim goes stale 1-2 s after its last beat). Every
wait bounds only a hang (:class:`slowness.Deadline`); a trial to pause or resume a worker in
holds until the test releases it (``FAKE_RELEASE_FILE``), never for a fixed time.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from optuna.trial import TrialState
from runner_helpers import FAKE, calls, options, write_study
from slowness import Deadline, slowness

from harness import store as study_db
from harness.runner import queue
from harness.runner.child import process_gone
from harness.runner.outcomes import study_status
from harness.runner.queue import fencing
from harness.runner.run import prepare
from harness.runner.worker import Worker
from harness.runner.worker_config import WorkerConfig
from harness.study.expand import expand
from harness.tracking.records import make_record, read_record, record_path, write_record
from harness.tracking.shared_records import RecordStore

HEARTBEAT_S, GRACE_S = 0.2, 1.0


# --------------------------------------------------------------------------------------------
# helpers


def queued_study(tmp_path: Path, arms: list[str], *, seeds=1, retries=0):
    """A study set up and queued as `harness run` does it, but with no worker started."""
    path = write_study(tmp_path, arms, seeds=seeds)
    setup = prepare(path, options())
    q = queue.create_queue(setup.storage, setup.study.name, "maximize")
    queue.enqueue_specs(q, expand(setup.study), phase="compare", retries=retries)
    return path, setup, q


def worker_config(setup, name: str, **run) -> WorkerConfig:
    """A worker's config; ``run``: run options other than these test defaults."""
    run = options(
        **{
            "storage": setup.storage_url,
            "trial_fn": FAKE,
            "tracking": False,
            "heartbeat_interval": HEARTBEAT_S,
            "grace_period": GRACE_S * slowness(),
            "poll_interval": 0.1,
            "kill_grace": 2,
            **run,
        }
    )
    return WorkerConfig(
        name=name,
        study_file=str(setup.study_file),
        study_dir=str(setup.study_dir),
        queues=[setup.study.name],
        device="cpu",
        run=run,
    )


class WorkerProcess:
    """``python -m harness.runner.worker_process CONFIG.json``, as the pool starts it; stderr in a file."""

    def __init__(self, setup, config: WorkerConfig, env: dict[str, str] | None = None):
        folder = setup.study_dir / "tmp"
        folder.mkdir(parents=True, exist_ok=True)
        self.config_path = folder / f"test-worker-{config.name}.json"
        self.config_path.write_text(config.to_json())
        self.err_path = setup.study_dir.parent / f"worker-{config.name}.err"
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "harness.runner.worker_process", str(self.config_path)],
                env={**os.environ, **config.secret_env(), **(env or {})},
                stdout=subprocess.DEVNULL,
                stderr=err,
                stdin=subprocess.DEVNULL,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait(self, timeout: float) -> int:
        """The worker's exit code; ``timeout`` (seconds on an idle machine, stretched by the load
        while it waits) only bounds a hang."""
        deadline = Deadline(timeout)
        while True:
            try:
                return self.proc.wait(timeout=min(1.0, max(deadline.left(), 0.05)))
            except subprocess.TimeoutExpired:
                if deadline.passed():
                    raise AssertionError(
                        f"worker {self.pid} ran past {deadline.limit():g}s:\n{self.stderr()[-3000:]}"
                    ) from None

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(timeout=30)


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = Deadline(timeout)
    while not predicate():
        if deadline.passed():
            raise AssertionError(f"timed out after {deadline.limit():g}s waiting for {what}")
        time.sleep(0.1)


def pause_outside_transaction(pid: int, database: Path) -> None:
    """Stop ``pid`` (SIGSTOP) at a moment it holds no lock on the SQLite ``database``.

    A process stopped inside a transaction keeps SQLite's file lock, and every other process then
    waits out its busy timeout: the tests here are about a stale claim, not about that (a paused
    worker on a server database holds no such lock). So stop it, check that an exclusive lock
    can be had at once, and if not let it run on for a moment and try again. ``kill`` only sends
    the signal: a thread still running on another core may take a lock after it returns, so the
    probe waits until the kernel shows every thread of ``pid`` stopped."""
    while True:
        os.kill(pid, signal.SIGSTOP)
        wait_for(lambda: all_threads_stopped(pid), 30, f"process {pid} to stop")
        probe = sqlite3.connect(database, timeout=0)
        try:
            probe.execute("BEGIN EXCLUSIVE")
            probe.execute("ROLLBACK")
            return
        except sqlite3.OperationalError:
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.01)
        finally:
            probe.close()


def all_threads_stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is in the stopped state (``T``) in ``/proc``."""
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
        except (FileNotFoundError, IndexError):
            continue  # a thread that ended meanwhile
    return bool(states) and all(state in ("T", "t") for state in states)


def running_under(q, pid: int):
    """The job that worker ``pid`` holds (RUNNING, its claim naming that pid), or None."""
    for job in queue.jobs(q, states=(TrialState.RUNNING,)):
        if f":{pid} " in str(job.attrs.get(study_db.WORKER, "")):
            return job
    return None


def one_attempt_everywhere(setup, q, trial_id: str, *, attempt: int, mlflow: bool) -> None:
    """The local record, the shared copy, Optuna (and MLflow) all hold attempt ``attempt``."""
    record = read_record(record_path(setup.study_dir, trial_id))
    assert record.status == "completed" and record.attempt == attempt
    records = setup.study_dir / "records"
    assert not (records / "superseded").exists(), "a newer record was replaced"
    assert not list((records / "failed").glob("*.json")) if (records / "failed").exists() else True
    tries = queue.attempts(queue.jobs(q))[trial_id]
    assert [j.state for j in tries] == [TrialState.FAIL] * (attempt - 1) + [TrialState.COMPLETE]
    assert tries[-1].value == pytest.approx(record.final["eval/accuracy"])
    assert tries[0].reason.startswith("worker lost: no heartbeat")
    shared = [r for r in RecordStore.of(setup.storage, setup.study.name).all_attempts() if r.trial_id == trial_id]
    assert [(r.attempt, r.fingerprint()) for r in shared] == [(attempt, record.fingerprint())]
    if mlflow:
        from harness.tracking.mlflow_layout import SYNCED_TAG
        from harness.tracking.mlflow_mirror import Tracker

        runs = Tracker(None, setup.study_dir, setup.study.name).trial_runs(trial_id).get(trial_id, [])
        assert [(r.data.tags["attempt"], r.data.tags.get(SYNCED_TAG)) for r in runs] == [(str(attempt), "1")]
        assert Tracker.holds(runs, record)


# --------------------------------------------------------------------------------------------
# a paused worker


@pytest.mark.slow
def test_paused_worker_discards_its_result_and_the_newer_attempt_stands(tmp_path, fake_env):
    """Worker A is stopped (SIGSTOP) while its trial runs; its heartbeat stops, so worker B fails
    attempt 1 as lost and runs attempt 2 to completion. A's trial process finishes meanwhile.
    When A resumes it finds its claim revoked before writing anything: one line names the trial,
    its attempt and the newer one; the record, the shared copy, MLflow and Optuna all hold
    attempt 2 (before the fence, A's attempt 1 replaced attempt 2's record and MLflow run)."""
    path, setup, q = queued_study(tmp_path, ["slowfirst"])
    (trial_id,) = [s.trial_id for s in expand(setup.study)]
    release = tmp_path / "release"  # A's trial holds until B has run attempt 2
    env = {"FAKE_SLOW_FIRST_S": "600", "FAKE_RELEASE_FILE": str(release)}
    a = WorkerProcess(setup, worker_config(setup, "a", tracking=True), env)
    b = None
    try:
        wait_for(
            lambda: calls(fake_env, trial_id) == 1 and running_under(q, a.pid) is not None,
            90,
            "worker A to start the trial",
        )
        pause_outside_transaction(a.pid, setup.study_dir / "optuna.db")
        b = WorkerProcess(setup, worker_config(setup, "b", tracking=True), env)
        assert b.wait(120) == 0, b.stderr()
        release.touch()
        wait_for(lambda: calls(fake_env, trial_id, "done") == 2, 30, "A's trial process to finish too")
        os.kill(a.pid, signal.SIGCONT)
        assert a.wait(60) == 0, a.stderr()
    finally:
        a.kill()
        if b is not None:
            b.kill()
    assert f"re-queued {trial_id} (attempt 1): worker lost" in b.stderr()
    err = a.stderr()
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "claim revoked" in line]
    assert len(lines) == 1, err
    assert f"{trial_id} attempt 1: claim revoked" in lines[0]
    assert "worker lost: no heartbeat" in lines[0] and "attempt 2 (completed) is the current one" in lines[0]
    assert "nothing written" in lines[0]
    one_attempt_everywhere(setup, q, trial_id, attempt=2, mlflow=True)
    report = study_status(path).format()
    assert "comparison: 1 trials: 1 completed" in report
    assert f"completed {trial_id} (attempt 2), earlier failures:" in report


@pytest.mark.slow
def test_resumed_worker_stops_the_trial_that_was_handed_on(tmp_path, fake_env):
    """Worker A resumes while its trial still runs, long after attempt 2 completed elsewhere: its
    next heartbeat finds the claim revoked, so it ends the trial process at once (no waiting for
    a result nobody wants) and writes nothing."""
    _, setup, q = queued_study(tmp_path, ["slowfirst"])
    (trial_id,) = [s.trial_id for s in expand(setup.study)]
    env = {"FAKE_SLOW_FIRST_S": "600"}  # far past any bound below: A must end it, not wait for it
    a = WorkerProcess(setup, worker_config(setup, "a"), env)
    b = None
    try:
        wait_for(
            lambda: calls(fake_env, trial_id) == 1 and running_under(q, a.pid) is not None,
            90,
            "worker A to start the trial",
        )
        trial_pid = int((fake_env / f"{trial_id}.started").read_text().split()[0])
        pause_outside_transaction(a.pid, setup.study_dir / "optuna.db")
        b = WorkerProcess(setup, worker_config(setup, "b"), env)
        assert b.wait(120) == 0, b.stderr()
        os.kill(a.pid, signal.SIGCONT)
        assert a.wait(60) == 0, a.stderr()  # had A waited for its trial, that trial would have written `done`
    finally:
        a.kill()
        if b is not None:
            b.kill()
    wait_for(lambda: process_gone(trial_pid), 15, "A's trial process to end")
    assert calls(fake_env, trial_id, "done") == 1  # only attempt 2 finished
    err = a.stderr()
    assert "Traceback" not in err, err
    assert f"{trial_id} attempt 1: claim revoked" in err and "attempt 2 (completed)" in err, err
    one_attempt_everywhere(setup, q, trial_id, attempt=2, mlflow=False)


# --------------------------------------------------------------------------------------------
# the fence in the queue


def test_commit_is_fenced_by_the_claim_and_the_current_attempt(tmp_path):
    url = study_db.default_storage_url(tmp_path)
    storage = study_db.open_storage(url, create=True)
    q = queue.create_queue(storage, "s", "maximize")

    class Spec:
        trial_id, arm = "a-s0", "a"

        def model_dump(self, mode="json"):
            return {"trial_id": self.trial_id}

    queue.enqueue_specs(q, [Spec()], phase="compare", retries=0)
    first = queue.claim_next(q, owner="host:1 cpu")
    assert first.attrs[study_db.WORKER] == "host:1 cpu"
    assert fencing.renew(q, first, "host:1 cpu") is None
    assert fencing.renew(q, first, "host:2 cpu") is not None  # not the claim's owner

    # the owner is paused: another process fails the job as stale and queues attempt 2
    other = queue.load_queue(study_db.open_storage(url), "s")
    time.sleep(2.2)  # the database clock has 1 s resolution on SQLite
    assert [s.job.key for s in queue.fail_stale(other, 1)] == ["a-s0"]
    second = queue.claim_next(other, owner="host:2 cpu")
    assert second.attempt == 2

    lost = fencing.renew(q, first, "host:1 cpu")
    assert lost is not None and lost.newer_attempt == 2 and lost.state == TrialState.FAIL
    assert str(lost).startswith("claim revoked (this attempt is failed: worker lost: no heartbeat")
    assert "attempt 2 (running) is the current one" in str(lost)
    assert fencing.commit(q, first, "host:1 cpu", state=TrialState.COMPLETE, value=0.1) is not None
    # nor does its failure count: the stale check failed it already (and queued attempt 2)
    assert fencing.commit(q, first, "host:1 cpu", state=TrialState.FAIL, reason="RuntimeError: boom") is not None

    assert fencing.commit(other, second, "host:2 cpu", state=TrialState.COMPLETE, value=0.7) is None
    # the same commit again (its acknowledgement lost with a dropped connection): still fine
    assert fencing.commit(other, second, "host:2 cpu", state=TrialState.COMPLETE, value=0.7) is None
    tries = queue.attempts(queue.jobs(q))["a-s0"]
    assert [(j.state, j.value) for j in tries] == [(TrialState.FAIL, None), (TrialState.COMPLETE, 0.7)]
    late = fencing.commit(q, first, "host:1 cpu", state=TrialState.COMPLETE, value=0.1)
    assert late.newer_attempt == 2 and late.newer_state == TrialState.COMPLETE
    assert queue.latest(queue.jobs(q))["a-s0"].value == 0.7  # the late attempt changed nothing
    assert queue.attempts(queue.jobs(q))["a-s0"][0].reason.startswith("worker lost")

    # a failure committed twice (the first answer lost) is one failure
    queue.requeue(other, second, fresh_budget=True)  # the trial queued again: attempt 3
    third = queue.claim_next(q, owner="host:1 cpu")
    assert fencing.commit(q, third, "host:1 cpu", state=TrialState.FAIL, reason="RuntimeError: boom") is None
    assert fencing.commit(q, third, "host:1 cpu", state=TrialState.FAIL, reason="RuntimeError: boom") is None
    assert queue.latest(queue.jobs(q))["a-s0"].reason == "RuntimeError: boom"


def _fake_record(setup, trial_id: str, *, attempt: int, ok: bool):
    from fake_trials import metrics

    from harness.engine.spec import TrialResult

    spec = next(s for s in expand(setup.study) if s.trial_id == trial_id)
    result = TrialResult(
        trial_id=trial_id,
        status="completed" if ok else "failed",
        final=metrics(spec) if ok else {},
        error=None if ok else "RuntimeError: boom",
    )
    return make_record(spec, result, attempt=attempt, started_at=0, study=setup.study.name)


@pytest.mark.parametrize("adopted", [False, True])
def test_claim_revoked_between_the_record_and_the_commit(tmp_path, fake_env, monkeypatch, capsys, adopted):
    """The narrow window: the fence check passed and the record was written, then the worker
    lost its claim before the commit. The commit changes nothing; the folder is put back as it
    was (the earlier attempt's failed record back in place, its archive copy gone) unless a
    worker had already taken the record over as the trial's result (then it stays)."""
    monkeypatch.setenv("HARNESS_TRIAL_START", "exec")  # trial processes see this test's environment
    _, setup, q = queued_study(tmp_path, ["ok"], retries=1)
    (trial_id,) = [s.trial_id for s in expand(setup.study)]
    first = queue.claim_next(q)
    assert queue.fail(q, first, "RuntimeError: boom")  # attempt 2 queued
    write_record(setup.study_dir, _fake_record(setup, trial_id, attempt=1, ok=False))
    before = record_path(setup.study_dir, trial_id).read_bytes()
    store = RecordStore.of(setup.storage, setup.study.name)
    real_commit = fencing.commit
    worker = Worker(worker_config(setup, "a"))

    def revoked_first(study, job, owner=None, **kw):
        if kw.get("record") is not None and not worker.stop.is_set():  # record written: lose the claim
            if adopted:
                store.put(kw["record"])  # another worker here found it and kept it as the result
            queue.set_reason(study, job, "worker lost: no heartbeat for more than 1s")
            queue.transition(study, job, TrialState.RUNNING, TrialState.FAIL)
            queue.requeue(study, job, fresh_budget=True)
            worker.stop.set()  # one job is enough
        return real_commit(study, job, owner, **kw)

    monkeypatch.setattr(fencing, "commit", revoked_first)
    stats = worker.run()
    err = capsys.readouterr().err
    assert stats.discarded == 1 and stats.completed == 0, err
    assert f"{trial_id} attempt 2: claim revoked" in err and "attempt 3 (waiting) is the current one" in err
    assert "Traceback" not in err
    local = record_path(setup.study_dir, trial_id)
    if adopted:
        assert read_record(local).attempt == 2  # the result another worker kept
    else:
        assert local.read_bytes() == before  # as it was
        assert not list((setup.study_dir / "records").glob("*/*.json"))  # no archive copy left
    tries = queue.attempts(queue.jobs(q))[trial_id]
    assert [j.state for j in tries] == [TrialState.FAIL, TrialState.FAIL, TrialState.WAITING]
