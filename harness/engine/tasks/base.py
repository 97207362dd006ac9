"""A verifiable task: disjoint train and held-out prompts, and a reward that checks an answer."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.engine.task_config import ToolRewardConfig
    from harness.engine.tools.toolset import ToolSet

RewardFn = Callable[["Item", str], float]
BatchScorer = Callable[[list["Item"], list[str]], list[float]]


@dataclass(frozen=True)
class Item:
    """One problem: the prompt shown to the model, the reference answer, and an optional
    worked solution used as the supervised target in the warm start."""

    prompt: str
    answer: str
    solution: str | None = None
    turns: tuple[str, ...] | None = None  # tool tasks: the demonstrated policy turns (calls, then the answer)

    @property
    def target(self) -> str:
        return self.solution if self.solution is not None else self.answer


@dataclass(frozen=True)
class ToolUse:
    """How a task's rollouts are tool-calling episodes (``task.tools``): the tools, the turn limit,
    the trajectory reward's weights and whether plain-text prompts describe the tools."""

    toolset: ToolSet
    max_turns: int
    reward: ToolRewardConfig
    describe: bool = True


@dataclass(frozen=True)
class Task:
    name: str
    train: tuple[Item, ...]
    eval: tuple[Item, ...]
    reward: RewardFn
    alphabet: str = ""  # characters the testbed tokenizer must cover ("" for natural-language tasks)
    table: dict[str, str] | None = None  # the key-value store a lookup tool of this task reads
    tool_use: ToolUse | None = None  # rollouts are multi-turn episodes with these tools
    #: a training reward in place of the verifier (a learned reward model, maybe weighted with the
    #: verifier): ``scorer(items, completions) -> scores``, one item per completion (a prompt's item
    #: repeated for each of its samples), one score each; the verifier stays the gold score
    scorer: BatchScorer | None = None

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
