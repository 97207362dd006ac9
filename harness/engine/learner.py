"""What a training step reads and updates (``Learner``), and the pieces every step shares: one
optimiser step with gradient clipping that stops the trial on a NaN, and running metric means.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.algorithms.config import DPOConfig, RLConfig
from harness.algorithms.critic import ValueCritic
from harness.engine.models import LoadedModel
from harness.engine.reference import Reference
from harness.engine.spec import TrainConfig
from harness.errors import NonFiniteError


@dataclass
class Learner:
    """What an RL step reads and updates."""

    lm: LoadedModel
    reference: Reference
    critic: ValueCritic | None
    optimizer: torch.optim.Optimizer
    algorithm: RLConfig | DPOConfig
    train: TrainConfig
    generator: torch.Generator  # sampling and minibatch order, seeded from the trial seed

    @property
    def sampling(self) -> dict:
        """How training rollouts are drawn: the budget, the temperature, the trial's generator."""
        return {
            "max_new_tokens": self.train.max_new_tokens,
            "temperature": self.train.temperature,
            "generator": self.generator,
        }

    @property
    def parameters(self) -> list[torch.nn.Parameter]:
        return [p for group in self.optimizer.param_groups for p in group["params"]]


def _check_finite(name: str, value: torch.Tensor) -> None:
    if not torch.isfinite(value).all():
        raise NonFiniteError(
            f"{name} became {value.item() if value.numel() == 1 else 'non-finite'}; lower the "
            "learning rate or max_grad_norm, or check the reward function"
        )


def apply_gradients(learner: Learner, loss: torch.Tensor) -> float:
    """One optimiser step on ``loss`` with gradient clipping; a NaN stops the trial."""
    _check_finite("train/loss", loss.detach())
    learner.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(learner.parameters, learner.algorithm.max_grad_norm)
    _check_finite("train/grad_norm", grad_norm)
    learner.optimizer.step()
    return float(grad_norm)


class MetricMean:
    """Running means of per-minibatch metrics."""

    def __init__(self):
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def add(self, metrics: dict[str, float]) -> None:
        for key, value in metrics.items():
            self.sums[key] = self.sums.get(key, 0.0) + value
            self.counts[key] = self.counts.get(key, 0) + 1

    def means(self) -> dict[str, float]:
        return {key: total / self.counts[key] for key, total in self.sums.items()}
