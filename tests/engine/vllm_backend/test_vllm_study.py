"""A study with ``rollout.backend: vllm`` end to end, as a user runs it: ``harness run`` queues and
runs every trial through the runner, two at a time (each trial process samples and evaluates
with the session's real vLLM server, named by ``rollout.vllm.url``, under adapter names of its
own), ``harness report`` reads the records and decides every arm against the control. One arm
corrects the mismatch (token TIS) and samples up to one step stale, so the per-arm rollout
settings travel through the runner too."""

from __future__ import annotations

import csv
import subprocess
import sys

import pytest
import yaml

from harness.tracking.records import read_records

pytestmark = pytest.mark.slow

HARNESS = [sys.executable, "-c", "from harness.cli import main; main()"]


def _study(smollm2, vllm_server) -> dict:
    return {
        "name": "vllm_e2e",
        "task": {"name": "addition", "max_digits": 1, "n_train": 16, "n_eval": 4},
        "model": {"name": smollm2.folder, "dtype": "float32", "device": "cpu", "lora": {"r": 4, "alpha": 8}},
        "warmstart": {"enabled": False},
        "train": {"steps": 2, "prompts_per_step": 2, "max_new_tokens": 8, "eval_every": 0, "eval_samples": 1},
        "rollout": {"backend": "vllm", "vllm": {"url": vllm_server.base_url}},
        "checks": {"seeds": False},
        "primary_metric": "eval/mean_reward",
        "control": "grpo",
        "min_effect": 0.1,
        "seeds": 2,
        "arms": [
            {"name": "grpo", "algorithm": "grpo", "set": {"group_size": 2}},
            {
                "name": "tis_stale1",
                "algorithm": "grpo",
                "set": {"group_size": 2, "mismatch": "token_truncate", "rollout.max_staleness": 1},
            },
        ],
    }


def test_a_vllm_study_runs_reports_and_decides(smollm2, vllm_server, tmp_path):
    path = tmp_path / "vllm_e2e.yaml"
    path.write_text(yaml.safe_dump(_study(smollm2, vllm_server)))
    run = subprocess.run(
        [*HARNESS, "run", str(path), "--workers", "2", "--no-tracking"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stdout + run.stderr

    records = read_records(tmp_path / "runs" / "vllm_e2e")
    assert sorted((r.arm, r.seed, r.status) for r in records) == [
        ("grpo", 0, "completed"),
        ("grpo", 1, "completed"),
        ("tis_stale1", 0, "completed"),
        ("tis_stale1", 1, "completed"),
    ]
    for record in records:
        steps = [row for row in record.history if row["step"] > 0]
        assert len(steps) == 2
        limit = 1 if record.arm == "tis_stale1" else 0
        for row in steps:
            # the server's log-probs are not the trainer's: the mismatch is measured, and real
            assert row["mismatch/abs_logp_max"] > 0
            assert row["rollout/staleness_max"] <= limit
            assert row["time/weight_sync_s"] > 0

    report = subprocess.run(
        [*HARNESS, "report", str(path), "--out", str(tmp_path / "report")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert report.returncode == 0, report.stdout + report.stderr
    with open(tmp_path / "report" / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted((row["arm"], row["seed"]) for row in rows) == [
        ("grpo", "0"),
        ("grpo", "1"),
        ("tis_stale1", "0"),
        ("tis_stale1", "1"),
    ]
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert "tis_stale1" in summary
    assert any(word in summary for word in ("better", "worse", "equivalent", "inconclusive"))
