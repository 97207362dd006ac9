"""Studies run through a real single-host Slurm (``slurm_cluster``, tests/executors/conftest.py):
one job per trial through submitit, the study database the one record.

- a study runs to completion; each trial's record and its queue entry name its Slurm job and logs;
- a trial's job cancelled mid-run (``scancel``) is submitted again and its trial recorded once;
- ``harness cancel`` leaves no job running and the trials resumable; a re-run finishes the study.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from executors_helpers import (
    Background,
    calls,
    completed_records,
    latest_jobs,
    options,
    pid_alive,
    started,
    timings,
    trial_env_fixture,  # noqa: F401  (the fixture trial_env)
    trial_ids,
    trial_pids,
    wait_for,
    write_study,
)
from optuna.trial import TrialState

from harness import store as study_db
from harness.runner.executors.cancel import cancel_study
from harness.runner.outcomes import study_status
from harness.runner.run import run_study

pytestmark = pytest.mark.slow

RUN_S = 120  # a run's ceiling; the studies here take a few job start-ups


def slurm_options(**kw):
    return options(executor="slurm", **timings(**kw))


def test_a_study_runs_to_completion_through_slurm(tmp_path, trial_env, slurm_cluster):
    path = write_study(tmp_path, ["ok", "okb"], resources={"cpus": 1, "memory": "200M", "time": "10"})
    summary = run_study(path, slurm_options())
    assert summary.exit_code == 0, summary.format()
    records = completed_records(summary.study_dir)
    assert sorted(records) == sorted(trial_ids(summary.study_dir).values())
    for trial_id, kept in records.items():
        assert len(kept) == 1 and calls(trial_env, trial_id, "done") == 1
        job = kept[0].scheduler_job
        assert job["executor"] == "slurm" and job["name"] == f"t/{kept[0].arm}/seed0"
        out_log = job["logs"].split()[0]
        assert out_log.endswith(f"{job['id']}_0_log.out")
        assert "attempt 1 ran here" in Path(out_log.replace("_log.out", "_log.err")).read_text()
    assert not slurm_cluster.jobs()  # every job ended


def test_a_scancelled_job_is_run_again_and_its_trial_recorded_once(tmp_path, trial_env, slurm_cluster, monkeypatch):
    monkeypatch.setenv("FAKE_SLOW_FIRST_S", "600")  # until its job is cancelled
    path = write_study(tmp_path, ["slowfirst"])
    opts = slurm_options()
    run = Background(path, opts)
    study_dir = tmp_path / "out" / "t"
    wait_for(lambda: started(trial_env, "slowfirst") == 1, 60, "the trial's first start")
    trial = trial_ids(study_dir)["slowfirst"]
    first = latest_jobs(study_dir, "t")[trial].attrs[study_db.EXECUTOR_JOB]["id"]
    slurm_cluster.run("scancel", first)
    summary = run.wait(RUN_S)
    assert summary.exit_code == 0, summary.format()
    assert calls(trial_env, trial) == 2 and calls(trial_env, trial, "done") == 1
    (record,) = completed_records(study_dir)[trial]
    assert record.scheduler_job["id"] != first  # the second job ran it
    # the run says why it submitted again: the job put its trial back (SIGTERM), or it went stale
    said = opts.stream.getvalue()
    if record.attempt == 1:
        assert f": slurm job {first} ended with the trial unfinished (cancelled, e.g. by scancel" in said, said
    else:
        assert f"re-queued {trial} (attempt 1)" in said, said


def test_harness_cancel_stops_every_job_and_a_rerun_finishes(tmp_path, trial_env, slurm_cluster, monkeypatch):
    monkeypatch.setenv("FAKE_SLOW_FIRST_S", "600")  # until its job is cancelled
    path = write_study(tmp_path, ["slowfirst", "slowfirstb"])
    study_dir = tmp_path / "out" / "t"
    run = Background(path, slurm_options())
    wait_for(lambda: started(trial_env, "slowfirst") and started(trial_env, "slowfirstb"), 60, "both trials' start")
    status = study_status(study_dir).format()
    assert "running  slowfirst-s0" in status and "slurm job" in status and "RUNNING" in status
    report = cancel_study(study_dir)
    lines = "\n".join(report.lines())
    assert "cancelled 2 slurm job(s)" in lines and "resumable" in lines
    interrupted = run.wait(RUN_S)
    assert interrupted.exit_code == 130
    wait_for(lambda: not slurm_cluster.jobs(), 30, "the cancelled jobs' end")
    assert {j.state for j in latest_jobs(study_dir, "t").values()} == {TrialState.WAITING}
    status = study_status(study_dir).format()  # the cancelled jobs are over, not the trials' live jobs
    assert "GONE" not in status and status.count("has ended (cancelled or lost): the next `harness run`") == 2
    assert not completed_records(study_dir)
    first_pids = [pid for trial_id in trial_ids(study_dir).values() for pid in trial_pids(trial_env, trial_id)]
    wait_for(lambda: not any(map(pid_alive, first_pids)), 30, "the cancelled trials' processes to end")
    summary = run_study(path, slurm_options())
    assert summary.exit_code == 0, summary.format()
    for trial_id in trial_ids(study_dir).values():
        assert calls(trial_env, trial_id) == 2 and calls(trial_env, trial_id, "done") == 1
        assert len(completed_records(study_dir)[trial_id]) == 1
