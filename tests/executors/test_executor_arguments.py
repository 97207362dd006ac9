"""What the executors hand their schedulers, without a scheduler: sbatch parameters, Ray task
options, job names, the GPUs a Slurm node has, and where the storage password goes (a fake
``sbatch`` on PATH records what a real one would be given)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.runner.executors.base import JobHandle, JobRequest, environment, too_many_gpus
from harness.runner.executors.ray_tasks import NODE_LOSS_RETRIES, forwarded_env, task_options
from harness.runner.executors.scheduled import job_name
from harness.runner.executors.slurm import DEFAULT_TIME_MIN, SlurmExecutor, most_gpus, sbatch_parameters
from harness.runner.queue.jobs import Job
from harness.study.resources import Resources

PASSWORD = "s3cret-pw-91x"
URL = f"postgresql://harness:{PASSWORD}@db-host:5432/harness"


def request(**resources) -> JobRequest:
    return JobRequest(
        name="study/arm/seed3",
        argv=["python", "-m", "harness.runner.one_trial", "/runs/study/tmp/jobs/q.cpu.json", "arm-s3-abc"],
        resources=Resources(**resources),
        secret_env={"HARNESS_WORKER_STORAGE": URL},
    )


def test_sbatch_parameters_carry_the_arms_resources_and_requeue():
    params = sbatch_parameters(
        request(
            gpus=2, cpus=8, memory="64G", time="1-00:30:00", partition="gpu", account="lab", extra={"exclude": "n3"}
        ),
        trial_timeout_s=None,
    )
    assert params == {
        "job_name": "study/arm/seed3",
        "time": 24 * 60 + 30,
        "cpus_per_task": 8,
        "ntasks_per_node": 1,
        "gpus_per_node": 2,
        "mem": "64G",
        "partition": "gpu",
        "account": "lab",
        "additional_parameters": {"requeue": True, "exclude": "n3"},
    }


def test_sbatch_time_falls_back_to_the_trial_timeout_then_a_day():
    assert sbatch_parameters(request(), trial_timeout_s=3600)["time"] == 60 + 10
    assert sbatch_parameters(request(), trial_timeout_s=None)["time"] == DEFAULT_TIME_MIN
    assert "gpus_per_node" not in sbatch_parameters(request(gpus=0), trial_timeout_s=None)


def test_the_most_gpus_of_one_node_from_sinfo():
    assert most_gpus("(null)\ngpu:4\ngpu:a100:8(S:0-1)\n") == 8
    assert most_gpus("gpu:a100:2,gpu:v100:2\n") == 4
    assert most_gpus("(null)\n") == 0


def test_too_many_gpus_names_the_arm_and_the_limit():
    needs = {"small": Resources(gpus=1), "wide": Resources(gpus=4)}
    assert too_many_gpus(needs, 4, "the largest Slurm node") is None
    line = too_many_gpus(needs, 2, "the largest Slurm node (sinfo)")
    assert line.startswith("arm wide: resources.gpus is 4 per trial, but the largest Slurm node (sinfo) has at most 2")
    assert "\n" not in line


def test_ray_task_options_name_the_trial_and_retry_on_node_loss():
    options = task_options(request(gpus=1, cpus=4, memory="2G"))
    assert options == {
        "name": "study/arm/seed3",
        "num_cpus": 4,
        "num_gpus": 1,
        "memory": 2 * 1024**3,
        "max_retries": NODE_LOSS_RETRIES,
        "retry_exceptions": False,
    }
    assert task_options(request())["num_cpus"] == 1 and "memory" not in task_options(request())


def test_ray_tasks_get_only_the_forwarded_variables():
    environ = {"HARNESS_FORWARD_ENV": "HF_HOME, PYTHONPATH,ABSENT", "HF_HOME": "/hf", "PYTHONPATH": "/src", "X": "1"}
    assert forwarded_env(environ) == {"HF_HOME": "/hf", "PYTHONPATH": "/src"}
    assert forwarded_env({}) == {}


def test_job_names_say_study_arm_and_seed_or_slot():
    compare = Job(1, 0, None, {"arm": "grpo", "seed": 4, "trial_id": "grpo-s4-x", "phase": "compare"})
    tune = Job(2, 1, None, {"arm": "grpo", "slot": 7, "phase": "tune"})
    assert job_name("st", compare) == "st/grpo/seed4"
    assert job_name("st", tune) == "st/grpo/slot7"


def test_a_job_handle_round_trips_through_the_trial_attribute():
    handle = JobHandle("slurm", "42", "st/a/seed0", ("/x/42_0_log.out", "/x/42_0_log.err"))
    assert JobHandle.from_attr(json.loads(json.dumps(handle.as_attr()))) == handle


def test_the_environment_block_restores_what_was_there(monkeypatch):
    monkeypatch.setenv("HARNESS_WORKER_STORAGE", "before")
    monkeypatch.delenv("HARNESS_WORKER_TRACKING", raising=False)
    with environment({"HARNESS_WORKER_STORAGE": URL, "HARNESS_WORKER_TRACKING": "t"}):
        assert os.environ["HARNESS_WORKER_STORAGE"] == URL
    assert os.environ["HARNESS_WORKER_STORAGE"] == "before" and "HARNESS_WORKER_TRACKING" not in os.environ


@pytest.fixture
def fake_sbatch(tmp_path, monkeypatch):
    """An ``sbatch`` that records its argv and environment and answers like Slurm (job 4242)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "sbatch"
    script.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$@" > {tmp_path}/sbatch.argv\n'
        f"env > {tmp_path}/sbatch.env\n"
        'echo "Submitted batch job 4242"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    srun = bindir / "srun"  # submitit refuses to submit unless an srun is on PATH (it is never run here)
    srun.write_text("#!/bin/sh\nexit 1\n")
    srun.chmod(srun.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("HARNESS_WORKER_STORAGE", raising=False)
    return tmp_path


def test_the_storage_password_reaches_the_job_through_its_environment_only(fake_sbatch):
    folder = fake_sbatch / "slurm"
    handle = SlurmExecutor(folder).submit(request(cpus=2))
    assert handle.id == "4242" and handle.name == "study/arm/seed3"
    assert handle.logs[0].endswith("4242_0_log.out")
    assert f"HARNESS_WORKER_STORAGE={URL}" in (fake_sbatch / "sbatch.env").read_text()  # sbatch exports it
    written = [p for p in folder.rglob("*") if p.is_file()]
    assert any(p.suffix == ".pkl" for p in written) and any(p.suffix == ".sh" for p in written)
    for path in [*written, fake_sbatch / "sbatch.argv"]:
        assert PASSWORD.encode() not in path.read_bytes(), path  # not in the script, the pickle or argv
    script = next(p for p in written if p.suffix == ".sh").read_text()
    assert "#SBATCH --requeue" in script and "#SBATCH --job-name=study/arm/seed3" in script
    assert "HARNESS_WORKER_STORAGE" not in os.environ  # only for the submission


def test_without_sbatch_the_slurm_executor_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError, match=r"^--executor slurm: sbatch is not on PATH"):
        SlurmExecutor(Path(tmp_path))
