"""``resources:`` in a study: the study-wide default, each arm's keys over it, the checks of each
value, and the local executor's GPU sets (a trial asking for two GPUs gets two of its own)."""

from __future__ import annotations

import pytest
import yaml

from harness.errors import ConfigError
from harness.runner.executors import check_resources, executor_name
from harness.runner.executors.local import local_slots
from harness.runner.options import RunOptions
from harness.runner.slots import plan_slots
from harness.study.load import dump_study, load_study
from harness.study.resources import Resources


def study_file(tmp_path, *, resources=None, arm_resources=None, executor=None):
    data = {
        "name": "res",
        "seeds": 3,
        "control": "a",
        "arms": [
            {"name": "a", "algorithm": "grpo"},
            {"name": "wide", "algorithm": "dr_grpo", **({"resources": arm_resources} if arm_resources else {})},
        ],
    }
    if resources is not None:
        data["resources"] = resources
    if executor is not None:
        data["executor"] = executor
    path = tmp_path / "res.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_an_arm_overrides_the_study_wide_resources_key_by_key(tmp_path):
    path = study_file(
        tmp_path,
        resources={"cpus": 4, "memory": "32G", "partition": "gpu", "extra": {"exclude": "n1", "gres": "x"}},
        arm_resources={"gpus": 2, "memory": "64g", "extra": {"exclude": "n3"}},
    )
    study = load_study(path)
    base = {"cpus": 4, "partition": "gpu"}
    assert study.resources_of("a") == Resources(**base, memory="32G", extra={"exclude": "n1", "gres": "x"})
    assert study.resources_of("wide") == Resources(**base, gpus=2, memory="64G", extra={"exclude": "n3", "gres": "x"})
    (tmp_path / "again.yaml").write_text(dump_study(study))  # the snapshot the jobs load says the same
    assert load_study(tmp_path / "again.yaml").resources_of("wide") == study.resources_of("wide")


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"memory": "lots"}, "arms[1].resources.memory: expected a size such as 16G or 512M, got 'lots'"),
        ({"time": "soon"}, "arms[1].resources.time: expected MINUTES, H:MM:SS or D-HH:MM:SS, got 'soon'"),
        ({"gpus": -1}, "arms[1].resources.gpus"),
        ({"extra": {"--exclude": "n3"}}, "is not an sbatch option name"),
        ({"gpu": 2}, "arms[1].resources.gpu"),
    ],
)
def test_a_bad_resource_is_one_line_naming_the_key(tmp_path, given, message):
    with pytest.raises(ConfigError) as caught:
        load_study(study_file(tmp_path, arm_resources=given))
    assert message in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("time", "minutes"),
    [("90", 90), ("1:30", 2), ("2:00:00", 120), ("1-12", 36 * 60), ("1-00:30", 24 * 60 + 30), (45, 45)],
)
def test_slurm_time_formats_in_minutes(time, minutes):
    assert Resources(time=time).time_minutes == minutes


def test_memory_in_bytes_slurm_style():
    assert Resources(memory="512").memory_bytes == 512 * 1024**2  # a bare number is MB
    assert Resources(memory="2G").memory_bytes == 2 * 1024**3
    assert Resources().memory_bytes is None


def test_the_local_executor_gives_each_trial_its_own_gpu_set(tmp_path):
    study = load_study(study_file(tmp_path, arm_resources={"gpus": 2}))
    slots = local_slots(study, RunOptions(gpus=["0", "1", "2", "3", "4"]))
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in slots] == ["0,1", "2,3"]  # GPU 4 alone fits no trial
    assert [s.device for s in slots] == ["cuda:0,1", "cuda:2,3"]
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in plan_slots(gpus=["0", "1"])] == ["0", "1"]  # as before


def test_more_gpus_than_this_machine_shows_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU visible, whatever the machine has
    study = load_study(study_file(tmp_path, arm_resources={"gpus": 4}, executor="local"))
    with pytest.raises(ConfigError, match=r"^arm wide: resources.gpus is 4 per trial, but this machine .* at most 2"):
        local_slots(study, RunOptions(gpus=["0", "1"]))
    with pytest.raises(ConfigError, match="has at most 0"):
        check_resources(study)  # harness validate, with the study's executor local (no GPU here)


def test_the_flag_wins_over_the_study_which_wins_over_local(tmp_path):
    study = load_study(study_file(tmp_path, executor="slurm"))
    assert executor_name(study, RunOptions()) == "slurm"
    assert executor_name(study, RunOptions(executor="ray")) == "ray"
    assert executor_name(load_study(study_file(tmp_path)), RunOptions()) == "local"
    with pytest.raises(ConfigError, match="executor"):
        RunOptions(executor="kubernetes")
