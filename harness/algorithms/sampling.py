"""What a step samples and which of its rows the loss reads: two slots of the sampling side.

``sampling``: how a step draws its groups. ``once``: ``group_size`` samples of each of the step's
prompts. ``dynamic``: DAPO's dynamic sampling (Yu et al. 2025, arXiv:2503.14476, sec. 3.2): a group
whose samples all score alike (degenerate: zero advantage under every group baseline) does not
count; the step draws the samples of further prompts, ``prompts_per_step`` at a time, until its
batch holds ``prompts_per_step`` groups with a spread of scores or it has drawn ``max_draws``
times (DAPO draws until full, with a cap of its own). Each part is
``fn(scores, group_size, cfg) -> GroupChoice``; the engine's loop (``harness.engine.group_sampling``)
is the same for every part.

``truncated``: what the loss does with completions the token budget cut off (their last sampled
token is not EOS; for an episode, its last turn's). ``keep`` trains on them; ``mask`` leaves them
out of the loss, their scores still in their group's statistics (DAPO's overlong filtering, TRL's
``mask_truncated_completions``). Each part is ``fn(cut_off, cfg) -> (rows the loss reads, metrics)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from harness.algorithms.advantages import degenerate_groups
from harness.algorithms.config import RLConfig
from harness.algorithms.parts import SAMPLING, TRUNCATED


@dataclass(frozen=True)
class GroupChoice:
    counted: Tensor  # [n_groups] bool: the groups of this draw that count toward the step's batch
    max_draws: int  # draws the step may make in all


def choose_groups(scores: Tensor, group_size: int, cfg: RLConfig) -> GroupChoice:
    """Which groups of one draw count, and how many draws a step may make, under ``cfg.sampling``."""
    return SAMPLING.get(cfg.sampling)(scores, group_size, cfg)


@SAMPLING.implements("once", cites="one draw of G samples per prompt")
def once(scores: Tensor, group_size: int, cfg: RLConfig) -> GroupChoice:
    return GroupChoice(
        counted=torch.ones(scores.numel() // group_size, dtype=torch.bool, device=scores.device), max_draws=1
    )


@SAMPLING.implements("dynamic", cites="DAPO dynamic sampling: Yu et al. 2025 (arXiv:2503.14476)")
def dynamic(scores: Tensor, group_size: int, cfg: RLConfig) -> GroupChoice:
    return GroupChoice(counted=~degenerate_groups(scores, group_size), max_draws=cfg.max_draws)


def trained_rows(cut_off: Tensor, cfg: RLConfig) -> tuple[Tensor, dict[str, Tensor]]:
    """[B] bool: the rows the loss reads under ``cfg.truncated``, given which were cut off."""
    return TRUNCATED.get(cfg.truncated)(cut_off, cfg)


@TRUNCATED.implements("keep", cites="train on every completion")
def keep_truncated(cut_off: Tensor, cfg: RLConfig) -> tuple[Tensor, dict[str, Tensor]]:
    return torch.ones_like(cut_off), {}


@TRUNCATED.implements(
    "mask", cites="DAPO overlong filtering: Yu et al. 2025 (arXiv:2503.14476); TRL mask_truncated_completions"
)
def mask_truncated(cut_off: Tensor, cfg: RLConfig) -> tuple[Tensor, dict[str, Tensor]]:
    return ~cut_off, {"train/frac_truncated": cut_off.float().mean()}
