"""The executor flags and commands as a user meets them: ``harness run --executor``, ``harness
cancel``, the resources lines of ``harness plan`` and ``harness validate``; bad input is one line
and exit 2, before anything starts."""

from __future__ import annotations

from cli_main import run_main
from executors_helpers import options, trial_env_fixture, write_study  # noqa: F401  (the fixture trial_env)

from harness import store as study_db
from harness.cli.study_cmds import resource_lines
from harness.runner import queue
from harness.runner.run import prepare
from harness.study.load import load_study
from harness.study.resources import Resources


def test_slurm_without_sbatch_is_one_line_and_nothing_is_created(tmp_path, trial_env, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    path = write_study(tmp_path, ["ok"])
    code, out, err = run_main(monkeypatch, capsys, "run", str(path), "--executor", "slurm")
    assert code == 2
    assert err.strip() == "error: --executor slurm: sbatch is not on PATH; run on a machine of the Slurm cluster"
    assert not (tmp_path / "out" / "t").exists()


def test_an_unknown_executor_names_the_choices(tmp_path, trial_env, monkeypatch, capsys):
    code, _, err = run_main(monkeypatch, capsys, "run", str(write_study(tmp_path, ["ok"])), "--executor", "k8s")
    assert code == 2 and "local" in err and "slurm" in err and "ray" in err


def test_cancel_on_a_study_without_jobs_says_so_and_leaves_it_resumable(tmp_path, trial_env, monkeypatch, capsys):
    setup = prepare(write_study(tmp_path, ["ok"]), options())  # a study folder and its storage
    queue.create_queue(setup.storage, study_db.compare_study_name("t"), "maximize")
    code, out, _ = run_main(monkeypatch, capsys, "cancel", str(tmp_path / "out" / "t"))
    assert code == 0
    assert "t: no scheduler job was waiting or running" in out and "resumable" in out


def test_cancel_on_a_study_never_run_is_one_line(tmp_path, trial_env, monkeypatch, capsys):
    path = write_study(tmp_path, ["ok"])
    prepare(path, options())
    code, _, err = run_main(monkeypatch, capsys, "cancel", str(tmp_path / "out" / "t"))
    error = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(error) == 1 and error[0].endswith("nothing to cancel")


def test_plan_and_validate_print_each_arms_resources(tmp_path, trial_env):
    path = write_study(
        tmp_path,
        ["ok", "okb"],
        executor="slurm",
        resources={"cpus": 4, "memory": "32G", "time": "2:00:00"},
    )
    text = path.read_text().replace(
        "- name: okb\n  algorithm: grpo", "- name: okb\n  algorithm: grpo\n  resources: {gpus: 2}"
    )
    path.write_text(text)
    out = "\n".join(resource_lines(load_study(path)))  # what `harness plan` and `harness validate` print
    assert "executor slurm (harness run --executor overrides it); resources per trial:" in out
    assert "ok   4 CPUs, 32G, time limit 2:00:00 (120 min)" in out
    assert "okb  2 GPUs, 4 CPUs, 32G, time limit 2:00:00 (120 min)" in out


def test_plan_says_where_a_scheduler_studys_seed_check_runs_and_the_default_time_limit(tmp_path, trial_env):
    slurm = load_study(write_study(tmp_path, ["ok"], name="s", executor="slurm", resources={"cpus": 2}))
    out = "\n".join(resource_lines(slurm))
    assert "ok  2 CPUs" in out
    assert "an arm without time: its Slurm jobs get --trial-timeout + 10 min, else 1440 min" in out
    assert "seed check: the first `harness run` runs it, and builds the warm start it needs, on the machine" in out
    assert "checks: {seeds: false} skips it" in out
    off = load_study(write_study(tmp_path, ["ok"], name="o", executor="ray", checks={"seeds": False}))
    assert not any("seed check" in line or "without time" in line for line in resource_lines(off))
    assert "time limit 90 min" in Resources(time="90").describe()
