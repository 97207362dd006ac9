"""`harness run` / `worker` / `status` end to end with fake trial functions (no trainer needed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from optuna.trial import TrialState
from runner_helpers import calls, options, write_study

from harness import store as study_db
from harness.runner import queue
from harness.runner.run import prepare, run_study, run_worker, study_status
from harness.study.expand import expand
from harness.study.load import load_study
from harness.study.search_space import tuning_space_key
from harness.tracking.records import read_records, write_record

HARNESS = [sys.executable, "-c", "from harness.cli import main; main()"]


def _optuna_jobs(study_path: Path, name: str | None = None) -> list[queue.Job]:
    study = load_study(study_path)
    folder = Path(study.output_dir)
    storage = study_db.open_storage(study_db.default_storage_url(folder))
    return queue.jobs(queue.load_queue(storage, name or study.name))


def _ids(study_path: Path) -> list[str]:
    return [s.trial_id for s in expand(load_study(study_path))]


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.mark.slow
def test_failures_are_isolated_and_recorded(tmp_path, fake_env, capfd):
    """A raise, a NaN error and a NaN metric fail their trial only, with the reason; the rest
    complete; exit 1. MLflow being unreachable only warns."""
    path = write_study(tmp_path, ["ok", "raise", "nan", "badmetric"], seeds=[0, 1])
    opts = options(tracking=True, tracking_uri="http://127.0.0.1:9")
    summary = run_study(path, opts)
    assert summary.exit_code == 1
    status = {t.key: t for t in summary.trials}
    ids = _ids(path)
    assert set(status) == set(ids)
    for tid in ids:
        arm = tid.split("-")[0]
        assert status[tid].status == ("completed" if arm == "ok" else "failed")
        assert calls(fake_env, tid) == 1
    reasons = {tid.split("-")[0]: t.reason for tid, t in status.items() if t.reason}
    assert reasons["raise"].startswith("RuntimeError: boom")
    assert reasons["nan"] == "NonFiniteError: loss is nan at step 3"
    assert reasons["badmetric"] == "NonFiniteError: primary metric eval/accuracy is nan"
    text = summary.format()
    assert "NonFiniteError: loss is nan" in text and "failed raise-s0" in text
    assert "MLflow tracking at http://127.0.0.1:9 failed" in capfd.readouterr().err

    # local records == what ran, with status and reason; Optuna agrees
    records = {r.trial_id: r for r in read_records(load_study(path).output_dir)}
    assert set(records) == set(ids)
    assert all(r.phase == "compare" and r.attempt == 1 for r in records.values())
    assert records[ids[0]].status == "completed" and records[ids[0]].final["eval/accuracy"] > 0
    jobs = {j.key: j for j in _optuna_jobs(path)}
    for tid, record in records.items():
        job = jobs[tid]
        if record.status == "completed":
            assert job.state == TrialState.COMPLETE
            assert job.value == pytest.approx(record.final["eval/accuracy"])
        else:
            assert job.state == TrialState.FAIL and job.reason == record.error
    progress = opts.stream.getvalue()
    assert "[t] 2/8 done, 0 running, 6 failed, 0 waiting" in progress

    report = study_status(path).format()
    assert "comparison: 8 trials: 2 completed, 0 running, 0 waiting, 6 failed" in report
    assert "NonFiniteError: loss is nan at step 3" in report


def test_rerun_is_idempotent_and_never_reruns_completed(tmp_path, fake_env):
    path = write_study(tmp_path, ["ok_a", "ok_b"], seeds=2)
    opts = options(workers=2)
    first = run_study(path, opts)
    assert first.exit_code == 0
    n_trials = len(_optuna_jobs(path))
    assert n_trials == 4
    lines = opts.stream.getvalue().splitlines()
    assert any("4/4 done" in line and "median" in line for line in lines)

    second = run_study(path, options())
    assert second.exit_code == 0
    assert len(_optuna_jobs(path)) == n_trials  # nothing enqueued twice
    for tid in _ids(path):
        assert calls(fake_env, tid) == 1  # two workers never ran the same trial; no re-run
    assert (Path(load_study(path).output_dir) / "study.yaml").exists()


@pytest.mark.slow
def test_timeout_retries_and_crashes(tmp_path, fake_env):
    path = write_study(tmp_path, ["flaky", "hang", "die"])
    # 5 s: a loaded 2-core machine can take 2 s to start a healthy trial process
    summary = run_study(path, options(trial_timeout=5, retries=1))
    by_arm = {t.key.split("-")[0]: t for t in summary.trials}
    assert by_arm["flaky"].status == "completed" and by_arm["flaky"].attempts == 2
    assert by_arm["flaky"].reasons == [(1, "RuntimeError: transient failure")]
    assert by_arm["hang"].status == "failed" and by_arm["hang"].attempts == 2
    assert by_arm["hang"].reason == "timeout: exceeded --trial-timeout 5s"
    assert by_arm["die"].status == "failed"
    assert by_arm["die"].reason.startswith("trial process killed by SIGKILL")
    assert summary.exit_code == 1
    folder = Path(load_study(path).output_dir)
    failed_attempts = sorted(p.name for p in (folder / "records" / "failed").glob("*.json"))
    assert len(failed_attempts) == 3  # attempt 1 of each, kept
    assert "Traceback" in next((folder / "logs").glob("flaky-*.log")).read_text()


def test_stale_and_half_finished_trials_are_recovered_by_a_joining_worker(tmp_path, fake_env):
    """A dead worker left one trial RUNNING (heartbeat goes stale: re-queued and run) and one
    RUNNING with its completed record written (Optuna is told, the trial is not run again)."""
    from fake_trials import metrics

    from harness.engine.spec import TrialResult
    from harness.tracking.records import make_record

    path = write_study(tmp_path, ["ok"], seeds=3)
    opts = options(grace_period=2)
    setup = prepare(path, opts)
    main_q = queue.create_queue(setup.storage, "t", "maximize")
    specs = expand(setup.study)
    queue.enqueue_specs(main_q, specs, phase="compare", retries=0)
    lost = queue.claim_next(main_q)
    half = queue.claim_next(main_q)
    half_spec = next(s for s in specs if s.trial_id == half.key)
    result = TrialResult(trial_id=half.key, final=metrics(half_spec))
    write_record(setup.study_dir, make_record(half_spec, result, started_at=time.time()))

    summary = run_worker(setup.study_dir, opts)
    assert summary.exit_code == 0, summary.format()
    tries = queue.attempts(queue.jobs(main_q))
    assert [j.state for j in tries[lost.key]] == [TrialState.FAIL, TrialState.COMPLETE]
    assert tries[lost.key][0].reason.startswith("worker lost")
    assert calls(fake_env, lost.key) == 1
    assert [j.state for j in tries[half.key]] == [TrialState.FAIL, TrialState.COMPLETE]
    assert calls(fake_env, half.key) == 0  # the record was authoritative
    assert tries[half.key][-1].value == pytest.approx(metrics(half_spec)["eval/accuracy"])
    assert {r.trial_id for r in read_records(setup.study_dir)} == {s.trial_id for s in specs}


def _start_cli(path: Path, *extra: str, sleep: float = 0.5) -> subprocess.Popen:
    env = {**os.environ, "FAKE_TRIAL_SLEEP": str(sleep)}
    cmd = HARNESS + [
        "run",
        str(path),
        "--trial-fn",
        "fake_trials:by_arm",
        "--no-tracking",
        "--poll-interval",
        "0.2",
        "--heartbeat-interval",
        "1",
        "--grace-period",
        "3",
        "--kill-grace",
        "2",
        *extra,
    ]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_sigkill_then_rerun_resumes_without_rerunning_completed(tmp_path, fake_env):
    path = write_study(tmp_path, ["ok"], seeds=4)
    ids = _ids(path)
    folder = load_study(path).output_dir
    proc = _start_cli(path)
    try:
        _wait_for(lambda: len(read_records(folder)) >= 2, 120, "2 completed trials")
    finally:
        proc.send_signal(signal.SIGKILL)  # the runner only: its orphaned worker must notice
        proc.communicate(timeout=60)  # returns once the orphan (holding the pipes) has exited
    jobs = queue.latest(_optuna_jobs(path)).values()
    assert all(j.state != TrialState.RUNNING for j in jobs)  # the orphan re-queued its trial
    completed = {r.trial_id for r in read_records(folder) if r.status == "completed"}
    started = {tid: calls(fake_env, tid) for tid in ids}
    assert 2 <= len(completed) < len(ids)

    summary = run_study(path, options())
    assert summary.exit_code == 0, summary.format()
    for tid in completed:
        assert calls(fake_env, tid) == started[tid]  # no completed trial ran again
    records = read_records(folder)
    assert sorted(r.trial_id for r in records) == sorted(ids)  # none lost
    assert all(r.status == "completed" for r in records)


def test_sigint_stops_cleanly_and_requeues_running_trials(tmp_path, fake_env, monkeypatch):
    """Ctrl-C (SIGINT to the runner, here this process) stops workers and re-queues trials."""
    import threading

    monkeypatch.setenv("FAKE_TRIAL_SLEEP", "1.5")
    path = write_study(tmp_path, ["ok"], seeds=4)
    ids = _ids(path)

    def interrupt() -> None:  # once a second trial runs, the runner's handler is installed
        _wait_for(lambda: sum(calls(fake_env, t) for t in ids) >= 2, 120, "a second trial to start")
        os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=interrupt, daemon=True)
    thread.start()
    summary = run_study(path, options())
    thread.join(timeout=5)
    assert summary.interrupted and summary.exit_code == 130
    assert "interrupted" in summary.format()
    states = {j.key: j.state for j in queue.latest(_optuna_jobs(path)).values()}
    assert TrialState.RUNNING not in states.values()
    assert list(states.values()).count(TrialState.WAITING) >= 2  # the interrupted one is back
    assert "0 running" in study_status(path).format()


def tune_jobs(path, arm: str):
    """The tuning jobs of ``arm`` over the study file's current search space."""
    study = load_study(path)
    return _optuna_jobs(path, study_db.tune_study_name(study.name, arm, tuning_space_key(study)))


