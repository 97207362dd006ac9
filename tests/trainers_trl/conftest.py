"""``write_trial``: a trial file written by hand, as the contract lays it out, over a tiny testbed
model saved as a transformers folder (built the way ``harness.engine.models`` builds it, untrained)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.algorithms.presets import resolve_algorithm
from harness.engine.models import build_tiny_model, char_tokenizer
from harness.engine.spec import ModelConfig, TrainConfig
from harness.engine.task_config import TaskConfig
from harness.engine.tasks import build_task


def tiny_start(folder: Path, task_config: TaskConfig) -> Path:
    task = build_task(task_config)
    tokenizer = char_tokenizer(task.alphabet)
    model = build_tiny_model(ModelConfig(), len(tokenizer), tokenizer, seed=0)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _write_trial(root: Path, *, algorithm: str = "grpo", overrides: dict | None = None, **train) -> Path:
    """``root/trial.json`` and its prompt files for one short trial on the addition task."""
    task_config = TaskConfig(n_train=16, n_eval=8)
    task = build_task(task_config)
    start = tiny_start(root / "start", task_config)
    out = root / "out"
    out.mkdir(parents=True)
    lines = [
        json.dumps({"id": str(i), "prompt": it.prompt, "text": it.prompt, "answer": it.answer})
        for i, it in enumerate(task.train)
    ]
    (out / "train_prompts.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    trial = {
        "contract": 1,
        "trial_id": "t-s0",
        "study": "trl_test",
        "arm": "trl",
        "seed": 0,
        "algorithm": resolve_algorithm(algorithm, overrides).model_dump(mode="json"),
        "train": TrainConfig(**{"steps": 2, "prompts_per_step": 2, "max_new_tokens": 4, **train}).model_dump(
            mode="json"
        ),
        "model": {**ModelConfig().model_dump(mode="json"), "start": str(start)},
        "task": task_config.model_dump(mode="json"),
        "train_prompts": str(out / "train_prompts.jsonl"),
        "eval_prompts": str(out / "eval_prompts.jsonl"),
        "output_dir": str(out),
        "checkpoint_dir": str(out / "checkpoint"),
        "checkpoints_dir": str(out / "checkpoints"),
        "metrics_file": str(out / "metrics.jsonl"),
        "scores_file": str(out / "scores.jsonl"),
        "devices": [],
        "mlflow": None,
    }
    path = out / "trial.json"
    path.write_text(json.dumps(trial), encoding="utf-8")
    return path


@pytest.fixture
def write_trial():
    return _write_trial
