import json
from pathlib import Path

import pytest

from harness.engine.task_config import TaskConfig
from harness.engine.tasks import TASKS, build_task
from harness.engine.tasks.base import Item
from harness.engine.tasks.rewards import (
    REWARDS,
    boxed_answer,
    exact_match,
    extract_boxed,
    partial_match,
    resolve_reward,
)
from harness.errors import ConfigError


def reward_always_half(item, completion):
    return 0.5


@pytest.mark.parametrize("name", ["addition", "sorting"])
def test_synthetic_tasks_have_disjoint_deterministic_splits(name):
    config = TaskConfig(name=name, n_train=200, n_eval=50, max_digits=2)
    task, again = build_task(config), build_task(config)
    assert len(task.train) == 200 and len(task.eval) == 50
    assert not {i.prompt for i in task.train} & {i.prompt for i in task.eval}
    assert task.train == again.train and task.eval == again.eval
    for item in task.train[:20]:
        assert task.reward(item, item.answer) == 1.0
        assert task.reward(item, item.answer + "1") == 0.0


def test_addition_answers_are_aligned_sums():
    task = build_task(TaskConfig(name="addition", n_train=50, n_eval=10, max_digits=2))
    for item in task.train:
        a, b = item.prompt.rstrip("=").split("+")
        assert len(a) == len(b) == 2 and item.answer == f"{int(a) + int(b):03d}"


def test_sorting_answers_are_sorted_digits():
    task = build_task(TaskConfig(name="sorting", n_train=50, n_eval=10))
    for item in task.eval:
        digits = item.prompt.removeprefix("sort:").rstrip("=")
        assert item.answer == "".join(sorted(digits))


def test_too_many_prompts_is_a_clear_error():
    with pytest.raises(ValueError, match="only 100 distinct prompts"):
        build_task(TaskConfig(name="addition", n_train=100, n_eval=10, max_digits=1))


def test_exact_match_and_boxed_rewards():
    item = Item("q", "42")
    assert exact_match(item, " 42 ") == 1.0 and exact_match(item, "41") == 0.0
    assert extract_boxed(r"so \boxed{7} then \boxed{42}") == "42"
    assert boxed_answer(item, r"The answer is \boxed{42}.") == 1.0
    assert boxed_answer(item, r"\boxed{42.0}") == 1.0
    assert boxed_answer(Item("q", "1234"), r"\boxed{1,234}") == 1.0
    assert boxed_answer(item, "42") == 0.0
    assert partial_match(Item("q", "042"), "042") == 1.0
    assert partial_match(Item("q", "042"), "041") == pytest.approx(2 / 3)
    assert partial_match(Item("q", "042"), "04211") == pytest.approx(3 / 5)
    assert partial_match(Item("q", "042"), "") == 0.0


def test_reward_by_import_path_and_bad_paths():
    assert resolve_reward("tests.engine.test_tasks:reward_always_half")(Item("a", "b"), "") == 0.5
    with pytest.raises(ConfigError, match="task.reward 'no_such_module_xyz:f': cannot import 'no_such_module_xyz'"):
        resolve_reward("no_such_module_xyz:f")
    with pytest.raises(ConfigError, match="module 'tests.engine.test_tasks' has no attribute 'nope'"):
        resolve_reward("tests.engine.test_tasks:nope")
    with pytest.raises(ConfigError, match="unknown reward 'nope'; valid: boxed_answer, exact_match, partial_match"):
        resolve_reward("nope")


