"""Several machines on one PostgreSQL-backed study: every trial runs exactly once, a killed
worker's trial is completed by another, and every machine can gather every result.

A "machine" is a folder the harness commands run in: it has its own study folder
(``runs/<study>``), like a separate host, and shares only the PostgreSQL storage.
"""

from __future__ import annotations

import io
import os
import signal
from collections import Counter

import pytest
from fake_trials import metrics
from faults_helpers import (
    FAKE,
    FAST,
    Machine,
    calls,
    pid_alive,
    queue_jobs,
    record_files,
    trial_ids,
    wait_for,
    write_study,
)
from optuna.trial import TrialState

from harness import store as study_db
from harness.engine.spec import TrialResult
from harness.runner import queue
from harness.runner.options import RunOptions
from harness.runner.run import prepare, run_worker
from harness.study.expand import expand
from harness.tracking.records import (
    make_record,
    read_record,
    read_records,
    write_record,
)
from harness.tracking.results import load_results
from harness.tracking.shared_records import RecordStore, import_for_study


def _completes_per_key(jobs) -> Counter:
    return Counter(j.key for j in jobs if j.state == TrialState.COMPLETE)


@pytest.mark.slow
def test_three_workers_on_two_machines_run_every_trial_exactly_once(tmp_path, fault_env, pg_url):
    a, b = Machine(tmp_path, "machine_a"), Machine(tmp_path, "machine_b")
    study_a = write_study(a.dir, "multi", ["ok_a", "ok_b", "ok_c"], seeds=3)
    study_b = write_study(b.dir, "multi", ["ok_a", "ok_b", "ok_c"], seeds=3)  # the same file, copied
    ids = trial_ids(study_a)
    env = {"FAKE_TRIAL_SLEEP": "1"}
    try:
        runner = a.start(
            "run", study_a.name, "--storage", pg_url, "--workers", "1", "--no-tracking", *FAST, label="run", env=env
        )
        wait_for(lambda: len(queue_jobs(pg_url, "multi")) == len(ids), 60, "the runner to queue the study")
        code_b, _, err_b = b.run(
            "worker",
            study_b.name,
            "--storage",
            pg_url,
            "--workers",
            "2",
            "--no-tracking",
            *FAST,
            label="worker",
            env=env,
        )
        code_a = a.finish(runner, 120)
    finally:
        a.stop_all()
        b.stop_all()
    out_a, err_a = a.output("run")
    assert code_a == 0, out_a + err_a
    assert code_b == 0, err_b
    assert "2 worker(s) on cpu, cpu" in err_b  # three worker processes in all

    # exactly once: one call per trial, one COMPLETE per trial, no failure anywhere
    for tid in ids:
        assert len(calls(fault_env, tid)) == 1, tid
        assert len(calls(fault_env, tid, "done")) == 1, tid
    jobs = queue_jobs(pg_url, "multi")
    assert _completes_per_key(jobs) == Counter({tid: 1 for tid in ids})
    assert all(j.state == TrialState.COMPLETE for j in jobs)

    # each record lies on the machine that ran the trial; together they are the whole study
    on_a, on_b = record_files(a.study_dir("multi")), record_files(b.study_dir("multi"))
    assert not set(on_a) & set(on_b)
    assert sorted({*on_a, *on_b}) == sorted(ids)
    assert on_a, "machine A ran nothing"

    # any machine reads the whole study through the storage (in memory) ...
    res = load_results(a.study_dir("multi"), storage=pg_url)
    assert sorted(res.trials["trial_id"]) == sorted(ids)
    assert set(res.trials["status"]) == {"completed"}

    # ... and `harness results --storage` copies the other machine's records here, once
    code, out, err = b.run("results", "runs/multi", "--storage", pg_url, label="results")
    assert code == 0, err
    assert f"{len(on_a)} records imported from the storage" in err
    gathered = record_files(b.study_dir("multi"))
    assert sorted(gathered) == sorted(ids)
    for tid, path in on_a.items():
        assert read_record(gathered[tid]).model_dump() == read_record(path).model_dump()
    assert all(f"{tid[:8]}" in out for tid in ids)
    _, again = import_for_study(b.study_dir("multi"), pg_url)
    assert (again.imported, again.present) == (0, len(ids))  # idempotent
    assert len(read_records(b.study_dir("multi"))) == len(ids)

    # `harness status --storage` on A gathers B's records too
    code, out, err = a.run("status", "runs/multi", "--storage", pg_url, label="status")
    assert code == 0, err
    assert f"comparison: {len(ids)} trials: {len(ids)} completed" in out
    assert sorted(record_files(a.study_dir("multi"))) == sorted(ids)


