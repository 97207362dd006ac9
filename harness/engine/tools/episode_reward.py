"""The trajectory reward of a tool-calling episode, scored once after its last turn.

The tutorial's ``trajectory_reward`` paid every valid call, so a policy learned to call tools
it did not need; here the call bonus is capped per episode (and may wait for a right answer).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.engine.tools.calls import parse_calls, unclosed

if TYPE_CHECKING:
    from harness.engine.task_config import ToolRewardConfig


@dataclass(frozen=True)
class RewardParts:
    """The reward's parts: ``total`` is ``answer + format`` clipped; the counts are for logging."""

    answer: float
    format: float
    total: float
    calls: int
    valid_calls: int
    invalid_calls: int


def episode_reward(
    turns: list[str],
    *,
    answer_score: float,
    hit_turn_limit: bool,
    tool_names: Collection[str],
    config: ToolRewardConfig,
) -> RewardParts:
    """Score the policy's ``turns``: ``answer_score`` is the verifier's score (0..1) of the last
    turn; a valid call parses and names one of ``tool_names``; ``hit_turn_limit`` is the episode
    ending at the turn limit on a call."""
    calls = [call for turn in turns for call in parse_calls(turn)]
    valid = sum(call.valid and call.name in tool_names for call in calls)
    invalid = len(calls) - valid
    bonus = min(config.valid_call * valid, config.max_call_bonus)
    if config.call_bonus_needs_answer and answer_score <= 0:
        bonus = 0.0
    fmt = (
        bonus
        + config.invalid_call * invalid
        + config.unclosed_tag * sum(unclosed(turn) for turn in turns)
        + (config.turn_limit if hit_turn_limit else 0.0)
    )
    answer = config.answer * answer_score
    total = max(-config.clip, min(config.clip, answer + fmt))
    return RewardParts(
        answer=answer, format=fmt, total=total, calls=len(calls), valid_calls=valid, invalid_calls=invalid
    )
