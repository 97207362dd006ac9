"""Synthetic verifiable tasks for the CPU testbed.

Prompts are drawn without replacement from a seeded generator, so train and held-out sets are
disjoint and the same for every trial of a study (the task seed is fixed, not the trial seed).

Sizes are checked by arithmetic before anything is generated: how many distinct prompts the
settings allow (``prompt_space``) against ``n_train + n_eval``, which may be at most
``MAX_PROMPTS``, with operands of at most ``MAX_DIGITS`` digits. A space of at most
``MAX_ENUMERATED`` prompts is shuffled whole (by index, so only the prompts kept are built); a
larger one is sampled, by index, without being materialised.
"""

from __future__ import annotations

import random

from harness.engine.tasks.base import Item, Task
from harness.engine.tasks.rewards import exact_match

TASK_SEED = 1234

#: A synthetic task gives at most this many prompts (``task.n_train + task.n_eval``).
MAX_PROMPTS = 100_000
#: Prompt spaces up to this size are enumerated (by index) and shuffled; larger ones are sampled.
MAX_ENUMERATED = 1_000_000
#: ``task.max_digits`` may be at most this.
MAX_DIGITS = 32


def _operands(min_digits: int, max_digits: int) -> tuple[int, int]:
    """The smallest operand and how many there are (``len()`` of a range overflows past 2**63)."""
    low = 0 if min_digits == 1 else 10 ** (min_digits - 1)
    return low, max(10**max_digits - low, 0)


def _sorting_lengths(config) -> range:
    return range(config.min_digits + 2, config.max_digits + 3)


def multipliers(config) -> int:
    """Multiplication's second operands: 1 up to one digit fewer than the first's largest
    (a 2-3 digit number times a 1-2 digit one)."""
    return 10 ** max(1, config.max_digits - 1) - 1


def prompt_space(config) -> int:
    """How many distinct prompts the synthetic task ``config.name`` can produce (arithmetic only)."""
    if config.name == "addition":
        return _operands(config.min_digits, config.max_digits)[1] ** 2
    if config.name == "multiplication":
        return _operands(config.min_digits, config.max_digits)[1] * multipliers(config)
    if config.name == "sorting":
        return sum(10**length for length in _sorting_lengths(config))
    raise ValueError(f"task {config.name}: not a synthetic task")


def _check_sizes(config, name: str) -> int:
    """Refuse impossible or unreasonable sizes before generating anything; the wanted count."""
    if config.min_digits > config.max_digits:
        raise ValueError(
            f"task {name}: task.min_digits ({config.min_digits}) is above task.max_digits "
            f"({config.max_digits}); lower min_digits or raise max_digits"
        )
    if config.max_digits > MAX_DIGITS:
        raise ValueError(
            f"task {name}: task.max_digits is {config.max_digits}; synthetic tasks take at most {MAX_DIGITS} digits"
        )
    wanted = config.n_train + config.n_eval
    if wanted > MAX_PROMPTS:
        raise ValueError(
            f"task {name}: asked for {config.n_train} train + {config.n_eval} eval prompts; a "
            f"synthetic task gives at most {MAX_PROMPTS:,} in all: lower task.n_train/n_eval"
        )
    space = prompt_space(config)
    if wanted > space:
        raise ValueError(
            f"task {name}: asked for {config.n_train} train + {config.n_eval} eval prompts but only {space} "
            "distinct prompts exist; lower task.n_train/n_eval or raise task.max_digits"
        )
    return wanted


def _split(items: list[Item], n_train: int, n_eval: int, name: str) -> tuple[tuple[Item, ...], tuple[Item, ...]]:
    if n_train + n_eval > len(items):
        raise ValueError(
            f"task {name}: asked for {n_train} train + {n_eval} eval prompts but only {len(items)} "
            "distinct prompts were drawn; lower task.n_train/n_eval or raise task.max_digits"
        )
    random.Random(TASK_SEED).shuffle(items)
    return tuple(items[n_eval : n_eval + n_train]), tuple(items[:n_eval])


def _distinct_indices(space: int, wanted: int) -> list[int]:
    """``wanted`` distinct indices into ``range(space)`` in their seeded order.

    Up to ``MAX_ENUMERATED`` the whole range is shuffled, which is exactly the order the task
    always had (a shuffle depends only on the length of what it shuffles); above it, indices
    are drawn and repeats skipped (``wanted <= MAX_PROMPTS`` is a small part of the space, so
    that ends quickly) and nothing the size of the space is built.
    """
    rng = random.Random(TASK_SEED)
    if space <= MAX_ENUMERATED:
        order = list(range(space))
        rng.shuffle(order)
        return order[:wanted]
    seen: dict[int, None] = {}
    while len(seen) < wanted:
        seen.setdefault(rng.randrange(space), None)
    return list(seen)


def addition(config) -> Task:
    """``07+35=`` -> ``042``: operands of min_digits..max_digits digits, zero-padded to
    ``max_digits`` and the sum to ``max_digits + 1``, so digits of equal place line up (a small
    transformer learns the aligned form far faster)."""
    wanted = _check_sizes(config, "addition")
    low, count = _operands(config.min_digits, config.max_digits)
    width = config.max_digits
    items = []
    for index in _distinct_indices(count**2, wanted):  # index i * count + j: operands low + i, low + j
        i, j = divmod(index, count)
        a, b = low + i, low + j
        items.append(Item(f"{a:0{width}d}+{b:0{width}d}=", f"{a + b:0{width + 1}d}"))
    held_out, train = tuple(items[: config.n_eval]), tuple(items[config.n_eval :])
    return Task("addition", train, held_out, exact_match, alphabet="0123456789+=")


def sorting(config) -> Task:
    """``sort:3142=`` -> ``1234``: the prompt's digits in ascending order (length min..max_digits+2)."""
    wanted = _check_sizes(config, "sorting")
    rng = random.Random(TASK_SEED)
    lengths = _sorting_lengths(config)
    seen: dict[str, Item] = {}
    for _ in range(wanted * 50):
        if len(seen) == wanted:
            break
        digits = "".join(rng.choice("0123456789") for _ in range(rng.choice(lengths)))
        seen.setdefault(digits, Item(f"sort:{digits}=", "".join(sorted(digits))))
    train, held_out = _split(list(seen.values()), config.n_train, config.n_eval, "sorting")
    return Task("sorting", train, held_out, exact_match, alphabet="0123456789sort:=")
