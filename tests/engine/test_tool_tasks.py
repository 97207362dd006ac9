"""The testbed's tool tasks (multiplication with the calculator, code lookup with the lookup
tool) and the checks of a task's tool settings, all before any work."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from harness.engine.task_config import TaskConfig, ToolRewardConfig
from harness.engine.tasks import build_task
from harness.engine.tools import parse_calls
from harness.errors import ConfigError


def multiplication(**config):
    return build_task(
        TaskConfig(
            **{
                "name": "multiplication",
                "min_digits": 2,
                "max_digits": 3,
                "n_train": 400,
                "n_eval": 64,
                "tools": ["calculator"],
                **config,
            }
        )
    )


def test_multiplication_items_and_their_demonstrations_are_right():
    task = multiplication()
    assert task.train == multiplication().train  # seeded: every trial sees the same items
    assert not {i.prompt for i in task.train} & {i.prompt for i in task.eval}
    for item in task.train + task.eval:
        a, b = item.prompt.removesuffix("=").split("*")
        assert 10 <= int(a) <= 999 and 1 <= int(b) <= 99 and item.answer == str(int(a) * int(b))
    called = [i for i in task.train if len(i.turns) == 2]
    for item in called:  # the demonstrated call, run on the real calculator, gives the answer it copies
        (call,) = parse_calls(item.turns[0])
        assert call.valid and task.tool_use.toolset.run(call).text == item.turns[1] == item.answer
    assert all(i.turns == (i.answer,) for i in task.train if len(i.turns) == 1)
    assert 0.4 < len(called) / len(task.train) < 0.6  # demo_share 0.5, seeded


@pytest.mark.parametrize("share", [0.0, 1.0])
def test_the_demo_share_sets_how_many_items_demonstrate_the_call(share):
    task = multiplication(demo_share=share)
    assert sum(len(i.turns) == 2 for i in task.train) == share * len(task.train)


def test_lookup_answers_come_from_the_tasks_own_table():
    task = build_task(TaskConfig(name="lookup", n_train=200, n_eval=50, tools=["lookup"], demo_share=1.0))
    for item in task.train:
        (call,) = parse_calls(item.turns[0])
        assert task.tool_use.toolset.run(call).text == item.answer == task.table[call.arguments["key"]]
    assert not {i.prompt for i in task.train} & {i.prompt for i in task.eval}


def test_without_tools_the_task_is_single_turn():
    task = build_task(TaskConfig(name="multiplication", min_digits=2, max_digits=3, n_train=100, n_eval=20))
    assert task.tool_use is None


def test_a_task_demonstrating_a_tool_it_is_not_given_is_refused():
    with pytest.raises(ConfigError, match="demonstrates calls of lookup.*add lookup to task.tools"):
        build_task(TaskConfig(name="lookup", n_train=100, n_eval=20, tools=["calculator"]))
    with pytest.raises(ConfigError, match="tool lookup needs a task with a table"):
        multiplication(tools=["calculator", "lookup"])


def test_an_unknown_tool_is_refused_with_the_valid_names():
    with pytest.raises(ConfigError, match="unknown tool 'abacus'.*calculator, lookup"):
        multiplication(tools=["calculator", "abacus"])


@pytest.mark.parametrize(
    "key, value",
    [
        ("max_turns", 2),
        ("tool_timeout_s", 5.0),
        ("describe_tools", False),
        ("demo_share", 0.3),
        ("tool_reward", ToolRewardConfig(answer=2.0)),
    ],
)
def test_a_tool_setting_without_tools_is_refused(key, value):
    with pytest.raises(ValidationError, match=f"task.{key} is read only by tool-calling episodes"):
        TaskConfig(name="multiplication", **{key: value})
    assert getattr(TaskConfig(name="multiplication", tools=["calculator"], **{key: value}), key) == value


def test_a_learned_reward_with_tools_is_refused(tmp_path, monkeypatch):
    from harness.engine.reward_model import scorer as reward_scorer

    # a folder that passes as a reward model: what is refused is scoring episodes with it
    monkeypatch.setattr(reward_scorer, "resolve_reward_model", lambda model, cache_dir: (tmp_path, {}))
    with pytest.raises(ConfigError, match="scored by its trajectory reward"):
        multiplication(reward={"model": str(tmp_path)})
