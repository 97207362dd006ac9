"""A study whose arm is a program asking for two GPUs (a verl launch, say) plans and validates its
resources against what the Slurm nodes have (``sinfo`` on PATH, faked here with a chosen node)."""

from __future__ import annotations

import os
import stat

import pytest
from cli_main import run_main

STUDY = """\
name: wide_program
seeds: 2
executor: slurm
task: {name: addition, max_digits: 1, n_train: 40, n_eval: 8}
model: {name: tiny}
train: {steps: 2, prompts_per_step: 2}
control: own
resources: {cpus: 4, memory: 32G, time: "2:00:00"}
arms:
  - {name: own, algorithm: grpo}
  - name: verl_grpo
    algorithm: grpo
    trainer:
      kind: command
      command: [python3, -m, verl.trainer.main_ppo, "actor_rollout_ref.model.path={model.start}"]
    resources: {gpus: 2, partition: gpu}
"""


@pytest.fixture
def slurm_node(tmp_path, monkeypatch):
    """A fake ``sinfo`` (and ``sbatch``) on PATH whose one node has ``gres``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()

    def node(gres: str) -> None:
        for name, body in {"sinfo": f"echo '{gres}'", "sbatch": "exit 1"}.items():
            path = bin_dir / name
            path.write_text(f"#!/bin/sh\n{body}\n")
            path.chmod(path.stat().st_mode | stat.S_IEXEC)

    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "study.yaml").write_text(STUDY)
    return node


@pytest.mark.parametrize("command", ["validate", "plan"])
def test_a_two_gpu_command_arm_plans_and_validates_on_nodes_that_have_them(slurm_node, monkeypatch, capsys, command):
    slurm_node("gpu:a100:4(S:0-1)")
    code, out, err = run_main(monkeypatch, capsys, command, "study.yaml")
    assert code == 0, err
    assert "executor slurm" in out
    assert "verl_grpo  2 GPUs, 4 CPUs, 32G, time limit 2:00:00 (120 min), partition gpu" in out


def test_a_two_gpu_command_arm_on_one_gpu_nodes_is_one_line(slurm_node, monkeypatch, capsys):
    slurm_node("gpu:a100:1")
    code, out, err = run_main(monkeypatch, capsys, "validate", "study.yaml")
    assert code == 2
    [line] = err.strip().splitlines()
    assert "arm verl_grpo: resources.gpus is 2 per trial" in line and "node (sinfo) has at most 1" in line
