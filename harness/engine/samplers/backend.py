"""What generates for a trial, by ``rollout.backend``, for as long as the trial trains: its
training rollouts (the sampler) and every held-out evaluation (the one judge).

``hf``: the policy itself (``HfSampler``), evaluated by ``harness.engine.evaluation.evaluate``.
``vllm``: a server of the policy's model folder (``harness.engine.vllm.serving.served``), one the
trial starts (loopback, a free port, the trial seed as the engine's seed, LoRA adapters up to the
trial's rank, its log ``SERVER_LOG`` in the trial's folder) or one the user runs
(``rollout.vllm.url``); the starting policy is published to it (version 0) before anything
generates, and with ``max_staleness`` > 0 the schedule's batches are sampled ahead
(``StaleSampler``). Evaluations go to the same server, of the version the step just published
(``VllmSampler.evaluate``), with the ``hf`` evaluation's prompts, budget, stop rule and scoring.
Leaving the context stops sampling ahead, stops a server the trial started and deletes the saved
policy versions; the server's log stays.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from harness.engine.evaluation import evaluate
from harness.engine.models import LoadedModel
from harness.engine.samplers import HfSampler, Sampler
from harness.engine.samplers.policy_sync import PolicySync, is_lora
from harness.engine.samplers.server_sampler import VllmSampler
from harness.engine.samplers.staleness import StaleSampler
from harness.engine.spec import PromptScores, TrainConfig, TrialSpec
from harness.engine.tasks.base import Task
from harness.engine.vllm.serving import served
from harness.errors import ConfigError

#: the started vLLM server's log, in the trial's folder
SERVER_LOG = "vllm-server.log"


class Evaluate(Protocol):
    def __call__(
        self, lm: LoadedModel, task: Task, train: TrainConfig, step: int, *, benchmark: str | None = None
    ) -> PromptScores:
        """The held-out scores of the policy after ``step`` steps (``harness.engine.evaluation.evaluate``)."""


@dataclass(frozen=True)
class TrialBackend:
    """The trial's generation: ``sampler`` samples its training rollouts, ``evaluate`` scores
    its held-out prompts, both with the same backend."""

    sampler: Sampler
    evaluate: Evaluate


def base_folder(lm: LoadedModel) -> str:
    """The model folder the policy was loaded from (under a LoRA adapter: its base's), which
    the server serves: the prepared model, or the warm start's folder (a LoRA warm start is
    merged into it)."""
    model = lm.model.get_base_model() if is_lora(lm) else lm.model
    folder = Path(str(model.name_or_path))
    if not (folder / "config.json").is_file():
        raise ConfigError(
            f"rollout.backend vllm: the policy was not loaded from a model folder ({folder} has no config.json), "
            "so no server can load it; use rollout.backend: hf"
        )
    return str(folder)


@contextmanager
def trial_backend(
    spec: TrialSpec, lm: LoadedModel, batches: list[list[str]], folder: Path | None = None
) -> Iterator[TrialBackend]:
    """The generation of a trial whose steps sample the prompts ``batches`` (one list per step).
    ``folder``: the trial's own folder, where a started server's log goes (None: a new
    temporary folder, kept, so that the log an error names is there after the trial)."""
    if spec.rollout.backend == "hf":
        yield TrialBackend(HfSampler(), evaluate)
        return
    with ExitStack() as stack:
        versions = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"{spec.trial_id}-policy-")))
        logs = Path(folder) if folder is not None else Path(tempfile.mkdtemp(prefix=f"{spec.trial_id}-"))
        lora, settings = is_lora(lm), spec.rollout.vllm
        server = stack.enter_context(
            served(
                base_folder(lm),
                vocab_size=lm.model.config.vocab_size,
                log_path=logs / SERVER_LOG,
                python=settings.python,
                url=settings.url,
                seed=spec.seed,
                lora_rank=spec.model.lora.r if lora else None,
                max_loras=2,  # the newest adapter and one a request sampling ahead still uses
                dtype=str(next(lm.model.parameters()).dtype).removeprefix("torch."),
                start_timeout_s=settings.start_timeout_s,
                request_timeout_s=settings.request_timeout_s,
            )
        )
        client = server.client
        prefix = f"policy-{uuid.uuid4().hex[:8]}"  # adapter names of this trial alone, on a shared server too
        sync = PolicySync(client, versions, lora=lora, served_model=server.base_model, prefix=prefix)
        served_sampler = VllmSampler(client, sync, eos_id=lm.tokenizer.eos_token_id, pad_id=lm.tokenizer.pad_token_id)
        served_sampler.publish(lm, 0)
        sampler: Sampler = served_sampler
        if spec.rollout.max_staleness:
            sampler = StaleSampler(
                served_sampler,
                lm,
                batches,
                group_size=spec.algorithm.group_size,
                max_new_tokens=spec.train.max_new_tokens,
                temperature=spec.train.temperature,
                max_staleness=spec.rollout.max_staleness,
            )
        stack.callback(sampler.close)
        yield TrialBackend(sampler, served_sampler.evaluate)