def test_a_reward_module_that_fails_while_importing_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "broken_rewards.py").write_text("raise RuntimeError('no GPU here\\nsecond line')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError) as err:
        resolve_reward("broken_rewards:score")
    assert str(err.value) == (
        "task.reward 'broken_rewards:score': cannot import 'broken_rewards', it fails while "
        "importing (RuntimeError: no GPU here second line)"
    )


def test_gsm8k_jsonl_task(tmp_path):
    path = tmp_path / "gsm.jsonl"
    lines = [{"question": f"What is {i} + 1?", "answer": f"{i} plus one. #### {i + 1}"} for i in range(30)]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    task = build_task(TaskConfig(name="gsm8k_jsonl", path=str(path), n_train=100, n_eval=5))
    assert len(task.eval) == 5 and len(task.train) == 25
    item = task.train[0]
    assert "\\boxed{}" in item.prompt and item.solution.endswith(f"\\boxed{{{item.answer}}}")
    assert task.reward(item, item.solution) == 1.0


def test_gsm8k_jsonl_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="needs task.path"):
        build_task(TaskConfig(name="gsm8k_jsonl"))
    with pytest.raises(ConfigError, match="no such file"):
        build_task(TaskConfig(name="gsm8k_jsonl", path=str(tmp_path / "missing.jsonl")))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answer": "#### 1"}\n{not json\n')
    with pytest.raises(ConfigError, match="bad.jsonl:2: not valid JSON"):
        build_task(TaskConfig(name="gsm8k_jsonl", path=str(bad)))
    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text('{"prompt": "q"}\n')
    with pytest.raises(ConfigError, match="needs 'question' and 'answer'"):
        build_task(TaskConfig(name="gsm8k_jsonl", path=str(wrong)))


@pytest.mark.parametrize(
    "content, message",
    [
        (b'{"question": "q", "answer": "#### 1"}\n\xff\xfe binary\n', "bad.jsonl:2: not UTF-8 text"),
        (b"[" * 100_000 + b"\n", "bad.jsonl:1: not valid JSON"),  # nests too deep for the parser
        (b'{"question": "q", "answer": ' + b"9" * 5000 + b"}\n", "bad.jsonl:1: not valid JSON"),  # too many digits
        (b"[1, 2]\n", "bad.jsonl:1: a line must be a JSON object"),
    ],
)
def test_a_corrupt_jsonl_file_is_one_line_naming_it(tmp_path, content, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(content)
    with pytest.raises(ConfigError, match=message) as err:
        build_task(TaskConfig(name="gsm8k_jsonl", path=str(bad)))
    assert "\n" not in str(err.value)


def test_a_jsonl_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    from harness.engine.tasks import jsonl_file

    big = tmp_path / "big.jsonl"
    big.write_text('{"question": "q", "answer": "#### 1"}\n' * 100)
    monkeypatch.setattr(jsonl_file, "MAX_JSONL_BYTES", 1000)
    monkeypatch.setattr(Path, "open", lambda *a, **k: pytest.fail("the file was opened"))
    with pytest.raises(ConfigError, match="3,800 bytes, over the 1,000 bytes a JSONL file may have"):
        build_task(TaskConfig(name="gsm8k_jsonl", path=str(big)))


def _lines(*records) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


GOOD = {"question": "Tom has 3 apples and buys 2. How many?", "answer": "3 + 2 = 5 #### 5"}


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"question": "q", "answer": "3 + 2 = 5 ####"}, "the final answer after '####' is empty"),
        ({"question": "q", "answer": "3 + 2 = 5 ####  \t"}, "the final answer after '####' is empty"),
        ({"question": "q", "answer": "#### ,"}, "the final answer after '####' is empty"),  # commas are dropped
        ({"question": "q", "answer": None}, "'answer' must be a non-empty string, not null"),
        ({"question": "q", "answer": ""}, "'answer' must be a non-empty string"),
        ({"question": "q", "answer": "   "}, "'answer' must be a non-empty string"),
        ({"question": "q", "answer": 5}, "'answer' must be a non-empty string, not a number"),
        ({"question": "q", "answer": ["5"]}, "'answer' must be a non-empty string, not an array"),
        ({"question": "q"}, "no 'answer'"),
        ({"question": None, "answer": "#### 5"}, "'question' must be a non-empty string, not null"),
        ({"question": "", "answer": "#### 5"}, "'question' must be a non-empty string"),
        ({"answer": "#### 5"}, "no 'question'"),
        ("[1, 2]", "a line must be a JSON object"),
    ],
)
def test_a_line_without_a_usable_answer_is_one_line_naming_file_and_line(tmp_path, bad, message):
    """An empty or null answer became the reference '' or 'None', which ``\\boxed{}`` or
    ``\\boxed{None}`` matched: dirty data paid. Now the line is refused, by file and line."""
    path = tmp_path / "gsm.jsonl"
    path.write_text(_lines(GOOD, bad, GOOD))
    with pytest.raises(ConfigError) as err:
        build_task(TaskConfig(name="gsm8k_jsonl", path=str(path)))
    text = str(err.value)
    assert text.startswith(f"{path}:2: ") and message in text and "\n" not in text, text


