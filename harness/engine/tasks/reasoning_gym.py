"""A reasoning-gym dataset as the task: its procedural problems, and its own ``score_answer`` as
the verifier.

``task: {reasoning_gym: {dataset: chain_sum, config: {min_terms: 2, ...}}}``. reasoning-gym draws
problem i of a dataset from the seed ``seed + i``: the training prompts are drawn from the seeds
``train_seed`` to ``train_seed + n_train - 1`` and the held-out ones from ``eval_seed`` on, ranges
that must not overlap (``TaskConfig`` refuses it), so no draw is shared. A small problem space can
still draw the same problem twice: a training prompt whose text is also held out is dropped, so
the two sets are disjoint (checked again by ``Task``). Each prompt is the dataset's question
followed by ``INSTRUCTION``, the answer format the reader expects: reasoning-gym's own
``<answer>...</answer>`` tag. A chat model gets the prompt
through its chat template, as every task does (``LoadedModel.format_prompt``).

The verifier reads the answer (``answer: tag``: the last tag's content, reasoning-gym's
``extract_answer``; ``tag_or_last_number``: that, or else the completion's last number, for a
small model that answers "4 - 1 = 3" without the tag) and scores it with the dataset's
``score_answer`` against the problem's own entry: 1.0 for a right answer, and the partial credit
some datasets give. The warm start's target is the tagged reference answer.

Sizes are checked before the prompts are made: at most ``MAX_PROMPTS`` in all (as a synthetic
task), and the dataset's settings within a memory and time budget measured on its first problems
(:mod:`.gym_budget`), so absurd settings are one line, not an exhausted machine.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

from harness.engine.task_config import ReasoningGymConfig
from harness.engine.tasks.base import Item, Task
from harness.engine.tasks.gym_budget import check_budget
from harness.engine.tasks.synthetic import MAX_PROMPTS
from harness.errors import ConfigError, one_line

INSTRUCTION = "\nGive only the final answer, inside <answer></answer>."
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


class GymVerifier:
    """The dataset's ``score_answer`` on the answer read from a completion, against the entry of
    the item's prompt (train or held out)."""

    def __init__(self, datasets: dict[str, Any], entries: dict[str, tuple[str, dict]], answer: str):
        self._datasets = datasets  # "train"/"eval" -> the dataset object whose score_answer applies
        self._entries = entries  # prompt -> (which dataset, its entry)
        self._answer = answer

    def __call__(self, item: Item, completion: str) -> float:
        which, entry = self._entries[item.prompt]
        score = self._datasets[which].score_answer(read_answer(completion, self._answer), entry)
        return float(score) if math.isfinite(score) else 0.0


def read_answer(completion: str, how: str) -> str | None:
    """The answer a completion gives, as ``answer: tag`` or ``tag_or_last_number`` reads it."""
    from reasoning_gym.utils import extract_answer

    tagged = extract_answer(completion)
    if tagged is not None or how == "tag":
        return tagged
    numbers = _NUMBER.findall(completion)
    return numbers[-1] if numbers else None


def reasoning_gym_task(config) -> Task:
    """The task of ``config.reasoning_gym``: ``n_train`` training and ``n_eval`` held-out prompts."""
    gym: ReasoningGymConfig = config.reasoning_gym
    wanted = config.n_train + config.n_eval
    if wanted > MAX_PROMPTS:
        raise ConfigError(
            f"task.reasoning_gym: asked for {config.n_train:,} train + {config.n_eval:,} eval prompts; a "
            f"reasoning-gym task gives at most {MAX_PROMPTS:,} in all: lower task.n_train/n_eval"
        )
    train_set = _dataset(gym, gym.train_seed, config.n_train)
    eval_set = _dataset(gym, gym.eval_seed, config.n_eval)
    check_budget(train_set, wanted, f"task.reasoning_gym ({gym.dataset})")
    held_out = [_item(entry) for entry in eval_set]
    held_prompts = {item.prompt for item in held_out}
    train_entries = [(entry, _item(entry)) for entry in train_set]
    train = [item for _, item in train_entries if item.prompt not in held_prompts]
    if not train:
        raise ConfigError(
            f"task.reasoning_gym: every training prompt of {gym.dataset} is also held out (its config allows too "
            "few distinct problems); widen task.reasoning_gym.config or lower task.n_eval"
        )
    entries = {item.prompt: ("eval", entry) for entry, item in zip(eval_set, held_out)}
    entries.update({item.prompt: ("train", entry) for entry, item in train_entries if item.prompt not in held_prompts})
    verifier = GymVerifier({"train": train_set, "eval": eval_set}, entries, gym.answer)
    return Task(f"reasoning_gym.{gym.dataset}", tuple(train), tuple(held_out), verifier)


def _item(entry: dict) -> Item:
    return Item(entry["question"] + INSTRUCTION, str(entry["answer"]), f"<answer>{entry['answer']}</answer>")


def _dataset(gym: ReasoningGymConfig, seed: int, size: int):
    """The dataset of ``gym`` at ``seed`` with ``size`` problems; a one-line ``ConfigError`` for
    an unknown name or settings its config refuses, listing what exists."""
    try:
        import reasoning_gym
        from reasoning_gym.factory import DATASETS
    except ImportError:
        raise ConfigError("task.reasoning_gym needs the reasoning-gym package; `pip install reasoning-gym`") from None
    if gym.dataset not in DATASETS:
        raise ConfigError(
            f"task.reasoning_gym.dataset {gym.dataset!r} is not a reasoning-gym dataset; it has: "
            + ", ".join(sorted(DATASETS))
        )
    settings = _settings(gym, DATASETS[gym.dataset][1])
    try:
        return reasoning_gym.create_dataset(gym.dataset, **settings, seed=seed, size=size)
    except (TypeError, ValueError, AssertionError) as err:
        raise ConfigError(
            f"task.reasoning_gym.config for {gym.dataset}: {one_line(err, limit=200) or type(err).__name__}"
        ) from None


def _settings(gym: ReasoningGymConfig, config_class) -> dict[str, Any]:
    """``gym.config``, its keys checked against the dataset's config (seed and size are the
    harness's: it sets them from ``train_seed``/``eval_seed`` and ``n_train``/``n_eval``)."""
    known = sorted(f.name for f in dataclasses.fields(config_class) if f.name not in ("seed", "size"))
    unknown = sorted(set(gym.config) - set(known))
    if {"seed", "size"} & set(gym.config):
        raise ConfigError(
            "task.reasoning_gym.config: seed and size are set by the harness; use task.reasoning_gym.train_seed/"
            "eval_seed and task.n_train/n_eval"
        )
    if unknown:
        raise ConfigError(
            f"task.reasoning_gym.config: {', '.join(unknown)} is not a setting of {gym.dataset}; "
            f"it has: {', '.join(known)}"
        )
    # reasoning-gym's configs take tuples where YAML gives lists (operators: [+, -])
    return {key: tuple(value) if isinstance(value, list) else value for key, value in gym.config.items()}
