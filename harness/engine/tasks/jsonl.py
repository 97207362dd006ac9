"""A GSM8K-style task read from local JSONL files, scored by the ``\\boxed{}`` answer.

Each line: ``{"question": ..., "answer": ...}``. GSM8K's own answers end in ``#### 42``; that
final number is the reference, and the text before it becomes the worked solution used by the
warm start (ending in ``\\boxed{42}``).
"""

from __future__ import annotations

import random

from harness.engine.tasks.base import Item, Task
from harness.engine.tasks.jsonl_file import jsonl_records
from harness.engine.tasks.rewards import boxed_answer
from harness.engine.tasks.synthetic import TASK_SEED
from harness.errors import ConfigError

INSTRUCTION = " Provide a numerical answer without units, written inside \\boxed{}."


def _item(record, where: str) -> Item:
    """One line's problem. A line without a usable final answer is refused: an empty or null
    answer would become the reference ``""`` or ``"None"``, which ``\\boxed{}`` or
    ``\\boxed{None}`` matches, so dirty data would pay."""
    if not isinstance(record, dict):
        raise ConfigError(
            f'{where}: a line must be a JSON object {{"question": ..., "answer": ...}}, not {_json_kind(record)}'
        )
    question, answer = (_text(record, key, where) for key in ("question", "answer"))
    reasoning, sep, final = answer.rpartition("####")
    if not sep:
        return Item(question + INSTRUCTION, answer.strip())
    final = final.strip().replace(",", "")
    if not final:
        raise ConfigError(f"{where}: the final answer after '####' is empty; end the answer with it, e.g. '#### 42'")
    return Item(question + INSTRUCTION, final, f"{reasoning.strip()} \\boxed{{{final}}}")


def _text(record: dict, key: str, where: str) -> str:
    if key not in record:
        raise ConfigError(f"{where}: no '{key}'; each line needs 'question' and 'answer' fields")
    value = record[key]
    if not isinstance(value, str) or not value.strip():
        shown = "" if isinstance(value, str) else f", not {_json_kind(value)}"
        raise ConfigError(
            f"{where}: '{key}' must be a non-empty string{shown}, e.g. \"{key}\": "
            + ('"... #### 42"' if key == "answer" else '"What is 6 * 7?"')
        )
    return value


def _json_kind(value) -> str:
    """How JSON names the kind of ``value``: null, a number, an array..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return {dict: "an object", list: "an array", str: "a string"}.get(type(value), type(value).__name__)


def read_jsonl(path: str) -> list[Item]:
    items = [_item(record, where) for where, record in jsonl_records(path, "task.path", "question/answer")]
    if not items:
        raise ConfigError(f"task.path {path!r}: the file holds no problems")
    return items


def gsm8k_jsonl(config) -> Task:
    if config.path is None:
        raise ConfigError("task 'gsm8k_jsonl' needs task.path (a JSONL file of question/answer lines)")
    items = read_jsonl(config.path)
    if config.eval_path is not None:
        train, held_out = items[: config.n_train], read_jsonl(config.eval_path)[: config.n_eval]
    else:
        random.Random(TASK_SEED).shuffle(items)
        n_eval = min(config.n_eval, len(items) // 5 or 1)
        held_out, train = items[:n_eval], items[n_eval : n_eval + config.n_train]
    held_prompts = {i.prompt for i in held_out}
    train = [i for i in train if i.prompt not in held_prompts]
    return Task("gsm8k_jsonl", tuple(train), tuple(held_out), boxed_answer)
