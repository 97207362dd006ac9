"""The frozen reference policy: KL is measured against it, and DPO samples its pairs from it.

For a LoRA policy the reference is the same network with the adapter switched off, so it costs
no memory; otherwise it is a frozen copy of the starting weights.
"""

from __future__ import annotations

import copy
from contextlib import nullcontext
from dataclasses import replace
from functools import partial

import torch

from harness.engine.generation import Generation, generate
from harness.engine.logprobs import completion_forward
from harness.engine.micro_batches import in_micro_batches
from harness.engine.models import LoadedModel
from harness.engine.rollout import Rollout
from harness.engine.tasks.base import Task


class Reference:
    def __init__(self, policy: torch.nn.Module):
        self._adapter_off = getattr(policy, "disable_adapter", None)
        if self._adapter_off is not None:
            self._model = policy
        else:
            self._model = copy.deepcopy(policy).eval().requires_grad_(False)

    def _frozen(self):
        return self._adapter_off() if self._adapter_off is not None else nullcontext()

    @torch.no_grad()
    def logprobs(self, rollout: Rollout, temperature: float, micro_batch_size: int | None = None) -> torch.Tensor:
        """The reference's log-probs of the completion tokens, over micro-batches of rows."""
        forward = partial(completion_forward, self._model, temperature=temperature)
        with self._frozen():
            return in_micro_batches(forward, rollout, micro_batch_size).logprobs

    @torch.no_grad()
    def generate(self, lm: LoadedModel, task: Task, prompts: list[str], group_size: int, **sampling) -> Generation:
        """Samples (completions or episodes) from the reference policy (the warm start), with ``lm``'s tokenizer."""
        with self._frozen():
            return generate(replace(lm, model=self._model), task, prompts, group_size, **sampling)
