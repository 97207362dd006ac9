"""A study that cannot learn says so (issue 13, item 5): the built-in tiny char-level model on
``gsm8k_jsonl`` read every character as ``<pad>`` and ran to the end at accuracy 0 with 100%
degenerate groups. A tokenizer that cannot encode the task is now an error before any work, and a
trial whose groups are all degenerate (or whose reward never changes) warns in its result."""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
from transformers import LlamaConfig

from harness.engine.models import char_tokenizer, check_tokenizer, task_tokenizer
from harness.engine.spec import NO_LEARNING_SIGNAL, ModelConfig
from harness.engine.task_config import TaskConfig
from harness.engine.tasks import build_task
from harness.engine.tasks.coverage import MAX_LOST_SHARE
from harness.engine.trial import NO_SIGNAL_STEPS, learning_signal, run_trial
from harness.errors import ConfigError


@pytest.fixture
def gsm_file(tmp_path) -> str:
    path = tmp_path / "gsm.jsonl"
    rows = [
        {"question": f"Tom has {i} apples and buys 2. How many?", "answer": f"{i}+2={i + 2} #### {i + 2}"}
        for i in range(40)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return str(path)


def test_the_tiny_model_on_a_task_without_an_alphabet_is_refused_before_any_work(make_spec, gsm_file, tmp_path):
    spec = make_spec(task={"name": "gsm8k_jsonl", "path": gsm_file, "n_train": 30, "n_eval": 4, "reward": None})
    spec = spec.model_copy(update={"cache_dir": str(tmp_path / "cache")})
    with pytest.raises(ConfigError) as err:
        run_trial(spec)
    message = str(err.value)
    assert "\n" not in message
    assert "task gsm8k_jsonl: the tokenizer of model 'tiny' cannot encode" in message
    assert "characters (' ' 'e' " in message and "and 2" in message  # which, the most frequent first
    assert "100% of the prompt and target characters" in message  # how much is lost
    assert "model.name" in message and "alphabet" in message  # what to do
    assert not (tmp_path / "cache").exists(), "no warm start was built or looked up"


@pytest.mark.parametrize("task", ["addition", "sorting"])
def test_the_tiny_model_covers_the_tasks_with_an_alphabet(task):
    task = build_task(TaskConfig(name=task, n_train=200, n_eval=20))
    check_tokenizer(ModelConfig(), task, task_tokenizer(ModelConfig(), task, "unused"))


def _tokenizer_folder(tmp_path: Path, alphabet: str) -> str:
    """A model folder as far as the tokenizer check reads it: its tokenizer and config.json (a
    model folder without one is refused before its tokenizer is read); no weights."""
    folder = tmp_path / "tok"
    tokenizer = char_tokenizer(alphabet)
    tokenizer.save_pretrained(folder)
    LlamaConfig(vocab_size=len(tokenizer)).save_pretrained(folder)
    return str(folder)


def test_a_real_tokenizer_is_checked_too(tmp_path, gsm_file):
    task = build_task(TaskConfig(name="gsm8k_jsonl", path=gsm_file, n_train=30, n_eval=4))
    config = ModelConfig(name=_tokenizer_folder(tmp_path / "full", string.printable))
    check_tokenizer(config, task, task_tokenizer(config, task, tmp_path))
    digits_only = _tokenizer_folder(tmp_path / "digits", string.digits + " ")
    digits_config = ModelConfig(name=digits_only)
    with pytest.raises(ConfigError, match="use a model whose tokenizer covers the task's text"):
        check_tokenizer(digits_config, task, task_tokenizer(digits_config, task, tmp_path))


def test_a_few_unknown_characters_are_tolerated(tmp_path):
    rows = [{"question": f"What is {i}+1?" + (" é" if i == 0 else ""), "answer": f"#### {i + 1}"} for i in range(400)]
    path = tmp_path / "rare.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    task = build_task(TaskConfig(name="gsm8k_jsonl", path=str(path), n_train=400, n_eval=50))
    text = "".join(t for item in (*task.train, *task.eval) for t in (item.prompt, item.target))
    assert 0 < text.count("é") / len(text) < MAX_LOST_SHARE
    config = ModelConfig(name=_tokenizer_folder(tmp_path, string.printable))
    check_tokenizer(config, task, task_tokenizer(config, task, tmp_path))


def _history(frac_degenerate: list[float], rewards: list[float] | None = None, spread: float = 0.0) -> list[dict]:
    rewards = rewards or [0.25 + 0.01 * i for i in range(len(frac_degenerate))]
    return [{"step": 0, "eval/accuracy": 0.0}] + [
        {"step": i, "train/frac_degenerate": f, "train/reward_mean": r, "train/reward_std_in_group": spread}
        for i, (f, r) in enumerate(zip(frac_degenerate, rewards), 1)
    ]


def test_all_degenerate_groups_in_the_first_steps_warn():
    degenerate = [1.0] * NO_SIGNAL_STEPS + [0.5] * 5
    (line,) = learning_signal(_history(degenerate))
    assert line.startswith(f"{NO_LEARNING_SIGNAL}: every group was degenerate")
    assert f"first {NO_SIGNAL_STEPS} steps" in line and "more seeds will not change that" in line
    assert learning_signal(_history([1.0] * 3)) != []  # a shorter trial: all of its steps


def test_a_reward_that_never_changes_warns():
    (line,) = learning_signal(_history([0.0] * 15, rewards=[0.0] * 15))  # group size 1: no degeneracy measure
    assert line.startswith(f"{NO_LEARNING_SIGNAL}: the mean reward was 0 in each of its 15 steps")


@pytest.mark.parametrize(
    "history",
    [
        _history([1.0] * (NO_SIGNAL_STEPS - 1) + [0.75] * 5),  # one mixed group early enough
        _history([0.5] * 15, rewards=[0.3] * 15, spread=0.2),  # the same mean, but spread within groups
    ],
)
def test_a_trial_with_some_signal_does_not_warn(history):
    assert learning_signal(history) == []


def test_a_trial_that_cannot_learn_warns_in_its_result(make_spec):
    spec = make_spec(warmstart={"enabled": False}, task={"reward": "exact_match"})  # a random policy: all 0
    result = run_trial(spec)
    assert result.final["train/reward_mean"] == 0.0
    assert [w.split(":")[0] for w in result.warnings] == [NO_LEARNING_SIGNAL]
