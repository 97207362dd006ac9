"""What a training step reads and updates (``Learner``), and the pieces every step shares: the
optimiser, one optimiser step with gradient clipping over a minibatch's micro-batches, running
metric means kept on the device, and the step's metrics moved to the host in one transfer,
where a non-finite loss or gradient norm stops the trial.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from harness.algorithms.config import DPOConfig, RLConfig
from harness.algorithms.critic import ValueCritic
from harness.engine.generation import Generation, generate, training_rewards
from harness.engine.micro_batches import join_rows, micro_batches
from harness.engine.models import LoadedModel
from harness.engine.reference import Reference
from harness.engine.samplers import HfSampler, Sampler
from harness.engine.spec import TrainConfig
from harness.engine.tasks.base import Item, Task
from harness.engine.teacher import Teacher
from harness.errors import NonFiniteError

#: device types with a fused AdamW kernel for floating-point parameters (CPU since torch 2.4)
FUSED_ADAMW_DEVICES = frozenset({"cpu", "cuda", "mps", "xpu"})
#: metrics that stop the trial when they are not finite
MUST_BE_FINITE = ("train/loss", "train/grad_norm")


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
    turns: int = 1  # policy turns per row at most (a tool-calling episode's task.max_turns)
    #: what samples the rollouts: the policy itself (hf), or a vLLM server the trial keeps in sync
    sampler: Sampler = field(default_factory=HfSampler)
    policy_version: int = 0  # optimiser steps (RL steps) the policy has taken: what a sample's staleness counts
    teacher: Teacher | None = None  # issue 35: the distillation teacher, where the algorithm names one

    @property
    def token_budget(self) -> int:
        """The most policy tokens a row can hold: the normaliser of a constant-length aggregation."""
        return self.train.max_new_tokens * self.turns

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


def make_optimizer(groups: Iterable, device: torch.device) -> torch.optim.Optimizer:
    """AdamW without weight decay over ``groups`` (parameters or parameter groups): the fused
    kernel where the device has one and every parameter is floating-point, else the
    multi-tensor (``foreach``) one. Either is deterministic: a seed gives bitwise-equal runs."""
    groups = list(groups)
    params = [p for g in groups for p in (g["params"] if isinstance(g, dict) else [g])]
    fused = device.type in FUSED_ADAMW_DEVICES and all(torch.is_floating_point(p) for p in params)
    return torch.optim.AdamW(groups, weight_decay=0.0, **({"fused": True} if fused else {"foreach": True}))


def apply_gradients(
    learner: Learner, rows: Tensor, micro_loss: Callable[[Tensor], tuple[Tensor, Any]]
) -> tuple[Tensor, Any]:
    """One optimiser step with gradient clipping on the minibatch ``rows``, its gradient
    accumulated over micro-batches of ``train.micro_batch_size`` rows (one of all when None).

    ``micro_loss(part)`` gives the loss of micro-batch ``rows[part]``, weighted so that the
    micro-batches' losses sum to the minibatch's (then so do their gradients), and tensors to
    keep. Returns the gradient norm, on the device, and the kept tensors joined over the
    micro-batches, detached.
    """
    learner.optimizer.zero_grad(set_to_none=True)
    kept = []
    for part in micro_batches(torch.arange(len(rows), device=rows.device), learner.train.micro_batch_size):
        loss, keep = micro_loss(part)
        loss.backward()
        kept.append(keep)
    grad_norm = torch.nn.utils.clip_grad_norm_(learner.parameters, learner.algorithm.max_grad_norm)
    learner.optimizer.step()
    return grad_norm, join_rows(kept)


class MetricMean:
    """Running means of per-update metrics (0-d tensors), summed on the device in float64."""

    def __init__(self):
        self.sums: dict[str, Tensor] = {}
        self.counts: dict[str, int] = {}

    def add(self, metrics: dict[str, Tensor]) -> None:
        for key, value in metrics.items():
            self.sums[key] = self.sums.get(key, 0.0) + value.detach().double()
            self.counts[key] = self.counts.get(key, 0) + 1

    def means(self) -> dict[str, Tensor]:
        return {key: total / self.counts[key] for key, total in self.sums.items()}


def to_host(metrics: dict[str, Tensor | float]) -> dict[str, float]:
    """A step's metrics as floats, the tensors among them moved off the device in one transfer;
    a non-finite ``MUST_BE_FINITE`` metric (the mean over the step's updates: non-finite when
    any update's is) stops the trial. Checked here, once a step, rather than at each update,
    so that no update waits on the device; the updates after a non-finite one run on weights
    the trial then throws away."""
    on_device = [key for key, value in metrics.items() if isinstance(value, Tensor)]
    if on_device:
        device = metrics[on_device[0]].device
        values = torch.stack([metrics[k].detach().reshape(()).to(device, torch.float64) for k in on_device])
        metrics = {**metrics, **dict(zip(on_device, values.tolist()))}
    host = {key: float(value) for key, value in metrics.items()}
    for name in MUST_BE_FINITE:
        if name in host and not math.isfinite(host[name]):
            raise NonFiniteError(
                f"{name} became {host[name]}; lower the learning rate or max_grad_norm, or check the reward function"
            )
    return host


def training_scores(
    learner: Learner, task: Task, items: list[Item], generation: Generation
) -> tuple[Tensor, dict[str, float]]:
    """What each row of ``generation`` is trained on (rows grouped by prompt, ``group_size``
    each: ``harness.engine.generation.training_rewards``) and the step's reward metrics; for a
    placebo arm (``train.placebo_reward``) the same scores shuffled across the batch with the
    trial's generator: the reward keeps its mean and spread and loses its link to the text."""
    values, metrics = training_rewards(task, items, generation, learner.algorithm.group_size)
    scores = torch.tensor(values, dtype=torch.float32, device=learner.lm.device)
    if learner.train.placebo_reward:
        scores = scores[torch.randperm(scores.numel(), generator=learner.generator, device=scores.device)]
    return scores, metrics


def draw_samples(learner: Learner, task: Task, items: list[Item]) -> Generation:
    """A training step's samples: ``group_size`` per prompt, drawn by the learner's sampler (the
    policy itself with the trial's generator, or a vLLM server)."""
    return generate(
        learner.lm,
        task,
        [i.prompt for i in items],
        learner.algorithm.group_size,
        mask_tool_tokens=learner.train.mask_tool_tokens,
        sampler=learner.sampler,
        **learner.sampling,
    )
