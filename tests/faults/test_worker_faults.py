"""Faults around a worker rather than in its trial: killed between its record and its MLflow
run, the study database unreachable for a while (or for good), a full disk under its records.

Workers run in this process where a fault is injected by monkeypatching (trial processes are
exec'd so they see this test's environment), and as `harness run`/`harness worker` processes
where the fault is real (a PostgreSQL database that refuses connections for a while).
"""

from __future__ import annotations

import errno
import io
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import sqlalchemy as sa
from faults_helpers import (
    FAKE,
    Machine,
    calls,
    queue_jobs,
    record_files,
    trial_ids,
    wait_for,
)
from faults_helpers import write_study as machine_study
from optuna.trial import TrialState
from runner_helpers import options, write_study

import harness.runner.worker_process as worker_process
from harness.ground.urls import redact_url
from harness.runner import local_write, queue
from harness.runner.options import RunOptions
from harness.runner.outcomes import study_status
from harness.runner.queue import fencing
from harness.runner.run import prepare, run_study, run_worker
from harness.runner.worker import Worker
from harness.runner.worker_config import WorkerConfig
from harness.study.expand import expand
from harness.tracking.mlflow_mirror import Tracker
from harness.tracking.records import read_record, read_records, record_path
from harness.tracking.shared_records import RecordStore


class Killed(BaseException):
    """The worker process dies here (SIGKILL): nothing after this point runs."""


@pytest.fixture
def inproc(fault_env, monkeypatch):
    """Workers in this process: their trial processes are exec'd with this test's environment."""
    monkeypatch.setenv("HARNESS_TRIAL_START", "exec")
    return fault_env


def queued_study(tmp_path: Path, arms: list[str], *, seeds=1, retries=0):
    path = write_study(tmp_path, arms, seeds=seeds)
    setup = prepare(path, options())
    q = queue.create_queue(setup.storage, setup.study.name, "maximize")
    queue.enqueue_specs(q, expand(setup.study), phase="compare", retries=retries)
    return path, setup, q


