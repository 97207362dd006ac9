"""Training rollouts sampled by a vLLM server, as the same ``Rollout`` the ``hf`` sampler gives.

The server is sent what ``harness.engine.rollout.sample`` reads: each prompt's token ids through
the policy's own tokenizer and chat template (``prompt_token_ids``: unpadded, so the server sees
no pad tokens), ``group_size`` samples per prompt, the token budget, the temperature (top-p 1,
no top-k, no penalties: the client sends them all) and EOS as the stop token, which the
completion keeps, as ``hf`` keeps it. The server runs with ``--logprobs-mode processed_logprobs``,
so each token's log-prob is of the temperature-scaled distribution it was drawn from, as the
``hf`` sampler's and the trainer's are (``harness.engine.logprobs``).

Back come the completions' token ids and the sampler's log-prob of each, built into the same
tensors: prompts left-padded (every completion starts at one column) and repeated per sample,
completions right-padded with the pad token to the longest one, the mask 1 on every returned
token, log-probs 0 on padding; and the policy version each row was sampled with.

What differs from ``hf``: the random stream (the server's engine is seeded once, per-request
seeds fail on vLLM's CPU backend), so samples are not the ``hf`` backend's for the same seed;
and the arithmetic (vLLM's kernels, batching and prefix cache), so the log-probs differ from the
trainer's by rounding: the sampler-trainer mismatch the step measures (``mismatch/*``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from harness.engine.models import LoadedModel
from harness.engine.rollout import Rollout, pad_rows, prompt_token_ids
from harness.engine.samplers.policy_sync import PolicySync


def completions_rollout(prompts: Sequence[Sequence[int]], completions: Sequence[Sequence], pad_id: int, version: int):
    """The ``Rollout`` of ``completions`` (per prompt, its samples: each with ``token_ids`` and
    ``logprobs``) of ``prompts`` (unpadded token ids), sampled by the policy ``version``; on the CPU."""
    group = len(completions[0]) if completions else 0
    if len(completions) != len(prompts) or any(len(per) != group for per in completions):
        raise ValueError(f"expected {group} completions for each of {len(prompts)} prompts")
    prompt_ids, prompt_mask = pad_rows([list(p) for p in prompts], pad_id, left=True)
    rows = [c for per in completions for c in per]
    ids, mask = pad_rows([list(c.token_ids) for c in rows], pad_id, left=False)
    logprobs, _ = pad_rows([list(c.logprobs) for c in rows], 0.0, left=False, dtype=torch.float32)
    return Rollout(
        prompt_ids=prompt_ids.repeat_interleave(group, 0),
        prompt_mask=prompt_mask.repeat_interleave(group, 0),
        completion_ids=ids,
        completion_mask=mask.float(),
        logprobs=logprobs,
        policy_version=torch.full((len(rows),), version, dtype=torch.long),
    )


class VllmSampler:
    """Samples with the policy the server holds (``sync``: what it holds, and how it gets there)."""

    def __init__(self, client, sync: PolicySync, *, eos_id: int, pad_id: int):
        self.client, self.sync, self.eos_id, self.pad_id = client, sync, eos_id, pad_id

    def sample_groups(
        self,
        lm: LoadedModel,
        prompts: list[str],
        group_size: int,
        *,
        max_new_tokens: int,
        temperature: float,
        generator: torch.Generator | None = None,
    ) -> Rollout:
        """As ``HfSampler.sample_groups``; ``generator`` is not read (the server's seeded engine draws)."""
        ids = prompt_token_ids(lm, prompts)
        return self.sample_ids(ids, group_size, max_new_tokens=max_new_tokens, temperature=temperature).to(lm.device)

    def sample_ids(
        self, prompts: list[list[int]], group_size: int, *, max_new_tokens: int, temperature: float
    ) -> Rollout:
        """The rollout of ``prompts`` (token ids), on the CPU; safe to call from another thread."""
        with self.sync.serving() as (version, model):
            completions = self.client.complete(
                prompts,
                n=group_size,
                max_tokens=max_new_tokens,
                temperature=temperature,
                model=model,
                stop_token_ids=[self.eos_id],
            )
        return completions_rollout(prompts, completions, self.pad_id, version)

    def publish(self, lm: LoadedModel, version: int) -> float:
        return self.sync.publish(lm, version)

    def close(self) -> None:
        self.sync.close()
