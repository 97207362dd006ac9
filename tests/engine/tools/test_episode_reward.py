"""The episode reward: the tutorial's hand-worked numbers, the capped call bonus that removes its
hole, and each penalty and switch."""

from __future__ import annotations

import pytest

from harness.engine.task_config import ToolRewardConfig
from harness.engine.tools import episode_reward

CALC = '<tool_call>{"name": "calc", "arguments": {"expr": "256*37"}}</tool_call>'
TOOLS = {"calc"}

# the tutorial's weights, its per-call bonus uncapped
TUTORIAL = ToolRewardConfig(
    answer=2.0, valid_call=0.25, max_call_bonus=100, invalid_call=-0.5, unclosed_tag=-0.5, turn_limit=-0.5, clip=3
)


def _score(turns, answer_score, config=ToolRewardConfig(), hit_turn_limit=False, tool_names=TOOLS):
    return episode_reward(
        turns, answer_score=answer_score, hit_turn_limit=hit_turn_limit, tool_names=tool_names, config=config
    )


@pytest.mark.parametrize(
    "turns, answer_score, total",
    [
        ([CALC, "256 x 37 = 9472."], 1.0, 2.25),
        (['<tool_call>{"name": "calc", arguments: 256*37}</tool_call>', "It is 9000."], 0.0, -0.5),
        (["256 x 37 is about 9500."], 0.0, 0.0),
    ],
    ids=["good", "bad_json", "no_tool"],
)
def test_the_tutorials_numbers(turns, answer_score, total):
    assert _score(turns, answer_score, TUTORIAL).total == pytest.approx(total)


def test_the_parts():
    parts = _score([CALC + CALC.replace("calc", "search", 1), "9472"], 1.0, TUTORIAL)
    assert (parts.calls, parts.valid_calls, parts.invalid_calls) == (2, 1, 1)  # an unknown tool is invalid
    assert parts.answer == pytest.approx(2.0)
    assert parts.format == pytest.approx(0.25 - 0.5)
    assert parts.total == pytest.approx(1.75)


def test_needless_calls_do_not_pay():
    one = _score([CALC, "9472"], 1.0)
    ten = _score([CALC * 10, "9472"], 1.0)
    assert ten.valid_calls == 10
    assert ten.total <= one.total
    # ... while under the tutorial's uncapped bonus they did
    assert _score([CALC * 10, "9472"], 1.0, TUTORIAL).total > _score([CALC, "9472"], 1.0, TUTORIAL).total


def test_the_turn_limit_penalty():
    config = ToolRewardConfig(turn_limit=-0.5)
    assert _score([CALC, CALC, CALC], 0.0, config, hit_turn_limit=True).total == pytest.approx(0.1 - 0.5)
    assert _score([CALC, CALC, CALC], 0.0, config).total == pytest.approx(0.1)


def test_unclosed_tags_cost_per_turn():
    config = ToolRewardConfig(unclosed_tag=-0.2)
    turns = ['<tool_call>{"name": "calc", "arguments": {}}', "</tool_call> 9472", "9472"]
    parts = _score(turns, 1.0, config)
    assert parts.calls == 0
    assert parts.format == pytest.approx(-0.4)


def test_the_call_bonus_can_wait_for_the_answer():
    config = ToolRewardConfig(valid_call=0.3, max_call_bonus=0.3, call_bonus_needs_answer=True)
    assert _score([CALC, "9000"], 0.0, config).total == pytest.approx(0.0)
    assert _score([CALC, "9472"], 1.0, config).total == pytest.approx(1.3)
    assert _score([CALC, "9000"], 0.0, config.model_copy(update={"call_bonus_needs_answer": False})).total == (
        pytest.approx(0.3)
    )


def test_a_partial_answer_score_scales_the_answer():
    assert _score(["9400"], 0.5, ToolRewardConfig(answer=2.0)).answer == pytest.approx(1.0)


def test_clipping():
    config = ToolRewardConfig(answer=5.0, invalid_call=-2.0, clip=3.0)
    assert _score(["9472"], 1.0, config).total == pytest.approx(3.0)
    broken = '<tool_call>{"nope"}</tool_call>'
    low = _score([broken * 3, "9000"], 0.0, config)
    assert low.format == pytest.approx(-6.0) and low.total == pytest.approx(-3.0)
