"""The trial's sampler, by ``rollout.backend``, for as long as the trial trains.

``hf``: the policy itself (``HfSampler``). ``vllm``: a server of the policy's model folder
(``harness.engine.vllm.serving.served``), one the trial starts (loopback, a free port, the trial
seed as the engine's seed, LoRA adapters up to the trial's rank) or one the user runs
(``rollout.vllm.url``); the starting policy is published to it (version 0) before the first
step samples, and with ``max_staleness`` > 0 the schedule's batches are sampled ahead
(``StaleSampler``). Leaving the context stops sampling ahead, stops a server the trial started
and deletes the saved policy versions.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from harness.engine.models import LoadedModel
from harness.engine.samplers import HfSampler, Sampler
from harness.engine.samplers.policy_sync import PolicySync, is_lora
from harness.engine.samplers.server_sampler import VllmSampler
from harness.engine.samplers.staleness import StaleSampler
from harness.engine.spec import TrialSpec
from harness.engine.vllm.serving import served
from harness.errors import ConfigError


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
def trial_sampler(spec: TrialSpec, lm: LoadedModel, batches: list[list[str]]) -> Iterator[Sampler]:
    """The sampler of a trial whose steps sample the prompts ``batches`` (one list per step)."""
    if spec.rollout.backend == "hf":
        yield HfSampler()
        return
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"{spec.trial_id}-policy-")))
        lora, settings = is_lora(lm), spec.rollout.vllm
        server = stack.enter_context(
            served(
                base_folder(lm),
                vocab_size=lm.model.config.vocab_size,
                log_path=folder / "vllm-server.log",
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
        sync = PolicySync(client, folder, lora=lora, served_model=server.base_model, prefix=prefix)
        sampler: Sampler = VllmSampler(client, sync, eos_id=lm.tokenizer.eos_token_id, pad_id=lm.tokenizer.pad_token_id)
        sampler.publish(lm, 0)
        if spec.rollout.max_staleness:
            sampler = StaleSampler(
                sampler,
                lm,
                batches,
                group_size=spec.algorithm.group_size,
                max_new_tokens=spec.train.max_new_tokens,
                temperature=spec.train.temperature,
                max_staleness=spec.rollout.max_staleness,
            )
        stack.callback(sampler.close)
        yield sampler
