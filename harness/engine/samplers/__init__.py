"""What samples a training step's rollouts, behind one interface the step calls (``Sampler``).

``HfSampler`` is the embedded path: ``harness.engine.rollout.sample_groups`` with the policy
being trained, in the trial process, drawing from the trial's generator (every study before
``rollout.backend`` existed ran it, and still runs it bit for bit). ``vllm.VllmSampler`` sends
the same prompt token ids, token budget, temperature and stop token to a vLLM server and builds
the same ``Rollout`` from its completions and per-token log-probs; ``policy_sync.PolicySync``
brings each new policy to the server, and ``staleness.StaleSampler`` samples later steps'
batches in a background thread while the current one trains (``rollout.max_staleness``).

After each step the trial calls ``publish(lm, version)``: the policy after ``version`` steps
reaches the sampler, and the seconds it took come back (None where nothing moves: the ``hf``
sampler samples with the policy itself). The trial's held-out evaluations go through the same
backend (``backend.TrialBackend``): ``VllmSampler.evaluate`` scores the version just published on
the server.
"""

from __future__ import annotations

from typing import Protocol

import torch

from harness.engine.models import LoadedModel
from harness.engine.rollout import Rollout, sample_groups


class Sampler(Protocol):
    def sample_groups(
        self,
        lm: LoadedModel,
        prompts: list[str],
        group_size: int,
        *,
        max_new_tokens: int,
        temperature: float,
        generator: torch.Generator | None,
    ) -> Rollout:
        """``group_size`` completions per prompt, rows grouped by prompt (prompt i: rows i*G..i*G+G-1)."""

    def publish(self, lm: LoadedModel, version: int) -> float | None:
        """Bring the policy after ``version`` optimiser steps to the sampler; the seconds it took."""

    def close(self) -> None:
        """Stop whatever the sampler runs beside the trial."""


class HfSampler:
    """The policy being trained samples its own rollouts, in this process (the default)."""

    def sample_groups(self, lm: LoadedModel, prompts: list[str], group_size: int, **sampling) -> Rollout:
        return sample_groups(lm, prompts, group_size, **sampling)

    def publish(self, lm: LoadedModel, version: int) -> None:
        return None  # the sampler is the policy: nothing to move

    def close(self) -> None:
        pass
