"""A verifiable task: disjoint train and held-out prompts, and a reward that checks an answer."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from typing import Callable

RewardFn = Callable[["Item", str], float]


@dataclass(frozen=True)
class Item:
    """One problem: the prompt shown to the model, the reference answer, and an optional
    worked solution used as the supervised target in the warm start."""

    prompt: str
    answer: str
    solution: str | None = None

    @property
    def target(self) -> str:
        return self.solution if self.solution is not None else self.answer


@dataclass(frozen=True)
class Task:
    name: str
    train: tuple[Item, ...]
    eval: tuple[Item, ...]
    reward: RewardFn
    alphabet: str = ""  # characters the testbed tokenizer must cover ("" for natural-language tasks)

    def __post_init__(self):
        overlap = {i.prompt for i in self.train} & {i.prompt for i in self.eval}
        if overlap:
            raise ValueError(f"task {self.name}: {len(overlap)} prompts are in both train and eval")


def score_groups(items: list[Item], completions: list[str], group_size: int, reward: RewardFn) -> list[float]:
    """The verifier's score of each completion; completion j belongs to ``items[j // group_size]``."""
    return [reward(items[j // group_size], text) for j, text in enumerate(completions)]


def prompt_id(item: Item) -> str:
    """A stable id of a prompt, from its text alone: the same in every arm, seed and process, so
    per-prompt scores of different trials line up."""
    return hashlib.sha256(item.prompt.encode("utf-8")).hexdigest()[:12]


def prompt_ids(items: list[Item]) -> list[str]:
    """The ids of ``items`` in order; a prompt that repeats gets its occurrence appended
    (``<id>#2``), so the ids of one evaluation stay distinct."""
    seen: Counter[str] = Counter()
    out = []
    for item in items:
        pid = prompt_id(item)
        seen[pid] += 1
        out.append(pid if seen[pid] == 1 else f"{pid}#{seen[pid]}")
    return out
