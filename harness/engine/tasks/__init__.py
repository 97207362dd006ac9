"""Verifiable tasks, chosen by name: ``build_task(task_config) -> Task``."""

from __future__ import annotations

from dataclasses import replace

from harness.algorithms.registry import Registry
from harness.engine.task_config import REASONING_GYM_TASK
from harness.engine.tasks.base import Item, Task, ToolUse
from harness.engine.tasks.jsonl import gsm8k_jsonl
from harness.engine.tasks.reasoning_gym import reasoning_gym_task
from harness.engine.tasks.rewards import resolve_reward
from harness.engine.tasks.synthetic import addition, sorting
from harness.engine.tasks.tool_tasks import lookup, multiplication
from harness.engine.tools import TOOLS, build_tools, parse_calls
from harness.errors import ConfigError

TASKS = Registry("task")
TASKS.register("addition")(addition)
TASKS.register("sorting")(sorting)
TASKS.register("gsm8k_jsonl")(gsm8k_jsonl)
TASKS.register("multiplication")(multiplication)
TASKS.register("lookup")(lookup)
TASKS.register(REASONING_GYM_TASK)(reasoning_gym_task)


def build_task(config, *, cache_dir: str | None = None) -> Task:
    """The task ``config`` names. A learned reward (``reward: {model: ...}``) sets ``task.scorer``
    (torch-free until it first scores) and keeps the verifier as ``task.reward``; its id is
    looked up under ``cache_dir`` (default: the trials' default cache)."""
    task = TASKS.get(config.name)(config)
    if isinstance(config.reward, str):
        task = replace(task, reward=resolve_reward(config.reward))
    elif config.reward is not None:
        from harness.engine.reward_model.scorer import with_learned_reward

        task = with_learned_reward(task, config.reward, cache_dir)
    if config.tools:
        task = with_tools(task, config)
    return task


def with_tools(task: Task, config) -> Task:
    """``task`` with tool-calling episodes: its tools built (unknown names and bad schemas are a
    ``ConfigError`` here, before any work) and the episode settings."""
    if task.scorer is not None:
        raise ConfigError(
            "task.reward: a learned reward model scores single-turn completions; a tool-calling "
            "episode is scored by its trajectory reward (task.tool_reward): drop one of the two"
        )
    toolset = build_tools(config.tools, task, timeout_s=config.tool_timeout_s)
    demonstrated = {call.name for item in task.train for turn in (item.turns or ())[:-1] for call in parse_calls(turn)}
    missing = sorted(demonstrated - set(toolset.names))
    if missing:
        raise ConfigError(
            f"task {task.name} demonstrates calls of {', '.join(missing)} in its warm start; "
            f"add {', '.join(missing)} to task.tools"
        )
    return replace(task, tool_use=ToolUse(toolset, config.max_turns, config.tool_reward, config.describe_tools))


__all__ = ["Item", "Task", "TASKS", "TOOLS", "build_task", "with_tools"]
