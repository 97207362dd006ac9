"""PPO's critic: a value head on the policy's last hidden state, or a separate value model.

``values(rollout, policy_hidden)`` gives V(s_t) for each completion position, where s_t is the
state that predicts token t (the same position whose logits give token t's log-prob).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from harness.engine.rollout import Rollout, completion_forward


class Critic(nn.Module):
    def __init__(self, policy: nn.Module, kind: str):
        super().__init__()
        self.kind = kind
        self.trunk = copy.deepcopy(policy) if kind == "value_model" else None
        self.head = nn.Linear(policy.config.hidden_size, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)
        self.head.to(next(policy.parameters()).device)

    @property
    def needs_policy_hidden(self) -> bool:
        return self.trunk is None

    def forward(self, rollout: Rollout, policy_hidden: torch.Tensor | None, temperature: float) -> torch.Tensor:
        if self.trunk is None:
            hidden = policy_hidden
        else:
            hidden = completion_forward(self.trunk, rollout, temperature=temperature, want_hidden=True).hidden
        return self.head(hidden.float()).squeeze(-1) * rollout.completion_mask