@pytest.mark.slow
def test_tuning_gives_every_arm_the_same_budget(tmp_path, fake_env):
    tuning = {
        "n_trials": 3,
        "seeds": [100],
        "sampler_seed": 0,
        "search_space": {"lr": {"low": 1.0e-4, "high": 1.0e-2, "log": True}},
    }
    path = write_study(tmp_path, ["ok_a", "ok_b"], seeds=1, tuning=tuning)
    summary = run_study(path, options())
    assert summary.exit_code == 0, summary.format()
    for arm in ("ok_a", "ok_b"):
        tune = tune_jobs(path, arm)
        assert len(tune) == 3 and all(j.state == TrialState.COMPLETE for j in tune)
        assert len({j.params["lr"] for j in tune}) == 3  # distinct points (seeded per slot)
    records = read_records(load_study(path).output_dir)
    assert sum(r.phase == "tune" for r in records) == 6
    compare = [r for r in records if r.phase == "compare"]
    assert sorted(r.arm for r in compare) == ["ok_a", "ok_b"]
    best = max(tune_jobs(path, "ok_a"), key=lambda j: j.value)
    chosen = next(r for r in compare if r.arm == "ok_a")
    assert chosen.spec["algorithm"]["lr"] == pytest.approx(best.params["lr"])

    report = study_status(path).format()
    assert "tuning: 6 trials: 6 completed" in report and "comparison: 2 trials: 2 completed" in report

    again = run_study(path, options())  # resume: the completed budget counts, nothing re-runs
    assert again.exit_code == 0
    assert len(tune_jobs(path, "ok_a")) == 3 and len(_optuna_jobs(path)) == 2
    assert sum(calls(fake_env, r.trial_id) for r in records) == len(records)


