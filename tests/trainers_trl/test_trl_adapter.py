"""The TRL adapter as the harness runs it: a subprocess over a trial file written by hand."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _run(trial_file: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.trainers.trl_adapter", str(trial_file)],
        capture_output=True,
        text=True,
        cwd=trial_file.parent,
        env={
            "PYTHONPATH": str(REPO),
            "PATH": "/usr/bin:/bin",
            "MLFLOW_DISABLE_TELEMETRY": "true",
            "HF_HUB_OFFLINE": "1",
        },
        timeout=300,
    )


@pytest.mark.slow
def test_a_short_grpo_run_writes_loadable_checkpoints_and_harness_metrics(tmp_path, write_trial):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    trial_file = write_trial(tmp_path, steps=2, eval_every=1)
    done = _run(trial_file)
    assert done.returncode == 0, done.stderr[-2000:]
    out = trial_file.parent
    final = AutoModelForCausalLM.from_pretrained(out / "checkpoint")
    start = AutoModelForCausalLM.from_pretrained(json.loads(trial_file.read_text())["model"]["start"])
    assert final.config.vocab_size == start.config.vocab_size
    assert AutoTokenizer.from_pretrained(out / "checkpoint").bos_token == "<bos>"
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-1"]  # the final one is checkpoint/
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2]
    for line in lines:
        assert {"train/reward_mean", "train/loss", "train/kl_ref", "train/clip_frac", "time/step_s"} <= set(line)
        assert 0.0 <= line["train/reward_mean"] <= 1.0
    generated = [line["compute/generated_tokens"] for line in lines]
    trained = [line["compute/trained_tokens"] for line in lines]
    assert 0 < generated[0] < generated[1] <= 2 * 2 * 8 * 4  # 2 steps x 2 prompts x 8 samples x 4 tokens at most
    assert generated[1] < trained[1]  # the updates read the prompts too
    assert lines[1]["compute/wall_s"] >= lines[0]["compute/wall_s"]
    flops = [line["compute/flops"] for line in lines]
    assert 0 < flops[0] < flops[1]  # the count itself: tests/trainers_trl/test_trl_metrics.py


@pytest.mark.slow
def test_lora_writes_the_adapter_with_its_base_named(tmp_path, write_trial):
    trial_file = write_trial(tmp_path, steps=1, eval_every=0)
    trial = json.loads(trial_file.read_text())
    trial["model"]["lora"] = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": "all-linear"}
    trial_file.write_text(json.dumps(trial))
    done = _run(trial_file)
    assert done.returncode == 0, done.stderr[-2000:]
    adapter = json.loads((trial_file.parent / "checkpoint" / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == trial["model"]["start"]
    assert not (trial_file.parent / "checkpoints").exists()


@pytest.mark.slow
def test_leave_one_out_runs_trls_rloo_trainer(tmp_path, write_trial):
    overrides = {"minibatches": 1, "aggregation": "seq_mean_token_sum"}
    trial_file = write_trial(tmp_path, algorithm="rloo", overrides=overrides, steps=1, eval_every=0)
    done = _run(trial_file)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (trial_file.parent / "checkpoint" / "model.safetensors").is_file()
    [line] = [json.loads(line) for line in (trial_file.parent / "metrics.jsonl").read_text().splitlines()]
    assert line["step"] == 1 and "train/reward_mean" in line


@pytest.mark.slow
def test_a_part_trl_lacks_fails_the_program_in_one_line(tmp_path, write_trial):
    trial_file = write_trial(tmp_path, algorithm="ppo")
    done = _run(trial_file)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].startswith("error: critic 'value_head': TRL's GRPO")
    assert not (trial_file.parent / "checkpoint").exists()


def test_an_unreadable_trial_file_is_one_line(tmp_path):
    bad = tmp_path / "trial.json"
    bad.write_text('{"contract": 99}')
    done = _run(bad)
    assert done.returncode != 0
    assert done.stderr.strip() == f"error: trial file {bad}: not a contract 1 trial file (its 'contract' field)"
