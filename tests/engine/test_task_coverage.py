"""``harness validate`` checks that the testbed model can read a task without loading a tokenizer
(``check_testbed_characters``, from the task's alphabet); the trial checks with the tokenizer it
loads (``check_tokenizer``). The two must agree, or validate would pass a study every trial refuses."""

from __future__ import annotations

import json
import random
import string

import pytest

from harness.engine.models import char_tokenizer, check_tokenizer, lost_characters, task_tokenizer
from harness.engine.spec import ModelConfig
from harness.engine.task_config import TaskConfig
from harness.engine.tasks import build_task
from harness.engine.tasks.coverage import check_testbed_characters
from harness.errors import ConfigError


def _refusal(check, *args) -> str | None:
    try:
        check(*args)
    except ConfigError as err:
        return str(err)
    return None


@pytest.fixture
def gsm_file(tmp_path) -> str:
    path = tmp_path / "gsm.jsonl"
    rows = [
        {"question": f"Tom has {i} apples and buys 2. How many?", "answer": f"{i}+2={i + 2} #### {i + 2}"}
        for i in range(40)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return str(path)


@pytest.mark.parametrize("name", ["addition", "sorting", "multiplication", "lookup", "gsm8k_jsonl"])
def test_validate_and_the_trial_refuse_the_same_tasks_with_the_same_line(name, gsm_file):
    task = build_task(TaskConfig(name=name, n_train=30, n_eval=4, path=gsm_file))
    by_alphabet = _refusal(check_testbed_characters, "tiny", task)
    by_tokenizer = _refusal(
        lambda model, t: check_tokenizer(model, t, task_tokenizer(model, t, "unused")), ModelConfig(), task
    )
    assert by_alphabet == by_tokenizer
    assert (by_alphabet is not None) == (name == "gsm8k_jsonl"), by_alphabet


def test_only_the_testbed_model_is_checked_without_its_tokenizer(gsm_file):
    task = build_task(TaskConfig(name="gsm8k_jsonl", n_train=30, n_eval=4, path=gsm_file))
    check_testbed_characters("Qwen/Qwen2.5-0.5B-Instruct", task)  # the trial checks it with its tokenizer


def test_the_character_tokenizer_loses_exactly_what_is_outside_its_alphabet():
    rng = random.Random(0)
    pool = string.printable + "éü€中\u2028"
    for _ in range(20):
        alphabet = "".join(rng.sample(pool, rng.randrange(1, len(pool))))
        text = "".join(rng.choice(pool) for _ in range(300))
        lost, _ = lost_characters(char_tokenizer(alphabet), [text])
        assert set(lost) == set(text) - set(alphabet)
