"""Loss aggregation: how per-token terms [B, T] become one scalar.

Every registered function is ``fn(per_token, mask, norm_constant) -> scalar``. Padding never
contributes, not even a NaN, and rows with no masked token are left out of sequence means (so
dropping a row by zeroing its mask works). The choice matters: Liu et al. (2025, Dr. GRPO)
and Yu et al. (2025, DAPO) show that per-sequence length normalisation biases response length.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import Tensor

from harness.algorithms.config import RLConfig
from harness.algorithms.parts import AGGREGATIONS

Aggregator = Callable[[Tensor, Tensor], Tensor]


def _row_sums(per_token: Tensor, mask: Tensor) -> Tensor:
    return torch.where(mask.bool(), per_token, 0.0).sum(dim=1)


def _n_rows(mask: Tensor) -> Tensor:
    return (mask.sum(dim=1) > 0).sum().clamp(min=1)


@AGGREGATIONS.implements(
    "token_mean", cites="DAPO: Yu et al. 2025 (arXiv:2503.14476); verl token-mean, TRL loss_type='dapo'"
)
def token_mean(per_token: Tensor, mask: Tensor, norm_constant: int) -> Tensor:
    """Mean over every token of the batch (DAPO's token-level loss); ignores the constant."""
    return _row_sums(per_token, mask).sum() / mask.sum().clamp(min=1)


@AGGREGATIONS.implements(
    "seq_mean_token_mean", cites="GRPO: Shao et al. 2024 (arXiv:2402.03300); verl seq-mean-token-mean"
)
def seq_mean_token_mean(per_token: Tensor, mask: Tensor, norm_constant: int) -> Tensor:
    """Mean over a sequence's tokens, then over sequences (GRPO's ``1/G sum_i 1/|o_i| sum_t``)."""
    per_row = _row_sums(per_token, mask) / mask.sum(dim=1).clamp(min=1)
    return per_row.sum() / _n_rows(mask)


@AGGREGATIONS.implements(
    "seq_mean_token_sum_norm", cites="Dr. GRPO: Liu et al. 2025 (arXiv:2503.20783); verl seq-mean-token-sum-norm"
)
def seq_mean_token_sum_norm(per_token: Tensor, mask: Tensor, norm_constant: int) -> Tensor:
    """Sum over a sequence's tokens divided by a constant, then mean over sequences (Dr. GRPO)."""
    return (_row_sums(per_token, mask) / norm_constant).sum() / _n_rows(mask)


@AGGREGATIONS.implements(
    "seq_mean_token_sum", cites="verl seq-mean-token-sum: each sequence's log-likelihood term, as REINFORCE"
)
def seq_mean_token_sum(per_token: Tensor, mask: Tensor, norm_constant: int) -> Tensor:
    """Sum over a sequence's tokens, then mean over sequences (verl's ``seq-mean-token-sum``): each
    sequence's whole log-likelihood term, as REINFORCE writes it; a long sequence weighs more."""
    return _row_sums(per_token, mask).sum() / _n_rows(mask)


@AGGREGATIONS.implements("token_sum", cites="verl token-sum: no normaliser")
def token_sum(per_token: Tensor, mask: Tensor, norm_constant: int) -> Tensor:
    """Sum over every token of the batch, no normaliser (verl's ``token-sum``): the loss, and
    the gradient, grow with the batch's tokens."""
    return _row_sums(per_token, mask).sum()


def make_aggregator(cfg: RLConfig, max_new_tokens: int) -> Aggregator:
    """``cfg.aggregation`` with its constant bound: ``cfg.loss_norm_constant`` or the budget."""
    fn = AGGREGATIONS.get(cfg.aggregation)
    return functools.partial(fn, norm_constant=cfg.loss_norm_constant or max_new_tokens)
