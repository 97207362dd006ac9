"""Reward functions, chosen by registered name or by an explicit ``module:function`` path.

Strings from a config are never evaluated: a path is imported (``harness.ground.dotted``) and
must name a callable ``(item, completion) -> float``.
"""

from __future__ import annotations

import re

from harness.algorithms.registry import Registry
from harness.engine.tasks.base import Item, RewardFn
from harness.ground.dotted import resolve

REWARDS = Registry("reward")


@REWARDS.register("exact_match")
def exact_match(item: Item, completion: str) -> float:
    """1 when the completion (whitespace-trimmed) is exactly the answer, else 0; nothing for an
    empty answer (a reference of only whitespace pays nothing, whatever the completion)."""
    return float(bool(item.answer.strip()) and completion.strip() == item.answer)


@REWARDS.register("partial_match")
def partial_match(item: Item, completion: str) -> float:
    """Dense credit: characters in the right place, over the longer of answer and completion
    (an empty completion has no character in place; an answer of only whitespace pays nothing)."""
    if not item.answer.strip():
        return 0.0
    text = completion.strip()
    hits = sum(a == b for a, b in zip(text, item.answer))
    return hits / max(len(text), len(item.answer), 1)


_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_NUMBER = re.compile(r"^[-+]?[\d,]*\.?\d+$")


def extract_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` in ``text``, or None."""
    matches = _BOXED.findall(text)
    return matches[-1].strip() if matches else None


def _normalise_number(text: str) -> str:
    text = text.replace(",", "").replace("$", "").strip()
    if _NUMBER.match(text):
        value = float(text)
        return str(int(value)) if value == int(value) else repr(value)
    return text


@REWARDS.register("boxed_answer")
def boxed_answer(item: Item, completion: str) -> float:
    """1 when the last ``\\boxed{}`` answer equals the reference (numbers compared as numbers);
    0 when either is empty once normalised (``\\boxed{}`` never matches a missing reference)."""
    found = extract_boxed(completion)
    if found is None:
        return 0.0
    answer, reference = _normalise_number(found), _normalise_number(item.answer)
    return float(bool(reference) and answer == reference)


def resolve_reward(name: str) -> RewardFn:
    """A registered reward, or a ``module:function`` import path."""
    if ":" not in name:
        return REWARDS.get(name)
    return resolve(name, what=f"task.reward {name!r}")
