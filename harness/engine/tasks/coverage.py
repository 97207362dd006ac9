"""Whether a model can read a task's text: the share of its prompt and target characters the
tokenizer has no token for, and the one refusal when that share is too large.

A trial checks with the tokenizer it loads (``harness.engine.models.check_tokenizer``), before
any work. ``harness validate`` checks the testbed model here, with neither torch nor a tokenizer:
the tiny model's character tokenizer (``harness.engine.models.char_tokenizer``) has a token for
each character of the task's ``alphabet`` and for nothing else. A real model's tokenizer may have
to come over the network, so validate leaves it to the trial.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from harness.errors import ConfigError

if TYPE_CHECKING:
    from harness.engine.tasks.base import Task

#: a task whose prompt and target characters the tokenizer loses more often than this is refused
MAX_LOST_SHARE = 0.01
#: the built-in character-level testbed model (``model.name: tiny``)
TESTBED_MODEL = "tiny"


def task_texts(task: Task) -> list[str]:
    """Every text the model reads or writes in ``task``: each train and held-out prompt and target."""
    return [text for item in (*task.train, *task.eval) for text in (item.prompt, item.target)]


def refuse_lost_characters(task: Task, model_name: str, lost: list[str], share: float) -> None:
    """A ``ConfigError`` when the tokenizer of ``model_name`` loses more than ``MAX_LOST_SHARE`` of
    the task's characters: ``lost`` are those it has no token for (the most frequent first),
    ``share`` their share of all the task's characters."""
    if share <= MAX_LOST_SHARE:
        return
    shown = " ".join(repr(c) for c in lost[:20]) + (f" and {len(lost) - 20} more" if len(lost) > 20 else "")
    fix = (
        "use a real model (model.name: a hub id or a local folder) or a task with an alphabet (addition, sorting)"
        if model_name == TESTBED_MODEL
        else "use a model whose tokenizer covers the task's text"
    )
    raise ConfigError(
        f"task {task.name}: the tokenizer of model {model_name!r} cannot encode {len(lost)} of its characters "
        f"({shown}), {share:.0%} of the prompt and target characters, so the model would see a placeholder "
        f"token in their place; {fix}"
    )


def check_testbed_characters(model_name: str, task: Task) -> None:
    """For the testbed model, refuse a task with too many characters outside its ``alphabet`` (a
    natural-language task has no alphabet: the tiny model would read every character as padding);
    any other model is checked by the trial, with its tokenizer."""
    if model_name != TESTBED_MODEL:
        return
    counts = Counter("".join(task_texts(task)))
    lost = sorted((c for c in counts if c not in task.alphabet), key=lambda c: -counts[c])
    refuse_lost_characters(task, model_name, lost, sum(counts[c] for c in lost) / max(sum(counts.values()), 1))
