"""What the no-op probe (``probe.py``) gives, and when two of its results are the same computation.

Torch-free, so a result kept from an earlier probe (``harness.study.noop`` keeps them in the
cache) is compared, and the fields a probe cannot see are known, without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.algorithms.config import RLConfig

#: fields the probe cannot see: two configs that differ in one of these are different arms
UNPROBED = frozenset(
    {
        "name",
        "lr",
        "epochs",
        "minibatches",
        "max_grad_norm",
        "critic_lr",
        "group_size",
        "old_logprobs",
        "sampling",
        "max_draws",
        "truncated",
        "teacher_model",  # issue 35: which teacher gives the log-probs is data, not formula
    }
)
#: loss and gradient closer than this (absolute, float64) count as the same computation
TOLERANCE = 1e-7


@dataclass(frozen=True)
class ProbeResult:
    loss: float
    gradient: tuple[float, ...]  # flattened gradients w.r.t. log-probs, entropies and values

    def same_as(self, other: ProbeResult) -> bool:
        return (
            abs(self.loss - other.loss) <= TOLERANCE
            and len(self.gradient) == len(other.gradient)
            and all(abs(a - b) <= TOLERANCE for a, b in zip(self.gradient, other.gradient))
        )


def differing_fields(a: RLConfig, b: RLConfig) -> list[str]:
    """Fields where two RL configs differ, in declaration order."""
    return [k for k in RLConfig.model_fields if getattr(a, k) != getattr(b, k)]
