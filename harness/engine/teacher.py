"""The teacher of on-policy distillation (issue 35): a frozen model whose log-probs of the
policy's sampled tokens the step reads, as it reads the reference's. Which model it is, and
where it comes from, is ``teacher_load.py``'s.

``teacher_model: tiny`` on the testbed is the built-in model at twice the trial's width and
depth (the same character tokenizer), fine-tuned on the task's worked solutions by the warm
start with the trial's ``warmstart`` settings but no early stop short of a perfect validation
accuracy (all of ``warmstart.steps``, where the policy's warm start stops at its target): a
bigger model trained further. It is trained once per set-up and cached where the warm start is
(``warmstart.load_policy`` under the teacher's own key), and every arm and seed that names it
shares it. Any other name is a model loaded as the policy's is (a hub id or a
local folder), used as it is; it must share the policy's tokenizer, since it scores the policy's
token ids.
"""

from __future__ import annotations

from functools import partial

import torch

from harness.engine.logprobs import completion_forward
from harness.engine.micro_batches import in_micro_batches
from harness.engine.rollout import Rollout


class Teacher:
    def __init__(self, model: torch.nn.Module, name: str, metrics: dict[str, float] | None = None):
        self.model = model.eval().requires_grad_(False)
        self.name = name
        #: what the trial's final metrics say of it (the testbed teacher's SFT steps and accuracy)
        self.metrics = dict(metrics or {})

    @torch.no_grad()
    def logprobs(self, rollout: Rollout, temperature: float, micro_batch_size: int | None = None) -> torch.Tensor:
        """The teacher's log-probs of the rollout's completion tokens, over micro-batches of rows."""
        forward = partial(completion_forward, self.model, temperature=temperature)
        return in_micro_batches(forward, rollout, micro_batch_size).logprobs
