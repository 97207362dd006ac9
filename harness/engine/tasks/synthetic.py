"""Synthetic verifiable tasks for the CPU testbed.

Prompts are drawn without replacement from a seeded generator, so train and held-out sets are
disjoint and the same for every trial of a study (the task seed is fixed, not the trial seed).
"""

from __future__ import annotations

import random

from harness.engine.tasks.base import Item, Task
from harness.engine.tasks.rewards import exact_match

TASK_SEED = 1234


def _split(items: list[Item], n_train: int, n_eval: int, name: str) -> tuple[tuple[Item, ...], tuple[Item, ...]]:
    if n_train + n_eval > len(items):
        raise ValueError(
            f"task {name}: asked for {n_train} train + {n_eval} eval prompts but only {len(items)} "
            "distinct prompts exist; lower task.n_train/n_eval or raise task.max_digits"
        )
    random.Random(TASK_SEED).shuffle(items)
    return tuple(items[n_eval : n_eval + n_train]), tuple(items[:n_eval])


def _numbers(min_digits: int, max_digits: int) -> range:
    low = 0 if min_digits == 1 else 10 ** (min_digits - 1)
    return range(low, 10**max_digits)


def addition(config) -> Task:
    """``07+35=`` -> ``042``: operands of min_digits..max_digits digits, zero-padded to
    ``max_digits`` and the sum to ``max_digits + 1``, so digits of equal place line up (a small
    transformer learns the aligned form far faster)."""
    numbers = _numbers(config.min_digits, config.max_digits)
    width = config.max_digits
    items = [
        Item(f"{a:0{width}d}+{b:0{width}d}=", f"{a + b:0{width + 1}d}") for a in numbers for b in numbers
    ]
    train, held_out = _split(items, config.n_train, config.n_eval, "addition")
    return Task("addition", train, held_out, exact_match, alphabet="0123456789+=")


def sorting(config) -> Task:
    """``sort:3142=`` -> ``1234``: the prompt's digits in ascending order (length min..max_digits+2)."""
    rng = random.Random(TASK_SEED)
    lengths = range(config.min_digits + 2, config.max_digits + 3)
    wanted = config.n_train + config.n_eval
    seen: dict[str, Item] = {}
    for _ in range(wanted * 50):
        if len(seen) == wanted:
            break
        digits = "".join(rng.choice("0123456789") for _ in range(rng.choice(lengths)))
        seen.setdefault(digits, Item(f"sort:{digits}=", "".join(sorted(digits))))
    train, held_out = _split(list(seen.values()), config.n_train, config.n_eval, "sorting")
    return Task("sorting", train, held_out, exact_match, alphabet="0123456789sort:=")
