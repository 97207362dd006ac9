"""The inputs a program trial is handed: the start model folder, the train and held-out prompts
as JSON lines, and the trial file naming them (docs/trainers.md).

The start model is the warm-started policy every arm of the seed starts from: with a warm start,
its cache folder (a transformers folder with the tokenizer, shared by every trial of that set-up:
nothing is copied); without one, the initial model saved once into the trial's folder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from harness.engine.models import LoadedModel
from harness.engine.spec import TrialSpec
from harness.engine.tasks.base import Item, Task, prompt_ids
from harness.engine.trial_file import TRIAL_FILE, trial_document
from harness.engine.warmstart_key import cache_folder
from harness.ground.files import atomic_write

START_FOLDER = "start"


def start_folder(spec: TrialSpec, lm: LoadedModel, trial_dir: Path) -> Path:
    """The folder of the start model, saved there when it is not the warm-start cache's."""
    if spec.warmstart.enabled:
        return cache_folder(spec).resolve()
    folder = trial_dir / START_FOLDER
    model = lm.model.merge_and_unload() if hasattr(lm.model, "merge_and_unload") else lm.model
    model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    return folder


def prompt_rows(lm: LoadedModel, items: list[Item], benchmark: str | None = None, *, held_out: bool) -> list[dict]:
    """One JSON row per prompt: its id (as the evaluation names it), the raw prompt, the text the
    model sees and the reference answer; held-out rows also name their benchmark (null: the task)."""
    rows = []
    for pid, item in zip(prompt_ids(items), items):
        row = {"id": pid, "prompt": item.prompt, "text": lm.format_prompt(item.prompt), "answer": item.answer}
        rows.append({**row, "benchmark": benchmark} if held_out else row)
    return rows


def held_out_items(task: Task, spec: TrialSpec) -> list[Item]:
    """The held-out prompts every evaluation scores (``train.max_eval_prompts`` of them)."""
    return list(task.eval[: spec.train.max_eval_prompts])


def _write_jsonl(path: str, rows: list[dict]) -> None:
    atomic_write(Path(path), "".join(json.dumps(row) + "\n" for row in rows))


def visible_devices() -> list[str]:
    """The GPU ids this trial may use (its worker's ``CUDA_VISIBLE_DEVICES``); none on a CPU."""
    if not torch.cuda.is_available():
        return []
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is None:
        return [str(i) for i in range(torch.cuda.device_count())]
    return [d.strip() for d in given.split(",") if d.strip()]


def write_inputs(
    spec: TrialSpec, task: Task, benchmarks: dict[str, Task], lm: LoadedModel, trial_dir: Path
) -> dict[str, Any]:
    """Write the program's inputs into ``trial_dir`` and return its trial file's content."""
    document = trial_document(spec, trial_dir, str(start_folder(spec, lm, trial_dir)), visible_devices())
    _write_jsonl(document["train_prompts"], prompt_rows(lm, list(task.train), held_out=False))
    held_out = prompt_rows(lm, held_out_items(task, spec), held_out=True)
    for name, bench in benchmarks.items():
        held_out += prompt_rows(lm, held_out_items(bench, spec), name, held_out=True)
    _write_jsonl(document["eval_prompts"], held_out)
    atomic_write(trial_dir / TRIAL_FILE, json.dumps(document, indent=1))
    return document