def test_a_line_without_the_hash_marks_is_its_own_reference(tmp_path):
    path = tmp_path / "gsm.jsonl"
    path.write_text(_lines({"question": "q1", "answer": " 7 "}, {"question": "q2", "answer": "1,234"}))
    task = build_task(TaskConfig(name="gsm8k_jsonl", path=str(path), n_eval=1))
    assert sorted(item.answer for item in (*task.train, *task.eval)) == ["1,234", "7"]


#: completions with nothing in the answer: no verifier may pay for them
EMPTY_COMPLETIONS = ["", "   ", "\\boxed{}", "\\boxed{ }", "\\boxed{$}", "\\boxed{,}", "None", "\\boxed{None}"]


@pytest.mark.parametrize("name", sorted(REWARDS.names()))
def test_no_verifier_credits_an_empty_reference_or_an_empty_answer(name):
    reward = REWARDS.get(name)
    empty_references = ["", " ", "\t\n"] + (["$", ",", " $ "] if name == "boxed_answer" else [])  # numbers: no digit
    for reference in empty_references:
        for completion in [*EMPTY_COMPLETIONS, reference, "42", "\\boxed{42}"]:
            assert reward(Item("q", reference), completion) == 0.0, (name, reference, completion)
    for completion in ["", "   ", "\\boxed{}", "\\boxed{ }", "\\boxed{$}", "\\boxed{,}"]:
        assert reward(Item("q", "42"), completion) == 0.0, (name, completion)


@pytest.mark.parametrize("name", sorted(TASKS.names()))
def test_every_task_has_answers_and_pays_nothing_for_an_empty_completion(name, tmp_path):
    path = tmp_path / "gsm.jsonl"
    path.write_text(_lines(*({"question": f"What is {i} + 1?", "answer": f"#### {i + 1}"} for i in range(20))))
    extra = {"reasoning_gym": {"dataset": "chain_sum"}} if name == "reasoning_gym" else {"path": str(path)}
    task = build_task(TaskConfig(name=name, n_train=40, n_eval=10, **extra))
    for item in (*task.train, *task.eval):
        assert item.answer.strip(), item
        assert all(task.reward(item, completion) == 0.0 for completion in EMPTY_COMPLETIONS), item
        assert task.reward(item, item.target) == 1.0, item


def test_bad_utf8_names_the_line_past_the_first_read(tmp_path):
    """The decoder's offset was into its read buffer: a bad byte on line 3001 was reported 'at
    byte 79' of some chunk, with no line. Now the line and the column within it."""
    path = tmp_path / "gsm.jsonl"
    good = json.dumps(GOOD).encode() + b"\n"
    path.write_bytes(good * 3000 + b'{"question": "caf\xe9?", "answer": "#### 1"}\n' + good)
    with pytest.raises(ConfigError) as err:
        build_task(TaskConfig(name="gsm8k_jsonl", path=str(path)))
    assert str(err.value) == f"{path}:3001: not UTF-8 text (byte 0xe9 at column 18); save the file as UTF-8"
