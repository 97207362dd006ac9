"""The warm start: supervised fine-tuning on solved examples, cached by content hash.

Every trial with the same model, task and warm-start settings loads the same cached weights, so
the arms of a study start from one policy. SFT stops at the first check where greedy accuracy on
a validation slice of the *train* prompts reaches ``target_accuracy`` (or after ``steps``), which
puts the starting policy where groups are mixed and RL has something to learn. Held-out prompts
are never used here.

The warm start reads only ``WarmStartInputs`` (the model, the task, its own settings and the
generation budget its accuracy checks use), and the cache key hashes all of it: a setting it
reads cannot be left out of the key, because it can read nothing else.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import random
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, PositiveInt

from harness.engine.evaluation import greedy_accuracy
from harness.engine.models import (
    LoadedModel,
    build_tiny_model,
    char_tokenizer,
    load_pretrained,
    pick_device,
)
from harness.engine.spec import ModelConfig, TaskConfig, TrialSpec, WarmStartConfig
from harness.engine.tasks.base import Item, Task

WARMSTART_FORMAT = 1  # bump when the procedure below changes what it produces
VALIDATION_PROMPTS = 128
CHECK_EVERY = 25


class WarmStartInputs(BaseModel):
    """Everything the warm start reads; arms and seeds of a study that agree here share it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: ModelConfig
    task: TaskConfig
    warmstart: WarmStartConfig
    max_new_tokens: PositiveInt  # the budget of the greedy accuracy checks that decide when to stop

    @classmethod
    def of(cls, spec: TrialSpec) -> WarmStartInputs:
        return cls(model=spec.model, task=spec.task, warmstart=spec.warmstart,
                   max_new_tokens=spec.train.max_new_tokens)


def cache_key(inputs: WarmStartInputs) -> str:
    payload = {"format": WARMSTART_FORMAT, **inputs.model_dump(mode="json")}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def initial_model(inputs: WarmStartInputs, task: Task) -> LoadedModel:
    """The policy before any warm start: a fresh tiny model, or the pretrained one."""
    if inputs.model.name != "tiny":
        return load_pretrained(inputs.model.name, inputs.model)
    tokenizer = char_tokenizer(task.alphabet)
    model = build_tiny_model(inputs.model, len(tokenizer), tokenizer, seed=inputs.warmstart.seed)
    device = pick_device(inputs.model)
    return LoadedModel(model.to(device), tokenizer, device, use_chat_template=False)


def load_policy(spec: TrialSpec, task: Task) -> tuple[LoadedModel, dict[str, float]]:
    """The starting policy for a trial, and the warm start's own metrics."""
    inputs = WarmStartInputs.of(spec)
    if not inputs.warmstart.enabled:
        return initial_model(inputs, task), {}
    folder = Path(spec.cache_dir) / "warmstart" / cache_key(inputs)
    with _locked(folder.with_suffix(".lock")):
        if not (folder / "warmstart.json").is_file():
            lm = initial_model(inputs, task)
            info = supervised_fine_tune(lm, task, inputs)
            _save(lm, folder, info)
    info = json.loads((folder / "warmstart.json").read_text())
    return _load(folder, inputs.model), info


def _save(lm: LoadedModel, folder: Path, info: dict) -> None:
    model = lm.model
    if hasattr(model, "merge_and_unload"):  # a LoRA warm start is merged into the base weights
        model = model.merge_and_unload()
    model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    (folder / "warmstart.json").write_text(json.dumps(info, indent=2))


def _load(folder: Path, model: ModelConfig) -> LoadedModel:
    lm = load_pretrained(str(folder), model)
    if model.name == "tiny":
        lm.use_chat_template = False
    return lm


def _sft_batch(lm: LoadedModel, items: list[Item]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded prompt+target+EOS ids, attention mask and loss mask (target tokens only)."""
    tok = lm.tokenizer
    prefix = [tok.bos_token_id] if tok.bos_token_id is not None and not lm.use_chat_template else []
    rows = []
    for item in items:
        prompt = prefix + tok(lm.format_prompt(item.prompt), add_special_tokens=False)["input_ids"]
        target = tok(item.target, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        rows.append((prompt, target))
    width = max(len(p) + len(t) for p, t in rows)
    ids = torch.full((len(rows), width), tok.pad_token_id, dtype=torch.long)
    attention = torch.zeros_like(ids)
    loss_mask = torch.zeros(ids.shape, dtype=torch.float)
    for r, (prompt, target) in enumerate(rows):
        seq = prompt + target
        ids[r, : len(seq)] = torch.tensor(seq)
        attention[r, : len(seq)] = 1
        loss_mask[r, len(prompt) : len(seq)] = 1.0
    return ids.to(lm.device), attention.to(lm.device), loss_mask.to(lm.device)


def supervised_fine_tune(lm: LoadedModel, task: Task, inputs: WarmStartInputs) -> dict[str, float]:
    config = inputs.warmstart
    validation = list(task.train[:VALIDATION_PROMPTS])
    pool = list(task.train[VALIDATION_PROMPTS:]) or list(task.train)
    rng = random.Random(config.seed)
    torch.manual_seed(config.seed)
    optimizer = torch.optim.AdamW(lm.model.parameters(), lr=config.lr, weight_decay=0.0)
    budget = inputs.max_new_tokens
    accuracy, step = 0.0, 0
    for step in range(1, config.steps + 1):
        lm.model.train()
        ids, attention, loss_mask = _sft_batch(lm, rng.sample(pool, min(config.batch_size, len(pool))))
        logits = lm.model(input_ids=ids, attention_mask=attention).logits[:, :-1].float()
        token_loss = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
        loss = (token_loss * loss_mask[:, 1:]).sum() / loss_mask[:, 1:].sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % CHECK_EVERY == 0 or step == config.steps:
            accuracy = greedy_accuracy(lm, validation, task.reward, budget)
            if accuracy >= config.target_accuracy:
                break
    lm.model.eval()
    return {"warmstart/steps": step, "warmstart/val_accuracy": accuracy}
