"""DPO (Rafailov et al. 2023, arXiv:2305.18290) on best-vs-worst pairs of sampled completions, and
where the samples come from (``pairs_from``, a registry of pair sources in ``parts.py``).

``reference`` is offline DPO: every step samples its pairs from the frozen reference (the warm
start), so they never follow the policy being trained, as in DPO's usual setting of preferences
over another model's samples (here drawn afresh each step rather than fixed). ``policy`` is
online DPO: the pairs are the current policy's own samples. Either way the verifier ranks them
and the loss is taken against the frozen reference.
"""

from __future__ import annotations

from typing import TypeVar

import torch
import torch.nn.functional as F
from torch import Tensor

from harness.algorithms.parts import PAIR_SOURCES

Sampler = TypeVar("Sampler")


@PAIR_SOURCES.implements("reference", cites="DPO: Rafailov et al. 2023 (arXiv:2305.18290), offline")
def from_reference(policy: Sampler, reference: Sampler) -> Sampler:
    """Offline: sample the pairs from the frozen reference (the warm start)."""
    return reference


@PAIR_SOURCES.implements("policy", cites="online DPO: Guo et al. 2024 (arXiv:2402.04792)")
def from_policy(policy: Sampler, reference: Sampler) -> Sampler:
    """Online: sample the pairs from the policy being trained."""
    return policy


def pair_sampler(pairs_from: str, *, policy: Sampler, reference: Sampler) -> Sampler:
    """The sampler that source ``pairs_from`` draws the pairs with."""
    return PAIR_SOURCES.get(pairs_from)(policy, reference)


def dpo_loss(
    policy_chosen_logps: Tensor,
    policy_rejected_logps: Tensor,
    ref_chosen_logps: Tensor,
    ref_rejected_logps: Tensor,
    beta: float,
) -> tuple[Tensor, dict[str, Tensor]]:
    """``-log sigmoid(beta * [log pi/ref (chosen) - log pi/ref (rejected)])``, mean over pairs.

    Inputs are per-pair sequence log-probability sums [P]. The implicit rewards are
    ``beta * log pi/ref``; ``dpo_margin`` is their mean difference, ``dpo_pair_acc`` the share
    of pairs where the chosen one's is higher (metrics: detached 0-d tensors).
    """
    chosen = beta * (policy_chosen_logps - ref_chosen_logps)
    rejected = beta * (policy_rejected_logps - ref_rejected_logps)
    margin = chosen - rejected
    metrics = {
        "dpo_margin": margin.detach().mean(),
        "dpo_pair_acc": (margin.detach() > 0).float().mean(),
        "dpo_chosen_reward": chosen.detach().mean(),
        "dpo_rejected_reward": rejected.detach().mean(),
    }
    return -F.logsigmoid(margin).mean(), metrics


def build_pairs(rewards: Tensor) -> list[tuple[int, int, int]]:
    """One (prompt, chosen, rejected) pair per prompt: its best sample against its worst.

    ``rewards`` is [n_prompts, G]. Ties go to the lowest sample index, on both sides; a prompt
    whose G rewards are all equal has no preference and gives no pair.
    """
    pairs = []
    for prompt, row in enumerate(rewards):
        best, worst = int(torch.argmax(row)), int(torch.argmin(row))
        if row[best] > row[worst]:
            pairs.append((prompt, best, worst))
    return pairs