@pytest.mark.slow
def test_a_changed_search_space_starts_a_new_tuning_phase(tmp_path, fake_env):
    tuning = {"n_trials": 2, "seeds": [100], "search_space": {"lr": {"low": 1.0e-4, "high": 1.0e-2, "log": True}}}
    path = write_study(tmp_path, ["ok_a", "ok_b"], seeds=1, tuning=tuning)
    assert run_study(path, options()).exit_code == 0
    shrunk = {**tuning, "search_space": {"lr": {"low": 1.0e-6, "high": 2.0e-6, "log": True}}}
    path = write_study(tmp_path, ["ok_a", "ok_b"], seeds=1, tuning=shrunk)
    summary = run_study(path, options())
    assert summary.exit_code == 0, summary.format()
    for arm in ("ok_a", "ok_b"):
        assert len(tune_jobs(path, arm)) == 2  # a fresh budget over the new space
        assert all(1.0e-6 <= j.params["lr"] <= 2.0e-6 for j in tune_jobs(path, arm))
    compare = [r for r in read_records(load_study(path).output_dir) if r.phase == "compare"]
    current = [r for r in compare if 1.0e-6 <= r.spec["algorithm"]["lr"] <= 2.0e-6]
    assert len(compare) == 4 and sorted(r.arm for r in current) == ["ok_a", "ok_b"]
    report = study_status(path).format()
    assert "comparison: 2 trials: 2 completed" in report
    assert "1 trial from arm ok_a tuned over an earlier search space is not used" in report


@pytest.mark.parametrize(
    "args",
    [
        ["--workers", "0"],
        ["--retries", "-1"],
        ["--trial-fn", "no_such_module:f"],
        ["--storage", "nosuchdb://x"],
    ],
)
def test_bad_options_exit_2_with_nothing_created(tmp_path, fake_env, monkeypatch, capsys, args):
    from harness.cli import main

    path = write_study(tmp_path, ["ok"])
    monkeypatch.setattr(sys, "argv", ["harness", "run", str(path), "--no-tracking", *args])
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == 2
    assert not (tmp_path / "out").exists()
    assert "error" in capsys.readouterr().err


def test_malformed_study_exits_2_with_nothing_created(tmp_path, fake_env, monkeypatch, capsys):
    from harness.cli import main

    path = write_study(tmp_path, ["ok"])
    data = path.read_text().replace("algorithm: grpo", "algorithm: grpo\n  set: {eps_hgh: 0.3}")
    path.write_text(data)
    monkeypatch.setattr(sys, "argv", ["harness", "run", str(path), "--trial-fn", "fake_trials:by_arm"])
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "eps_hgh" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists() and not fake_env.exists()


def test_progress_line_gives_an_eta_from_the_median_trial_time():
    import io

    from harness.runner.pool import Progress
    from harness.runner.queue import Counts

    progress = Progress("t", [], keys=None, workers=2, stream=io.StringIO(), every_s=60)
    line = progress.line(Counts(completed=3, running=2, waiting=3, failed=1, durations=[10.0, 30.0, 20.0]))
    # 5 trials left on 2 workers: 3 rounds of the 20 s median
    assert line == "[t] 3/9 done, 2 running, 1 failed, 3 waiting; median 20s/trial, ETA ~1m00s"
    assert "ETA" not in progress.line(Counts(completed=2, durations=[5.0, 7.0]))
