"""Bad command-line arguments are one line naming the problem (exit 2), never a traceback;
a trial that fails is one line too (exit 1); runner options that make no sense stop the run
before anything starts, and more workers than the machine has is a one-line warning.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
import yaml
from cli_main import run_main

import harness.engine.trial as trial_module
from harness.errors import ConfigError, NonFiniteError
from harness.runner.options import RunOptions

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


def write_study(tmp_path: Path, name: str = "tiny") -> Path:
    data = {
        "name": name,
        "output_dir": str(tmp_path / "out" / name),
        "seeds": 1,
        "control": "a",
        "arms": [{"name": "a", "algorithm": "grpo"}, {"name": "b", "algorithm": "grpo", "set": {"eps_high": 0.3}}],
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# ------------------------------------------------------------------ harness results --csv


@pytest.fixture
def study_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "runs" / "s"
    (folder / "records").mkdir(parents=True)
    return folder


@pytest.mark.parametrize(
    "flag, target, message",
    [
        ("--csv", "missing_dir/out.csv", "folder missing_dir does not exist"),
        ("--curves-csv", "missing_dir/c.csv", "folder missing_dir does not exist"),
        ("--csv", "afile/out.csv", "afile is not a folder"),
        ("--csv", "adir", "is a folder"),
    ],
)
def test_results_csv_bad_path_is_one_line_exit_2(study_folder, tmp_path, monkeypatch, capsys, flag, target, message):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    code, out, err = run_main(monkeypatch, capsys, "results", str(study_folder), flag, target)
    assert code == 2, (out, err)
    line = one_error_line(err)
    assert f"{flag} {target}" in line and message in line
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before, "nothing written"


def test_results_csv_into_an_existing_folder_still_works(study_folder, tmp_path, monkeypatch, capsys):
    code, out, err = run_main(monkeypatch, capsys, "results", str(study_folder), "--csv", "t.csv")
    assert code == 0, err
    assert (tmp_path / "t.csv").is_file() and "wrote t.csv" in out


# ------------------------------------------------------------------ harness trial that fails


@pytest.mark.slow
def test_trial_that_fails_at_run_time_is_one_line_exit_1(tmp_path, monkeypatch, capsys):
    """The trial starts, then its RL step fails (a model that cannot be loaded is refused before
    any work, exit 2: tests/engine/test_model_source.py); no traceback."""
    monkeypatch.chdir(tmp_path)

    def failing_step(*args, **kwargs):
        raise RuntimeError("the step went wrong")

    monkeypatch.setitem(trial_module.STEPS, "rl", failing_step)
    code, out, err = run_main(
        monkeypatch, capsys, "trial", "--algorithm", "grpo", "--steps", "1", "--set", "warmstart.enabled=false"
    )
    assert code == 1, (out, err)
    line = one_error_line(err)
    assert line.startswith("error: trial grpo-s0-") and " failed: " in line and "the step went wrong" in line


@pytest.mark.parametrize(
    "raised, code, text",
    [
        (NonFiniteError("loss is nan at step 3"), 1, "failed: NonFiniteError: loss is nan at step 3"),
        (
            RuntimeError("CUDA out of memory.\nTried to allocate 2 GiB"),
            1,
            "failed: RuntimeError: CUDA out of memory. Tried to allocate 2 GiB",
        ),
        (ConfigError("task.path data.jsonl: no such file"), 2, "error: task.path data.jsonl: no such file"),
    ],
)
def test_trial_failures_map_to_exit_codes(tmp_path, monkeypatch, capsys, raised, code, text):
    import harness.engine.trial as engine_trial

    def fail(spec, folder=None):
        raise raised

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(engine_trial, "run_trial", fail)
    got, out, err = run_main(monkeypatch, capsys, "trial", "--algorithm", "grpo")
    assert got == code, (out, err)
    assert text in one_error_line(err)


# ------------------------------------------------------------------ runner options


def opts(**kw) -> RunOptions:
    return RunOptions(**{"gpus": [], "stream": io.StringIO(), **kw})


@pytest.mark.parametrize(
    "field, value, flag",
    [
        ("poll_interval", 0.0, "--poll-interval"),
        ("poll_interval", -1.0, "--poll-interval"),
        ("poll_interval", float("nan"), "--poll-interval"),
        ("poll_interval", float("inf"), "--poll-interval"),
        ("kill_grace", -1.0, "--kill-grace"),
        ("kill_grace", float("nan"), "--kill-grace"),
        ("kill_grace", float("inf"), "--kill-grace"),
        ("trial_timeout", float("inf"), "--trial-timeout"),
        ("trial_timeout", float("nan"), "--trial-timeout"),
        ("trial_timeout", 0.0, "--trial-timeout"),
        ("heartbeat_interval", float("inf"), "--heartbeat-interval"),
        ("grace_period", float("inf"), "--grace-period"),
        ("grace_period", float("nan"), "--grace-period"),
    ],
)
def test_run_options_refuse_nonsense(field, value, flag):
    with pytest.raises(ConfigError, match=f"^{flag}: must be"):
        opts(**{field: value})


@pytest.mark.parametrize(
    "values, line",
    [
        ({"workers": 0}, "--workers: must be at least 1, got 0"),
        ({"retries": -1}, "--retries: must be 0 or more, got -1"),
        (
            {"heartbeat_interval": 10.0, "grace_period": 10.0},
            "--grace-period: must be longer than the heartbeat interval",
        ),
        ({"trial_fn": "no_such_module:f"}, "--trial-fn: no module named 'no_such_module'"),
        ({"progress_every": 0.0}, "progress_every: must be a positive, finite number of seconds, got 0.0"),
    ],
)
def test_a_bad_run_option_is_one_line_naming_its_flag(values, line):
    with pytest.raises(ConfigError) as caught:
        opts(**values)
    assert str(caught.value) == line


def test_the_grace_period_defaults_to_three_heartbeats_and_at_least_a_minute():
    assert opts().grace_period == 60.0
    assert opts(heartbeat_interval=30.0).grace_period == 90.0
    assert opts(heartbeat_interval=30.0, grace_period=45.0).grace_period == 45.0


def test_run_options_accept_sensible_values():
    o = opts(kill_grace=0.0, poll_interval=0.05, trial_timeout=3600.0, workers=1)
    o.warn_over_capacity()
    assert o.out().getvalue() == ""


def test_too_many_workers_warns_on_one_line_and_goes_on():
    o = opts(workers=1000)
    o.warn_over_capacity()  # no error
    lines = o.out().getvalue().splitlines()
    assert len(lines) == 1 and "warning" in lines[0] and "--workers 1000" in lines[0]
    assert "CPU core" in lines[0]
    assert (
        opts(workers=3, gpus=["0", "1"])
        .capacity_warning(cores=64)
        .startswith("--workers 3 exceeds the 2 GPUs this machine has")
    )
    assert opts(workers=2, gpus=["0", "1"]).capacity_warning(cores=64) is None
    assert opts(workers=4).capacity_warning(cores=4) is None
    assert opts().capacity_warning(cores=1) is None  # the default: one worker


@pytest.mark.parametrize(
    "args, flag",
    [
        (["--poll-interval", "0"], "--poll-interval"),
        (["--poll-interval", "-0.5"], "--poll-interval"),
        (["--kill-grace", "-1"], "--kill-grace"),
        (["--trial-timeout", "inf"], "--trial-timeout"),
        (["--trial-timeout", "nan"], "--trial-timeout"),
    ],
)
def test_run_with_nonsense_options_exits_2_before_anything_starts(tmp_path, monkeypatch, capsys, args, flag):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    path = write_study(tmp_path)
    # a trial function that fails at once: were the options accepted, nothing long would run
    code, out, err = run_main(monkeypatch, capsys, "run", str(path), "--no-tracking", "--trial-fn", "os:getcwd", *args)
    assert code == 2, (out, err)
    assert one_error_line(err).startswith(f"error: {flag}: must be")
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()


def test_worker_with_too_many_workers_warns_and_goes_on(tmp_path, monkeypatch, capsys):
    """The warning is one line, then the command carries on (here: to the queue, not started yet)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    path = write_study(tmp_path)
    code, _out, err = run_main(monkeypatch, capsys, "worker", str(path), "--workers", "1000", "--no-tracking")
    lines = err.strip().splitlines()
    assert len(lines) == 2, err
    assert "warning: --workers 1000 exceeds the" in lines[0] and "CPU core" in lines[0]
    assert lines[1].startswith("error: ") and "start the study with `harness run` first" in lines[1]
    assert code == 2