@pytest.mark.slow
def test_sigkilled_worker_trial_is_found_stale_and_completed_by_another(tmp_path, fault_env, pg_url):
    """Kill -9 one of two workers in the middle of a trial: the survivor sees the heartbeat go
    stale, fails that attempt as 'worker lost' and runs the trial again; nothing is lost or run
    twice to completion; the killed trial's process does not outlive its worker."""
    a = Machine(tmp_path, "machine_a")
    study = write_study(a.dir, "killed", ["ok", "slowfirst", "ok_b", "ok_c"], seeds=1)
    ids = trial_ids(study)
    slow = [tid for tid in ids if tid.startswith("slowfirst-")]
    assert len(slow) == 1  # the one trial that runs long (60 s) the first time
    env = {"FAKE_TRIAL_SLEEP": "0.5", "FAKE_SLOW_FIRST_S": "60"}
    try:
        runner = a.start(
            "run", study.name, "--storage", pg_url, "--workers", "2", "--no-tracking", *FAST, label="run", env=env
        )

        def running_slow_job():
            if not any(calls(fault_env, tid) for tid in slow):
                return None
            running = [
                j
                for j in queue_jobs(pg_url, "killed")
                if j.state == TrialState.RUNNING and j.key in slow and j.attrs.get(study_db.WORKER)
            ]
            return running[0] if running else None

        wait_for(lambda: running_slow_job() is not None, 90, "a slow trial to start")
        victim = running_slow_job()
        worker_pid = int(victim.attrs[study_db.WORKER].split(":")[1].split()[0])
        trial_pid = calls(fault_env, victim.key)[0]
        assert pid_alive(worker_pid) and pid_alive(trial_pid)
        os.kill(worker_pid, signal.SIGKILL)
        code = a.finish(runner, 120)
    finally:
        a.stop_all()
    out, err = a.output("run")
    assert code == 0, out + err  # every trial completed in the end
    assert "exited with code -9" in err
    assert "re-queued " + victim.key in err

    wait_for(lambda: not pid_alive(trial_pid), 15, "the killed worker's trial process to end")
    tries = queue.attempts(queue_jobs(pg_url, "killed"))
    states = [j.state for j in tries[victim.key]]
    assert states == [TrialState.FAIL, TrialState.COMPLETE]
    assert tries[victim.key][0].reason.startswith("worker lost: no heartbeat for more than 3s")
    assert len(calls(fault_env, victim.key)) == 2  # started twice (killed, then re-run) ...
    assert len(calls(fault_env, victim.key, "done")) == 1  # ... completed once
    for tid in ids:
        if tid != victim.key:
            assert len(calls(fault_env, tid)) == 1 and len(calls(fault_env, tid, "done")) == 1, tid
    assert _completes_per_key(queue_jobs(pg_url, "killed")) == Counter({tid: 1 for tid in ids})
    records = read_records(a.study_dir("killed"))
    assert sorted(r.trial_id for r in records) == sorted(ids)
    assert all(r.status == "completed" for r in records)


@pytest.mark.slow
def test_completed_record_is_never_run_again(tmp_path, fault_env, pg_url, monkeypatch):
    """Two workers died after writing a completed record but before telling Optuna, one on this
    machine (the record is here) and one elsewhere (the record is only in the shared storage):
    both trials are completed from their records, not run again; the third trial runs."""
    a = Machine(tmp_path, "machine_a")
    path = write_study(a.dir, "half", ["ok"], seeds=3)
    monkeypatch.chdir(a.dir)
    opts = RunOptions(
        storage=pg_url,
        trial_fn=FAKE,
        tracking=False,
        poll_interval=0.2,
        heartbeat_interval=1,
        grace_period=3,
        stream=io.StringIO(),
        gpus=[],
    )
    setup = prepare(path, opts)
    q = queue.create_queue(setup.storage, "half", "maximize")
    specs = {s.trial_id: s for s in expand(setup.study)}
    queue.enqueue_specs(q, list(specs.values()), phase="compare", retries=0)
    store = RecordStore.of(setup.storage, "half")
    written = {}
    for where in ("local", "storage"):
        job = queue.claim_next(q)  # the dead worker's claim: RUNNING, its heartbeat goes stale
        spec = specs[job.key]
        written[where] = make_record(spec, TrialResult(trial_id=spec.trial_id, final=metrics(spec)), started_at=0)
        if where == "local":
            write_record(setup.study_dir, written[where])
        else:
            store.put(written[where])
    summary = run_worker(setup.study_dir, opts)
    assert summary.exit_code == 0, summary.format()
    ran = [tid for tid in specs if tid not in {r.trial_id for r in written.values()}]
    assert len(ran) == 1 and len(calls(fault_env, ran[0])) == 1
    tries = queue.attempts(queue.jobs(q))
    stored = store.latest()
    assert sorted(stored) == sorted(specs)  # every record is shared, the local one included
    for record in written.values():
        assert calls(fault_env, record.trial_id) == []  # never run
        assert [j.state for j in tries[record.trial_id]] == [TrialState.FAIL, TrialState.COMPLETE]
        assert tries[record.trial_id][-1].value == record.final["eval/accuracy"]
        local = read_record(setup.study_dir / "records" / f"{record.trial_id}.json")
        assert local.fingerprint() == record.fingerprint()  # the stored one is now here too
        assert stored[record.trial_id].fingerprint() == record.fingerprint()


@pytest.mark.slow
def test_machines_opening_a_fresh_database_at_once_all_get_in(postgres):
    """`harness run` creating the schema while `harness worker`s elsewhere open the same new
    database: opening writes Optuna's version tables, so they race on PostgreSQL's unique
    indexes; every one of them must still get in."""
    import threading

    for round_ in range(3):
        url = postgres.create_db(f"race_{round_}_{os.getpid()}")
        barrier = threading.Barrier(6)
        errors: list[BaseException] = []

        def open_it(create: bool, barrier=barrier, url=url, errors=errors) -> None:
            barrier.wait()
            try:
                study_db.open_storage(url, create=create).engine.dispose()
            except BaseException as err:  # noqa: BLE001
                errors.append(err)

        threads = [threading.Thread(target=open_it, args=(i == 0,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert errors == [], [str(e) for e in errors]
