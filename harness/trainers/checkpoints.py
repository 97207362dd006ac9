"""Load the checkpoints a program wrote, as the judge evaluates them: a transformers folder, or a
peft adapter folder whose ``adapter_config.json`` names its base (the start model when it names
none). The tokenizer is always the start model's, so every arm is read and decoded alike; a
checkpoint whose vocabulary is not the start model's was not trained from it, and is refused.
"""

from __future__ import annotations

import gc
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from harness.engine.models import LoadedModel, pick_dtype
from harness.engine.spec import ModelConfig
from harness.engine.trial_file import STEP_FOLDER
from harness.errors import one_line
from harness.trainers.faults import ProgramTrialError

ADAPTER_CONFIG = "adapter_config.json"


def vocabulary(model) -> int:
    """The rows of the model's input embedding: the token ids it can read."""
    return model.get_input_embeddings().weight.shape[0]


@dataclass(frozen=True)
class Reader:
    """How the judge reads every checkpoint: the start model's tokenizer, device, prompt format and
    vocabulary, kept without the start model itself (which would hold the program's memory)."""

    tokenizer: object
    device: torch.device
    use_chat_template: bool
    vocabulary: int

    @classmethod
    def released(cls, start: LoadedModel) -> Reader:
        """The reader of ``start``, whose model is let go (and its GPU memory with it)."""
        reader = cls(start.tokenizer, start.device, start.use_chat_template, vocabulary(start.model))
        start.model = None
        gc.collect()
        if reader.device.type == "cuda":
            torch.cuda.empty_cache()
        return reader


def _load_model(folder: Path, start: str, dtype: torch.dtype):
    adapter = folder / ADAPTER_CONFIG
    if not adapter.is_file():
        return AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
    from peft import PeftModel

    base = json.loads(adapter.read_text(encoding="utf-8")).get("base_model_name_or_path") or start
    return PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base, dtype=dtype), folder)


def load_checkpoint(folder: Path, reader: Reader, start_folder: str, config: ModelConfig) -> LoadedModel:
    """The checkpoint in ``folder`` with the start model's tokenizer, on the start model's device;
    a ``ProgramTrialError`` when there is none, it does not load, or its vocabulary differs."""
    if not folder.is_dir() or not any(folder.iterdir()):
        raise ProgramTrialError(
            f"the trainer's program wrote no checkpoint in {folder}: save the final model there "
            "(save_pretrained: a transformers folder, or a peft adapter)"
        )
    try:
        model = _load_model(folder, start_folder, pick_dtype(config, reader.device))
    except Exception as err:  # noqa: BLE001 - whatever the loaders raise, the checkpoint is unusable
        raise ProgramTrialError(f"the checkpoint {folder} does not load ({one_line(err, 300)})") from None
    expected, found = reader.vocabulary, vocabulary(model)
    if found != expected:
        raise ProgramTrialError(
            f"the checkpoint {folder} reads {found} token ids, but the start model (model.start) and the task's "
            f"tokenizer have {expected}: train from model.start and keep its tokenizer"
        )
    return LoadedModel(model.to(reader.device), reader.tokenizer, reader.device, reader.use_chat_template)


def periodic_checkpoints(folder: Path, last_step: int) -> dict[int, Path]:
    """The program's ``step-<N>`` checkpoints before its last step, by step."""
    if not folder.is_dir():
        return {}
    found = {int(m[1]): p for p in folder.iterdir() if p.is_dir() and (m := STEP_FOLDER.fullmatch(p.name))}
    return {step: found[step] for step in sorted(found) if 0 < step < last_step}
