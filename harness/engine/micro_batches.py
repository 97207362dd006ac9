"""Row micro-batches (``TrainConfig.micro_batch_size``): a pass over a rollout in slices of rows,
and the slices' results joined back in row order.

A pass without gradient (the reference's, the old log-probs', the critic's old values) keeps
nothing of one micro-batch when it runs the next, so its memory is one micro-batch's. An update
accumulates the gradients of its minibatch's micro-batches (``learner.apply_gradients``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import TypeVar

import torch
from torch import Tensor

from harness.engine.rollout import Rollout

Result = TypeVar("Result")


def micro_batches(rows: Tensor, size: int | None) -> tuple[Tensor, ...]:
    """The row indices ``rows`` in slices of ``size``; one slice of all of them when None."""
    return rows.split(size or max(len(rows), 1))


def join_rows(parts: list):
    """Per-micro-batch results concatenated along rows, detached: tensors, None, or tuples or
    dataclasses of them (a ``Forward``, an ``UpdateBatch``)."""
    first = parts[0]
    if first is None:
        return None
    if isinstance(first, Tensor):
        return torch.cat([part.detach() for part in parts])
    if isinstance(first, tuple):
        return tuple(join_rows(list(column)) for column in zip(*parts))
    return type(first)(**{f.name: join_rows([getattr(part, f.name) for part in parts]) for f in fields(first)})


def in_micro_batches(fn: Callable[[Rollout], Result], rollout: Rollout, size: int | None) -> Result:
    """``fn(rollout)`` for a pass without gradient, run over micro-batches of ``size`` rows and
    joined (in one pass when None)."""
    n_rows = rollout.completion_mask.shape[0]
    if size is None or size >= n_rows:
        return fn(rollout)
    rows = torch.arange(n_rows, device=rollout.completion_mask.device)
    return join_rows([fn(rollout.rows(part)) for part in micro_batches(rows, size)])