def worker_config(setup, name: str = "w", **run) -> WorkerConfig:
    """A worker's config; ``run``: run options other than these test defaults."""
    run = options(
        **{
            "storage": setup.storage_url,
            "trial_fn": FAKE,
            "tracking": False,
            "heartbeat_interval": 0.2,
            "grace_period": 1.0,
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


def outage() -> sa.exc.OperationalError:
    return sa.exc.OperationalError("SELECT 1", {}, ConnectionRefusedError("connection refused: the database is down"))


def mirrored(setup) -> dict[str, list]:
    tracker = Tracker(None, setup.study_dir, setup.study.name)
    return tracker.trial_runs()


# --------------------------------------------------------------------------------------------
# 6. killed between the record and the MLflow run


@pytest.mark.slow
def test_record_left_without_its_mlflow_run_is_mirrored_by_the_next_run(tmp_path, inproc, monkeypatch, capfd):
    """A worker dies right after its record and its commit, before the MLflow mirror: the trial
    is complete, its record is here, MLflow lacks the run. The next `harness run` (its workers,
    when they start) mirrors it; nothing runs twice."""
    path, setup, q = queued_study(tmp_path, ["ok"], seeds=2)
    ids = [s.trial_id for s in expand(setup.study)]
    original = Worker._mirror

    def die(self, record):
        raise Killed

    monkeypatch.setattr(Worker, "_mirror", die)
    with pytest.raises(Killed):
        Worker(worker_config(setup, tracking=True)).run()
    monkeypatch.setattr(Worker, "_mirror", original)
    (done,) = read_records(setup.study_dir)
    assert queue.latest(queue.jobs(q))[done.trial_id].state == TrialState.COMPLETE
    assert done.trial_id not in mirrored(setup)

    summary = run_study(path, options(tracking=True))
    assert summary.exit_code == 0, summary.format()
    assert "mirrored 1 local record(s) that MLflow lacked" in capfd.readouterr().err
    runs = mirrored(setup)
    for record in read_records(setup.study_dir):
        assert Tracker.holds(runs[record.trial_id], record) and len(runs[record.trial_id]) == 1
    assert sorted(runs) == sorted(ids)
    assert [len(calls(inproc, tid)) for tid in ids] == [1, 1]  # each ran once


def test_a_run_with_nothing_left_to_run_mirrors_what_mlflow_lacks(tmp_path, inproc, monkeypatch):
    """Every trial completed, the last one's MLflow run missing (its worker died before the
    mirror): `harness run` starts no worker, and mirrors it itself."""
    path, setup, q = queued_study(tmp_path, ["ok"], seeds=1)
    (tid,) = [s.trial_id for s in expand(setup.study)]
    monkeypatch.setattr(Worker, "_mirror", lambda self, record: (_ for _ in ()).throw(Killed()))
    with pytest.raises(Killed):
        Worker(worker_config(setup, tracking=True)).run()
    monkeypatch.undo()
    assert tid not in mirrored(setup)
    summary = run_study(path, options(tracking=True))
    assert summary.exit_code == 0, summary.format()
    (record,) = read_records(setup.study_dir)
    assert Tracker.holds(mirrored(setup)[tid], record)
    assert len(calls(inproc, tid)) == 1


@pytest.mark.slow
def test_worker_killed_right_after_its_record_is_completed_and_mirrored_from_it(tmp_path, inproc, monkeypatch):
    """Killed between the local record and the commit: the trial is still RUNNING, its claim
    goes stale. The next worker re-queues it, completes it from the record (not run again) and
    mirrors it."""
    _, setup, q = queued_study(tmp_path, ["ok"], seeds=1)
    (tid,) = [s.trial_id for s in expand(setup.study)]
    real_commit = fencing.commit

    def die(study, job, owner=None, **kw):
        if kw.get("record") is not None:
            raise Killed
        return real_commit(study, job, owner, **kw)

    monkeypatch.setattr(fencing, "commit", die)
    with pytest.raises(Killed):
        Worker(worker_config(setup, tracking=True)).run()
    monkeypatch.setattr(fencing, "commit", real_commit)
    assert read_record(record_path(setup.study_dir, tid)).status == "completed"
    assert queue.latest(queue.jobs(q))[tid].state == TrialState.RUNNING

    summary = run_worker(setup.study_dir, options(tracking=True, heartbeat_interval=0.2, grace_period=1))
    assert summary.exit_code == 0, summary.format()
    assert len(calls(inproc, tid)) == 1  # the record was authoritative
    tries = queue.attempts(queue.jobs(q))[tid]
    assert [j.state for j in tries] == [TrialState.FAIL, TrialState.COMPLETE]
    record = read_record(record_path(setup.study_dir, tid))
    assert tries[-1].value == record.final["eval/accuracy"]
    assert Tracker.holds(mirrored(setup)[tid], record)


# --------------------------------------------------------------------------------------------
# 12. the database unreachable


def test_storage_outage_is_retried_with_backoff(tmp_path, inproc, monkeypatch, capsys):
    """The database refuses the claim three times, then a commit once before and once after it
    went through (the answer lost with the connection): the worker retries each, says so on one
    line when the outage starts and one when it ends, and every trial completes exactly once."""
    _, setup, q = queued_study(tmp_path, ["ok"], seeds=2)
    real_claim, real_commit = queue.claim_next, fencing.commit
    left = {"claim": 3, "commit before": 1, "commit after": 1}

    def flaky_claim(*args, **kwargs):
        if left["claim"]:
            left["claim"] -= 1
            raise outage()
        return real_claim(*args, **kwargs)

    def flaky_commit(study, job, owner=None, **kw):
        if kw.get("state") is not None:
            if left["commit before"]:
                left["commit before"] -= 1
                raise outage()
            if left["commit after"]:
                left["commit after"] -= 1
                real_commit(study, job, owner, **kw)
                raise outage()
        return real_commit(study, job, owner, **kw)

    monkeypatch.setattr(queue, "claim_next", flaky_claim)
    monkeypatch.setattr(fencing, "commit", flaky_commit)
    stats = Worker(worker_config(setup, storage_retry=30)).run()
    err = capsys.readouterr().err
    assert stats.stopped is None and (stats.completed, stats.failed, stats.discarded) == (2, 0, 0), err
    assert "Traceback" not in err
    url = setup.storage_url
    assert err.count(f"the study storage {url} is unreachable (claiming a trial: OperationalError") == 1
    assert f"the study storage {url} answers again (claiming a trial" in err
    # both commit failures fall in one outage: the retry after the lost answer finds it done
    assert err.count("is unreachable (recording the result: OperationalError") == 1
    assert "answers again (recording the result" in err
    assert len(err.strip().splitlines()) == 4, err
    jobs = queue.jobs(q)
    assert sorted(j.state for j in jobs) == [TrialState.COMPLETE] * 2  # nothing failed, nothing twice
    for job in jobs:
        record = read_record(record_path(setup.study_dir, job.key))
        assert job.value == record.final["eval/accuracy"] and len(calls(inproc, job.key)) == 1
    assert len(RecordStore.of(setup.storage, setup.study.name).all_attempts()) == 2


def test_storage_down_for_longer_than_the_bound_stops_the_worker_with_one_line(tmp_path, inproc, monkeypatch, capsys):
    """The commit keeps failing for longer than the bound: the worker stops with one line naming
    the storage and the trial it leaves claimed, no traceback. The record it wrote stays (it is
    authoritative): the next worker completes the trial from it once the claim went stale."""
    _, setup, q = queued_study(tmp_path, ["ok"], seeds=1)
    (tid,) = [s.trial_id for s in expand(setup.study)]
    real_commit = fencing.commit

    def down(study, job, owner=None, **kw):
        if kw.get("state") is not None:
            raise outage()
        return real_commit(study, job, owner, **kw)

    monkeypatch.setattr(fencing, "commit", down)
    started = time.monotonic()
    stats = Worker(worker_config(setup, storage_retry=1.5)).run()
    assert time.monotonic() - started < 60
    monkeypatch.setattr(fencing, "commit", real_commit)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    stops = [line for line in err.splitlines() if "stopping" in line]
    assert len(stops) == 1, err
    assert stops[0].startswith(
        f"[worker w] stopping: the study storage {setup.storage_url} is unreachable: recording the result failed for"
    )
    assert "OperationalError" in stops[0]
    assert f"; {tid} (attempt 1) stays claimed: another worker takes it over after the grace period (1s)" in stops[0]
    assert stats.stopped and stats.completed == 0
    assert queue.latest(queue.jobs(q))[tid].state == TrialState.RUNNING
    assert read_record(record_path(setup.study_dir, tid)).status == "completed"

    again = Worker(worker_config(setup, name="next")).run()
    assert again.stopped is None and again.skipped == 1
    assert len(calls(inproc, tid)) == 1
    assert [j.state for j in queue.attempts(queue.jobs(q))[tid]] == [TrialState.FAIL, TrialState.COMPLETE]


def test_main_worker_returns_2_and_the_heartbeat_notes_an_outage_once(tmp_path, inproc, monkeypatch, capsys):
    """A storage that is down for every call: `python -m harness.runner.worker_process` exits 2 after
    one line (no traceback) and heartbeats that fail say so once, not at every beat."""
    from harness.runner.queue.heartbeat import Heartbeat

    _, setup, q = queued_study(tmp_path, ["ok"], seeds=1)
    job = queue.claim_next(q, "me")
    real_renew = fencing.renew
    monkeypatch.setattr(fencing, "renew", lambda *a, **k: (_ for _ in ()).throw(outage()))
    lines: list[str] = []
    with Heartbeat(q, job, 0.05, owner="me", say=lines.append):
        time.sleep(0.6)
    assert len(lines) == 1 and lines[0].startswith(f"heartbeat for {job.key} failed (OperationalError")
    monkeypatch.setattr(fencing, "renew", real_renew)

    monkeypatch.setattr(queue, "has_work", lambda *a, **k: (_ for _ in ()).throw(outage()))
    monkeypatch.setattr(queue, "claim_next", lambda *a, **k: None)
    config = worker_config(setup, storage_retry=0.5)
    config_path = tmp_path / "worker.json"
    config_path.write_text(config.to_json())
    monkeypatch.setenv("HARNESS_WORKER_STORAGE", setup.storage_url)
    monkeypatch.setattr(worker_process, "prestart_forkserver", lambda: None)
    monkeypatch.setattr(worker_process, "install_stop_handlers", lambda stop: None)
    assert worker_process.main([str(config_path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    stops = [line for line in err.splitlines() if "stopping" in line]
    assert len(stops) == 1 and stops[0].startswith(
        f"[worker w] stopping: the study storage {setup.storage_url} is unreachable: polling the queue failed for"
    ), err


# --------------------------------------------------------------------------------------------
# 12. a full disk


@pytest.mark.parametrize("retries", [0, 1])
def test_full_disk_fails_the_trial_with_the_reason_and_stops_the_worker(tmp_path, inproc, monkeypatch, capsys, retries):
    """Writing the record raises ENOSPC: one line, no traceback; the trial failed with that
    reason (queued again for another worker while its retry budget lasts); nothing recorded;
    the other trials wait for a worker with space."""

    def full(study_dir, record):
        raise OSError(errno.ENOSPC, "No space left on device")

    path, setup, q = queued_study(tmp_path, ["ok"], seeds=2, retries=retries)
    monkeypatch.setattr(local_write, "write_record", full)
    stats = Worker(worker_config(setup)).run()
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    tries = queue.attempts(queue.jobs(q))
    (tid,) = [key for key, jobs in tries.items() if jobs[0].state == TrialState.FAIL]
    records = setup.study_dir / "records"
    assert lines[0] == (
        f"[worker w] stopping: cannot write {tid}'s record in {records}: [Errno 28] No space left on device; "
        f"{tid} (attempt 1/{1 + retries}) failed with that reason"
        + ("; re-queued for another worker" if retries else "")
    )
    assert stats.stopped and stats.failed == 1
    assert tries[tid][0].reason == f"record not written: OSError: [Errno 28] No space left on device ({records})"
    assert [j.state for j in tries[tid][1:]] == ([TrialState.WAITING] if retries else [])
    others = [jobs for key, jobs in tries.items() if key != tid]
    assert [[j.state for j in jobs] for jobs in others] == [[TrialState.WAITING]]
    assert not list(records.glob("*.json"))
    assert RecordStore.of(setup.storage, setup.study.name).all_attempts() == []
    if not retries:
        assert "No space left on device" in study_status(path).format()


# --------------------------------------------------------------------------------------------
# 12. a real outage: PostgreSQL refuses every connection for a while


def _database(postgres, url: str, *, open_: bool) -> None:
    """Let connections to ``url``'s database in, or refuse them and drop those it has."""
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    with psycopg.connect(
        host="127.0.0.1",
        port=postgres.port,
        user=parts.username,
        password=parts.password,
        dbname="postgres",
        autocommit=True,
    ) as conn:
        conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {"true" if open_ else "false"}')
        if not open_:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )


def _run_args(*, grace: float) -> list[str]:
    return [
        "--trial-fn",
        FAKE,
        "--poll-interval",
        "0.2",
        "--heartbeat-interval",
        "1",
        "--grace-period",
        str(grace),
        "--no-tracking",
    ]


@pytest.mark.slow
def test_postgres_down_for_seconds_mid_run_loses_nothing(tmp_path, fault_env, postgres, pg_url):
    """PostgreSQL refuses connections for 6 s in the middle of `harness run` with two workers:
    they wait it out (one line when it starts, one when it ends, the password masked) and the run
    ends normally, every trial completed exactly once, no traceback."""
    a = Machine(tmp_path, "machine_a")
    study = machine_study(a.dir, "outage", ["ok_a", "ok_b"], seeds=3)
    ids = trial_ids(study)
    folder = a.study_dir("outage")
    env = {"FAKE_TRIAL_SLEEP": "1", "HARNESS_STORAGE_RETRY_S": "60"}
    try:
        runner = a.start(
            "run", study.name, "--storage", pg_url, "--workers", "2", *_run_args(grace=30), label="run", env=env
        )
        wait_for(lambda: len(record_files(folder)) >= 1, 120, "the first record")
        _database(postgres, pg_url, open_=False)
        time.sleep(6)
        _database(postgres, pg_url, open_=True)
        code = a.finish(runner, 180)
    finally:
        _database(postgres, pg_url, open_=True)
        a.stop_all()
    out, err = a.output("run")
    assert code == 0, out + err
    assert "Traceback" not in err, err
    assert postgres.password not in out + err
    assert f"the study storage {redact_url(pg_url)} is unreachable" in err, err
    assert "answers again" in err
    assert sorted(record_files(folder)) == sorted(ids)
    for tid in ids:
        assert len(calls(fault_env, tid)) == 1, tid
    jobs = queue_jobs(pg_url, "outage")
    assert sorted(j.key for j in jobs) == sorted(ids) and all(j.state == TrialState.COMPLETE for j in jobs)


@pytest.mark.slow
def test_postgres_down_past_the_bound_stops_workers_with_one_line_each(
    tmp_path, fault_env, postgres, pg_url, monkeypatch
):
    """PostgreSQL stays down past the retry bound (3 s here): each worker stops with one line
    naming the storage (password masked) and the trial it leaves claimed; `harness worker` ends
    with one error line, no traceback. Once the database is back, the next worker takes the
    left trials over after the grace period and the study completes, each trial once."""
    a = Machine(tmp_path, "machine_a")
    path = machine_study(a.dir, "down", ["ok_a", "ok_b"], seeds=2)
    monkeypatch.chdir(a.dir)
    setup = prepare(path, RunOptions(storage=pg_url, trial_fn=FAKE, tracking=False, stream=io.StringIO(), gpus=[]))
    q = queue.create_queue(setup.storage, "down", "maximize")
    queue.enqueue_specs(q, expand(setup.study), phase="compare", retries=0)
    setup.storage.engine.dispose()
    ids = trial_ids(path)
    env = {"FAKE_TRIAL_SLEEP": "4", "HARNESS_STORAGE_RETRY_S": "3"}
    try:
        proc = a.start(
            "worker", path.name, "--storage", pg_url, "--workers", "2", *_run_args(grace=3), label="worker", env=env
        )
        wait_for(lambda: sum(len(calls(fault_env, tid)) for tid in ids) >= 2, 120, "two trials to start")
        _database(postgres, pg_url, open_=False)
        code = a.finish(proc, 120)
        _database(postgres, pg_url, open_=True)
        out, err = a.output("worker")
        assert code == 2, out + err
        assert "Traceback" not in err, err
        assert postgres.password not in out + err
        stops = [line for line in err.splitlines() if " stopping: " in line]
        assert len(stops) == 2, err
        for line in stops:
            assert f"stopping: the study storage {redact_url(pg_url)} is unreachable: " in line, line
            assert "stays claimed: another worker takes it over after the grace period (3s)" in line, line
        assert f"error: the study storage {redact_url(pg_url)} is unreachable" in err

        code, out, err = a.run(
            "worker",
            path.name,
            "--storage",
            pg_url,
            "--workers",
            "2",
            *_run_args(grace=3),
            label="again",
            env={"FAKE_TRIAL_SLEEP": "0"},
        )
    finally:
        _database(postgres, pg_url, open_=True)
        a.stop_all()
    assert code == 0, out + err
    jobs = queue_jobs(pg_url, "down")
    done = [j.key for j in jobs if j.state == TrialState.COMPLETE]
    assert sorted(done) == sorted(ids)  # each trial completed once
    assert sorted(record_files(a.study_dir("down"))) == sorted(ids)
    assert all(len(calls(fault_env, tid, "done")) >= 1 for tid in ids)
