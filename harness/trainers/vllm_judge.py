"""The one judge through a vLLM server: the start model and every checkpoint a program wrote,
scored by ``harness.engine.vllm.evaluation.evaluate_served`` with one server per trial, into the
same per-prompt records as the ``hf`` judge (``harness.trainers.judge``).

The server serves the start model. LoRA checkpoints (peft adapter folders) are loaded at run time
one after another, each scored and unloaded; full checkpoints (transformers folders) are then
reloaded into the server in place, one after another (``VllmClient.reload_weights``). Every
folder is checked before the server starts, so a program that wrote no checkpoint, or one the
server cannot serve, fails without one: an adapter must be of the start model (its
``base_model_name_or_path`` names ``model.start``, or nothing), and a full folder must read the
start model's token ids.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from harness.engine.models import LoadedModel
from harness.engine.spec import PromptScores, TrialSpec
from harness.engine.tasks.base import Task
from harness.engine.vllm.client import VllmClient
from harness.engine.vllm.evaluation import evaluate_served
from harness.engine.vllm.serving import served
from harness.trainers.checkpoints import ADAPTER_CONFIG, Reader
from harness.trainers.faults import ProgramTrialError
from harness.trainers.judge import curve_checkpoints


@dataclass(frozen=True)
class Checkpoint:
    step: int
    folder: Path
    lora_rank: int | None  # None: a full model folder


def served_scores(
    client: VllmClient, model: str, lm: LoadedModel, task: Task, benchmarks: dict[str, Task], spec: TrialSpec, step: int
) -> list[PromptScores]:
    """The task's per-prompt scores of the served ``model`` at ``step``, then each benchmark's."""
    return [
        evaluate_served(client, model, lm, task, spec.train, step),
        *(
            evaluate_served(client, model, lm, bench, spec.train, step, benchmark=name)
            for name, bench in benchmarks.items()
        ),
    ]


def judge_through_vllm(
    spec: TrialSpec,
    reader: Reader,
    document: dict,
    task: Task,
    benchmarks: dict[str, Task],
    *,
    log_path: Path,
    dtype: str = "float32",
    python: str | None = None,
    url: str | None = None,
    start_timeout_s: float = 600.0,
    request_timeout_s: float = 600.0,
) -> list[PromptScores]:
    """The start model's scores (step 0) and every checkpoint's, in step order, through one vLLM
    server: the user's at ``url``, else one started from ``python``'s environment, its log at
    ``log_path`` (``harness.engine.vllm.serving.served``)."""
    start = document["model"]["start"]
    folders = curve_checkpoints(spec, document)
    checkpoints = [_checkpoint(step, folder, start, reader) for step, folder in folders.items()]
    adapters = [c for c in checkpoints if c.lora_rank is not None]
    full = [c for c in checkpoints if c.lora_rank is None]
    lm = LoadedModel(None, reader.tokenizer, reader.device, reader.use_chat_template)  # tokenizer and prompt format
    rank = max((c.lora_rank for c in adapters), default=None)
    scores: list[PromptScores] = []
    with served(
        start,
        vocab_size=reader.vocabulary,
        log_path=log_path,
        python=python,
        url=url,
        seed=spec.seed,
        lora_rank=rank,
        dtype=dtype,
        start_timeout_s=start_timeout_s,
        request_timeout_s=request_timeout_s,
    ) as on:
        scores += served_scores(on.client, on.base_model, lm, task, benchmarks, spec, 0)
        for c in adapters:  # on the start model's weights: before any full reload
            name = f"{spec.trial_id}-step-{c.step}"
            on.client.load_adapter(name, str(c.folder))
            scores += served_scores(on.client, name, lm, task, benchmarks, spec, c.step)
            on.client.unload_adapter(name)
        for c in full:
            on.client.reload_weights(str(c.folder))
            scores += served_scores(on.client, on.base_model, lm, task, benchmarks, spec, c.step)
    return sorted(scores, key=lambda one: one.step)  # stable: the task's first at each step


def _checkpoint(step: int, folder: Path, start: str, reader: Reader) -> Checkpoint:
    """The checkpoint in ``folder``, checked as the server will need it (ProgramTrialError)."""
    if not folder.is_dir() or not any(folder.iterdir()):
        raise ProgramTrialError(
            f"the trainer's program wrote no checkpoint in {folder}: save the final model there "
            "(save_pretrained: a transformers folder, or a peft adapter)"
        )
    adapter = folder / ADAPTER_CONFIG
    if adapter.is_file():
        config = _json(adapter)
        base = config.get("base_model_name_or_path")
        if base and Path(base).resolve() != Path(start).resolve():
            raise ProgramTrialError(
                f"the adapter {folder} is of {base}, not of the start model {start}: the vLLM judge serves "
                "adapters on model.start"
            )
        rank = config.get("r")
        if not isinstance(rank, int) or rank < 1:
            raise ProgramTrialError(f"the adapter {folder} gives no LoRA rank r in {ADAPTER_CONFIG}")
        return Checkpoint(step, folder, rank)
    found = _json(folder / "config.json").get("vocab_size")
    if found != reader.vocabulary:
        raise ProgramTrialError(
            f"the checkpoint {folder} reads {found} token ids, but the start model (model.start) and the task's "
            f"tokenizer have {reader.vocabulary}: train from model.start and keep its tokenizer"
        )
    return Checkpoint(step, folder, None)


def _json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ProgramTrialError(f"the checkpoint's {path} does not read as JSON ({err})") from None
    if not isinstance(data, dict):
        raise ProgramTrialError(f"the checkpoint's {path} is not a JSON object")
    return data
