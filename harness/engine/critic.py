"""The critic's values for a rollout: V(s_t) for each completion position, where s_t is the state
that predicts token t (the same position whose logits give token t's log-prob).
"""

from __future__ import annotations

from torch import Tensor

from harness.algorithms.critic import ValueCritic
from harness.engine.rollout import Rollout, completion_forward


def critic_values(critic: ValueCritic, rollout: Rollout, policy_hidden: Tensor | None, temperature: float) -> Tensor:
    """Values on the critic's trunk: the policy's hidden states when it has none of its own."""
    if critic.trunk is None:
        hidden = policy_hidden
    else:
        hidden = completion_forward(critic.trunk, rollout, temperature=temperature, want_hidden=True).hidden
    return critic.values(hidden, rollout.completion_mask)
