"""The one-trial entry (``python -m harness.runner.one_trial``), the body of every Slurm job and Ray
task: it runs its trial exactly once whatever it finds in the queue.

- a completed trial: nothing runs (a requeued job or a retried task after the trial finished);
- a stale claim (the earlier attempt's job died): queued again by the stale check, then run here;
- a live claim (another attempt is running and beating): left alone.

The entry runs in this process. Its trial processes are exec'd (``HARNESS_TRIAL_START=exec``): a
fork server started by an earlier test would keep that test's environment, without this test's
fake-trial settings. The tests count runs by records and attempts.
"""

from __future__ import annotations

import time

import pytest
from executors_helpers import options, trial_env_fixture, write_study  # noqa: F401  (the fixture trial_env)
from optuna.trial import TrialState
from slowness import slowness

from harness.runner import queue
from harness.runner.launch import START_ENV
from harness.runner.one_trial import OneTrial, main
from harness.runner.queue.heartbeat import Heartbeat
from harness.runner.run import prepare
from harness.runner.worker_config import WorkerConfig
from harness.study.expand import expand
from harness.tracking.records import read_records

BEAT_S, GRACE_S = 0.2, 1.0


@pytest.fixture(autouse=True)
def _exec_trials(monkeypatch):
    monkeypatch.setenv(START_ENV, "exec")


def queued(tmp_path):
    """One trial queued as `harness run` queues it, with no worker; (setup, queue, key)."""
    setup = prepare(write_study(tmp_path, ["ok"]), options())
    q = queue.create_queue(setup.storage, setup.study.name, "maximize")
    queue.enqueue_specs(q, expand(setup.study), phase="compare", retries=0)
    (key,) = queue.latest(queue.jobs(q))
    return setup, q, key


def one_trial(setup, key: str, grace_s: float = GRACE_S) -> OneTrial:
    run = options(
        storage=setup.storage_url, heartbeat_interval=BEAT_S, grace_period=grace_s, poll_interval=0.1, kill_grace=2
    )
    config = WorkerConfig(
        name="job",
        study_file=str(setup.study_file),
        study_dir=str(setup.study_dir),
        queues=[setup.study.name],
        run=run,
    )
    return OneTrial(config, key)


def test_a_completed_trial_is_not_run_again(tmp_path, trial_env):
    setup, q, key = queued(tmp_path)
    first = one_trial(setup, key)
    first.run()
    assert first.stats.completed == 1 and "attempt 1 ran here" in first.outcome
    again = one_trial(setup, key)
    stats = again.run()
    assert "already completed" in again.outcome and stats.stopped is None
    assert (stats.completed, stats.skipped, stats.failed) == (0, 0, 0)
    assert len(read_records(setup.study_dir)) == 1


def test_a_stale_claim_is_queued_again_and_run_once(tmp_path, trial_env):
    setup, q, key = queued(tmp_path)
    (job,) = queue.jobs(q)
    assert queue.claim(q, job, "lost-host:1 cpu")  # an attempt whose job died: no more heartbeats
    time.sleep(GRACE_S + 1.5)  # SQLite's clock has 1 s resolution
    runner = one_trial(setup, key)
    runner.run()
    assert "attempt 2 ran here" in runner.outcome
    latest = queue.latest(queue.jobs(q))[key]
    assert latest.state == TrialState.COMPLETE and latest.attempt == 2
    assert runner.stats.completed == 1 and runner.stats.skipped == 0
    (record,) = read_records(setup.study_dir)
    assert record.attempt == 2


def test_a_live_claim_is_left_to_its_attempt(tmp_path, trial_env):
    setup, q, key = queued(tmp_path)
    (job,) = queue.jobs(q)
    assert queue.claim(q, job, "live-host:1 cpu")
    with Heartbeat(q, job, BEAT_S, owner="live-host:1 cpu"):  # the other attempt keeps beating
        runner = one_trial(setup, key, GRACE_S * slowness())  # a busy machine's late beat is not a lost one
        stats = runner.run()
    assert "running live on live-host:1 cpu; leaving it" in runner.outcome and stats.stopped is None
    assert (stats.completed, stats.skipped) == (0, 0) and not read_records(setup.study_dir)
    latest = queue.latest(queue.jobs(q))[key]
    assert latest.state == TrialState.RUNNING and latest.attempt == 1


def test_the_entry_needs_a_config_and_a_key(capsys):
    assert main(["only-one-argument"]) == 2
    assert "usage: python -m harness.runner.one_trial CONFIG.json KEY" in capsys.readouterr().err
