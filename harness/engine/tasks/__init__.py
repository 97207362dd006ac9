"""Verifiable tasks, chosen by name: ``build_task(task_config) -> Task``."""

from __future__ import annotations

from dataclasses import replace

from harness.algorithms.registry import Registry
from harness.engine.tasks.base import Item, Task
from harness.engine.tasks.jsonl import gsm8k_jsonl
from harness.engine.tasks.rewards import resolve_reward
from harness.engine.tasks.synthetic import addition, sorting

TASKS = Registry("task")
TASKS.register("addition")(addition)
TASKS.register("sorting")(sorting)
TASKS.register("gsm8k_jsonl")(gsm8k_jsonl)


def build_task(config) -> Task:
    task = TASKS.get(config.name)(config)
    if config.reward is not None:
        task = replace(task, reward=resolve_reward(config.reward))
    return task


__all__ = ["Item", "Task", "TASKS", "build_task"]
