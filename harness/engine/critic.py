"""The critic's values for a rollout: V(s_t) for each completion position, where s_t is the state
that predicts token t (the same position whose logits give token t's log-prob).
"""

from __future__ import annotations

from functools import partial

from torch import Tensor, nn

from harness.algorithms.critic import ValueCritic
from harness.engine.logprobs import completion_hidden
from harness.engine.micro_batches import in_micro_batches
from harness.engine.rollout import Rollout


def critic_values(
    critic: ValueCritic,
    policy: nn.Module,
    rollout: Rollout,
    policy_hidden: Tensor | None = None,
    micro_batch_size: int | None = None,
) -> Tensor:
    """Values on the critic's trunk, the policy's when it has none of its own: the hidden states
    ``policy_hidden`` when a pass of the policy already has them, else a pass of the trunk (over
    micro-batches of ``micro_batch_size`` rows when it runs without gradient)."""
    if critic.trunk is None and policy_hidden is not None:
        hidden = policy_hidden
    else:
        trunk = policy if critic.trunk is None else critic.trunk
        hidden = in_micro_batches(partial(completion_hidden, trunk), rollout, micro_batch_size)
    return critic.values(hidden, rollout.completion_mask)
