"""Studies run through a real two-node Ray cluster (``ray_cluster``, tests/executors/conftest.py):
one Ray task per trial, named ``study/arm/seedN`` in the dashboard, the study database the one record.

- a study runs to completion through the cluster;
- the second node killed while its trial runs: Ray runs the task again, the new attempt waits
  for the lost claim to go stale, runs the trial, and it is recorded once;
- ``harness cancel`` asks the runner that owns the tasks to cancel them; a re-run finishes.
"""

from __future__ import annotations

import re
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
    wait_for,
    write_study,
)

from harness.runner.executors.cancel import cancel_study
from harness.runner.outcomes import study_status
from harness.runner.run import run_study

pytestmark = pytest.mark.slow

RUN_S = 120


def ray_options(**kw):
    return options(executor="ray", **timings(**kw))


def test_a_study_runs_through_a_two_node_ray_cluster(tmp_path, trial_env, ray_cluster):
    from ray.util.state import list_tasks

    path = write_study(tmp_path, ["ok", "okb"], resources={"cpus": 1})
    summary = run_study(path, ray_options(address=ray_cluster.address))
    assert summary.exit_code == 0, summary.format()
    records = completed_records(summary.study_dir)
    assert sorted(records) == sorted(trial_ids(summary.study_dir).values())
    for trial_id, (record,) in records.items():
        assert calls(trial_env, trial_id, "done") == 1
        assert record.scheduler_job["executor"] == "ray" and record.scheduler_job["name"] == f"t/{record.arm}/seed0"
    names = {task.name for task in list_tasks(address=ray_cluster.dashboard_url, limit=1000)}
    assert {"t/ok/seed0", "t/okb/seed0"} <= names  # what the dashboard shows


def test_the_second_node_killed_mid_trial_is_retried_and_recorded_once(tmp_path, trial_env, ray_cluster, monkeypatch):
    # both nodes busy at once, each trial held until the test releases it after the kill
    release = tmp_path / "release"
    monkeypatch.setenv("FAKE_SLOW_FIRST_S", "600")
    monkeypatch.setenv("FAKE_RELEASE_FILE", str(release))
    path = write_study(tmp_path, ["slowfirst", "slowfirstb"], resources={"cpus": 1})
    study_dir = tmp_path / "out" / "t"
    run = Background(path, ray_options())
    wait_for(lambda: started(trial_env, "slowfirst") and started(trial_env, "slowfirstb"), 60, "both trials' start")
    first_calls = [int(path.read_text().split()[0]) for path in trial_env.glob("*.started")]
    ray_cluster.kill_second_node()
    # the lost trial's process ends with its worker (it watches it); then the head's trial may end
    wait_for(lambda: sum(map(pid_alive, first_calls)) == 1, 30, "the lost trial's process to end")
    release.touch()  # the head's trial ends; the lost one runs again there
    summary = run.wait(RUN_S)
    assert summary.exit_code == 0, summary.format()
    ids = trial_ids(study_dir)
    assert sorted(started(trial_env, arm) for arm in ids) == [1, 2]  # the lost one ran again
    records = completed_records(study_dir)
    for trial_id in ids.values():
        assert calls(trial_env, trial_id, "done") == 1 and len(records[trial_id]) == 1


def test_harness_cancel_stops_the_ray_tasks_and_a_rerun_finishes(tmp_path, trial_env, ray_cluster, monkeypatch):
    monkeypatch.setenv("FAKE_SLOW_FIRST_S", "600")  # until cancelled
    # a study folder relative to where `harness run` starts (the Ray worker runs elsewhere)
    path = write_study(tmp_path, ["slowfirst"], resources={"cpus": 1}, output_dir="out/t")
    study_dir = tmp_path / "out" / "t"
    run = Background(path, ray_options())
    wait_for(lambda: started(trial_env, "slowfirst"), 60, "the trial's start")
    status = study_status(study_dir).format()
    log = Path(re.search(r"running  slowfirst-s0\S* \(attempt 1\) on .*; ray job \w+ \(logs: (\S+)\)", status)[1])
    assert log.is_absolute() and log.is_file(), status  # the path `harness status` prints opens
    lines = "\n".join(cancel_study(study_dir).lines())
    assert "asked the `harness run` that owns them to cancel 1 Ray task(s)" in lines
    assert run.wait(RUN_S).exit_code == 130
    (job,) = latest_jobs(study_dir, "t").values()
    assert job.status == "waiting" and not completed_records(study_dir)
    summary = run_study(path, ray_options())
    assert summary.exit_code == 0, summary.format()
    assert started(trial_env, "slowfirst") == 2 and len(completed_records(study_dir)[job.key]) == 1
    assert f"{job.key}: attempt 1 ran here" in log.read_text()  # the rerun's task wrote there too
