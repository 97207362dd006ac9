"""``harness run`` checks that the seeds reach the rollouts before it queues anything."""

import pytest
from runner_helpers import calls, options, write_study

from harness.runner import seed_check as preflight
from harness.runner.child import DEFAULT_TRIAL_FN
from harness.runner.run import run_study
from harness.study.expand import condition_spec
from harness.study.load import load_study


@pytest.fixture
def check_with(monkeypatch, fake_env):
    # a fresh interpreter per check: a forkserver of this test process would keep an earlier test's env
    monkeypatch.setenv("HARNESS_TRIAL_START", "exec")

    def use(name: str):
        monkeypatch.setattr(preflight, "SEED_CHECK_FN", f"fake_trials:{name}")

    return use


def test_a_failed_check_stops_the_run_before_anything_is_queued(tmp_path, check_with):
    check_with("failing_seed_check")
    path = write_study(tmp_path, ["ok_a", "ok_b"], seeds=2)
    with pytest.raises(preflight.SeedCheckFailed, match=r"^seed check: seeds 0 and 1 gave identical rollouts"):
        run_study(path, options(trial_fn=DEFAULT_TRIAL_FN))
    assert list((tmp_path / "out" / "t").rglob("*.json")) == []  # no trial ran, no record, no pass kept


def test_a_pass_is_kept_so_a_rerun_does_not_repeat_it(tmp_path, check_with, fake_env):
    check_with("passing_seed_check")
    study = load_study(write_study(tmp_path, ["ok_a", "ok_b"], seeds=2))
    folder = tmp_path / "out" / "t"
    opts = options(trial_fn=DEFAULT_TRIAL_FN)
    first = preflight.seed_check(study, folder, opts)
    assert first.startswith("seed check: seed 0 repeats (100% of the tokens alike), seeds 0 and 1 differ (10% alike)")
    assert preflight.seed_check(study, folder, opts).startswith("seed check: passed before")
    assert calls(fake_env, condition_spec(study, "ok_a", 0).trial_id, "checked") == 1


def test_the_check_can_be_switched_off_and_is_skipped_for_fake_trials(tmp_path, check_with, fake_env):
    check_with("failing_seed_check")
    off = load_study(write_study(tmp_path, ["ok_a"], name="off", checks={"seeds": False}))
    assert (
        preflight.seed_check(off, tmp_path, options(trial_fn=DEFAULT_TRIAL_FN))
        == "seed check: off (checks: {seeds: false})"
    )
    on = load_study(write_study(tmp_path, ["ok_a"], name="on"))
    assert preflight.seed_check(on, tmp_path, options()).startswith("seed check: skipped (trials run by fake_trials")


def test_a_check_that_cannot_run_says_so(tmp_path, check_with):
    check_with("no_such_function")
    study = load_study(write_study(tmp_path, ["ok_a"]))
    with pytest.raises(preflight.SeedCheckFailed, match="seed check could not run .*checks: {seeds: false}"):
        preflight.seed_check(study, tmp_path / "out" / "t", options(trial_fn=DEFAULT_TRIAL_FN))


def test_the_console_shows_what_the_check_builds_as_it_goes(tmp_path, check_with):
    # the first trial of a study builds the warm start (a minute or more): its progress lines,
    # which go to the check's log file, are shown on the console too, and nothing else of the log
    check_with("seed_check_building_a_warm_start")
    study = load_study(write_study(tmp_path, ["ok_a"]))
    opts = options(trial_fn=DEFAULT_TRIAL_FN)
    preflight.seed_check(study, tmp_path / "out" / "t", opts)
    lines = opts.stream.getvalue().splitlines()
    assert lines[0].startswith("[harness] seed check: sampling the control's first rollout with seed 0 twice")
    assert lines[1:] == [f"[harness] seed check: warm start: step {n}/2, val accuracy 0.5 (target 0.4)" for n in (1, 2)]


def test_before_a_schedulers_jobs_the_check_says_it_runs_on_this_machine(tmp_path, check_with):
    check_with("passing_seed_check")
    study = load_study(write_study(tmp_path, ["ok_a"]))
    opts = options(trial_fn=DEFAULT_TRIAL_FN)
    preflight.seed_check(study, tmp_path / "out" / "t", opts, before_jobs=True)
    first = opts.stream.getvalue().splitlines()[0]
    assert "once on this machine, before any job is submitted (it may build the warm start first" in first
    assert "checks: {seeds: false} skips the check" in first
