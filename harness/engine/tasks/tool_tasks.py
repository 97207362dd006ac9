"""Testbed tasks where a tool helps: multiplication (the calculator) and code lookup (a key-value
store the task is built on, read by the ``lookup`` tool).

A tiny model rarely gets a product of a 2-3 digit and a 1-2 digit number right unaided, and cannot
know a key's random code at all; with the tool it only has to write the call and copy the result.
Each train item carries a worked episode (``Item.turns``) for the warm start: on a seeded
``task.demo_share`` of the items the call and then the copied answer, on the rest the answer
alone. The share sets how often the warm-started policy calls the tool, so RL has room to learn
to call it (and the direct answers show what the model gets right unaided).

The prompts are compact (``123*45=``, ``code of k042=``) because the testbed reads characters;
the calls use the same ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` text as a real
chat model. Without ``task.tools`` either task is a plain single-turn task (the unaided baseline).
"""

from __future__ import annotations

import json
import random
import string

from harness.engine.tasks.base import Item, Task
from harness.engine.tasks.rewards import exact_match
from harness.engine.tasks.synthetic import (
    TASK_SEED,
    _check_sizes,
    _distinct_indices,
    _operands,
    multipliers,
)
from harness.engine.tools import CLOSE_TAG, OPEN_TAG

#: every printable character but tabs and newlines: the calls' JSON, the tools' results and errors
TOOL_ALPHABET = string.digits + string.ascii_letters + string.punctuation + " "
LOOKUP_KEYS = 1000  # keys k000..k999


def call_text(tool: str, arguments: dict) -> str:
    """A tool call as the policy writes it."""
    return f"{OPEN_TAG}{json.dumps({'name': tool, 'arguments': arguments})}{CLOSE_TAG}"


def _with_demos(items: list[Item], demo_share: float, tool: str, arguments) -> list[Item]:
    """Each item with its worked episode: the call on a seeded ``demo_share`` of them, else the
    answer alone. The choice is random per item, not a rule the model could see, so the
    warm-started policy calls the tool with about that probability on every prompt: RL sees
    both kinds of episode in most groups and can learn that calling pays. (Its greedy choice
    per prompt is then a near coin flip, so greedy accuracy moves in jumps; the sampled mean
    reward, ``eval/mean_reward``, is the smoother measure.)"""
    rng = random.Random(TASK_SEED + 1)
    return [
        Item(
            i.prompt,
            i.answer,
            turns=(call_text(tool, arguments(i)), i.answer) if rng.random() < demo_share else (i.answer,),
        )
        for i in items
    ]


def multiplication(config) -> Task:
    """``123*45=`` -> ``5535``: a min_digits..max_digits-digit number times 1..10^(max_digits-1)-1."""
    wanted = _check_sizes(config, "multiplication")
    low, count = _operands(config.min_digits, config.max_digits)
    items = []
    for index in _distinct_indices(count * multipliers(config), wanted):
        i, j = divmod(index, multipliers(config))
        a, b = low + i, 1 + j
        items.append(Item(f"{a}*{b}=", str(a * b)))
    items = _with_demos(items, config.demo_share, "calculator", lambda it: {"expression": it.prompt[:-1]})
    return Task(
        "multiplication",
        tuple(items[config.n_eval :]),
        tuple(items[: config.n_eval]),
        exact_match,
        alphabet=TOOL_ALPHABET,
    )


def lookup(config) -> Task:
    """``code of k042=`` -> ``7316``: the key's code in the task's table (random 4-digit codes, seeded)."""
    wanted = config.n_train + config.n_eval
    if wanted > LOOKUP_KEYS:
        raise ValueError(
            f"task lookup: asked for {config.n_train} train + {config.n_eval} eval prompts but the "
            f"table has {LOOKUP_KEYS} keys; lower task.n_train/n_eval"
        )
    rng = random.Random(TASK_SEED)
    table = {f"k{k:03d}": f"{rng.randrange(10_000):04d}" for k in range(LOOKUP_KEYS)}
    keys = list(table)
    rng.shuffle(keys)
    items = [Item(f"code of {key}=", table[key]) for key in keys[:wanted]]
    items = _with_demos(items, config.demo_share, "lookup", lambda it: {"key": it.prompt[len("code of ") : -1]})
    return Task(
        "lookup",
        tuple(items[config.n_eval :]),
        tuple(items[: config.n_eval]),
        exact_match,
        alphabet=TOOL_ALPHABET,
        table=table,
    )
