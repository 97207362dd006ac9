"""The reasoning-gym task: its prompts (the dataset's questions with the answer format stated, the
held-out ones never trained on), its verifier (the dataset's own ``score_answer``, scoring as
reasoning-gym does on the same entries, partial credit included), its settings (checked, with
one-line errors that list what exists), and a study with it: ``harness validate`` counts its
prompts, and the tiny character model is refused with the tokenizer-coverage line."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from harness.algorithms import resolve_algorithm
from harness.engine.spec import TrialSpec
from harness.engine.task_config import TaskConfig
from harness.engine.tasks import build_task
from harness.engine.tasks.reasoning_gym import INSTRUCTION
from harness.engine.trial import run_trial
from harness.errors import ConfigError

reasoning_gym = pytest.importorskip("reasoning_gym", reason="the reasoning_gym task needs: pip install reasoning-gym")
from cli_main import run_main  # noqa: E402
from reasoning_gym.factory import DATASETS  # noqa: E402
from reasoning_gym.utils import extract_answer  # noqa: E402

#: a small space of problems (two one-digit terms): the train and held-out draws hold some alike
SMALL_CHAIN_SUM = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}


def _config(dataset: str = "chain_sum", settings: dict | None = None, n_train: int = 60, n_eval: int = 20, **gym):
    return TaskConfig(
        reasoning_gym={"dataset": dataset, "config": settings or {}, **gym}, n_train=n_train, n_eval=n_eval
    )


def _reasoning_gym_entries(config: TaskConfig, which: str, **settings) -> list[dict]:
    """reasoning-gym's own entries of the train or held-out seed, made without the harness."""
    gym = config.reasoning_gym
    seed, size = (gym.train_seed, config.n_train) if which == "train" else (gym.eval_seed, config.n_eval)
    return list(reasoning_gym.create_dataset(gym.dataset, **settings, seed=seed, size=size))


def test_prompts_are_the_questions_with_the_answer_format_and_no_held_out_one_is_trained_on():
    config = _config(settings=SMALL_CHAIN_SUM, n_train=300, n_eval=40)
    task = build_task(config)
    held = _reasoning_gym_entries(config, "eval", **SMALL_CHAIN_SUM)
    drawn = _reasoning_gym_entries(config, "train", **SMALL_CHAIN_SUM)

    assert task.name == "reasoning_gym.chain_sum"
    assert [i.prompt for i in task.eval] == [e["question"] + INSTRUCTION for e in held]
    held_prompts = {i.prompt for i in task.eval}
    kept = [e for e in drawn if e["question"] + INSTRUCTION not in held_prompts]
    assert len(kept) < len(drawn)  # this small space draws some held-out problems among the training ones too
    assert [i.prompt for i in task.train] == [e["question"] + INSTRUCTION for e in kept]
    assert not {i.prompt for i in task.train} & held_prompts
    for item, entry in zip((*task.train, *task.eval), (*kept, *held)):
        assert item.prompt.endswith("inside <answer></answer>.")  # the format the verifier reads, stated
        assert item.answer == entry["answer"]
        assert item.target == f"<answer>{entry['answer']}</answer>"  # the warm start's target: that format


def test_held_out_seeds_inside_the_training_seeds_are_refused():
    """reasoning-gym draws problem i from seed + i: held-out seeds 4.. would redraw the training
    problems drawn from seeds 3..62, shifted by one."""
    with pytest.raises(ValidationError, match=r"seeds 4\.\.23 overlap the training prompts' seeds 3\.\.62"):
        _config(train_seed=3, eval_seed=4)
    with pytest.raises(ValidationError, match="set eval_seed to 63 or more"):
        _config(train_seed=3, eval_seed=3)
    with pytest.raises(ValidationError, match="overlap"):
        _config(train_seed=10, eval_seed=0)  # held-out 0..19 reaches into training 10..69
    assert build_task(_config(train_seed=3, eval_seed=63)).eval  # adjacent ranges share no draw
    assert build_task(_config(train_seed=20, eval_seed=0)).eval


def test_the_default_seeds_draw_apart_and_the_held_out_set_does_not_move_with_n_train():
    small, large = build_task(_config(n_train=50)), build_task(_config(n_train=500))
    assert [i.prompt for i in small.eval] == [i.prompt for i in large.eval]


def _completions(answer: str) -> list[tuple[str, str | None, str | None]]:
    """Completions of a numeric ``answer``, each with what ``answer: tag`` and ``answer:
    tag_or_last_number`` read from it."""
    other = str(int(answer) + 1)
    return [
        (f"<answer>{answer}</answer>", answer, answer),
        (f"<answer> {answer} </answer>", answer, answer),
        (f"first <answer>{other}</answer>, then <answer>{answer}</answer>", answer, answer),  # the last tag
        (f"<answer>{other}</answer>", other, other),
        (f"<answer>x = {answer}</answer>", f"x = {answer}", f"x = {answer}"),  # partial credit, where given
        (f"2 + 3 = {answer}", None, answer),  # no tag: only the last number is read
        (f"it is {answer}, or {other}", None, other),
        ("I do not know", None, None),
        ("", None, None),
    ]


@pytest.mark.parametrize("answer_mode", ["tag", "tag_or_last_number"])
@pytest.mark.parametrize("dataset", ["chain_sum", "basic_arithmetic"])
def test_the_verifier_scores_as_reasoning_gym_scores_the_same_entries(dataset, answer_mode):
    config = _config(dataset, n_train=30, n_eval=10, answer=answer_mode)
    task = build_task(config)
    score_answer = reasoning_gym.get_score_answer_fn(dataset)  # reasoning-gym's own scoring entry point
    entries = {
        e["question"] + INSTRUCTION: e for which in ("train", "eval") for e in _reasoning_gym_entries(config, which)
    }
    scores = []
    for item in (*task.train, *task.eval):
        entry = entries[item.prompt]
        assert task.reward(item, item.target) == 1.0
        for completion, by_tag, by_number in _completions(entry["answer"]):
            read = by_tag if answer_mode == "tag" else by_number
            if answer_mode == "tag":
                assert read == extract_answer(completion)  # reasoning-gym's own reading of the tag
            expected = score_answer(read, entry)
            assert task.reward(item, completion) == expected, (completion, entry["answer"])
            scores.append(expected)
    assert {0.0, 1.0} < set(scores)  # right, wrong and partly right answers were all scored


def test_a_partly_right_answer_gets_the_datasets_partial_score():
    config = _config("spell_backward", n_train=20, n_eval=10)
    task = build_task(config)
    score_answer = reasoning_gym.get_score_answer_fn("spell_backward")
    entries = {e["question"] + INSTRUCTION: e for e in _reasoning_gym_entries(config, "eval")}
    for item in task.eval:
        answer = entries[item.prompt]["answer"]
        half = answer[: len(answer) // 2] + "#" * (len(answer) - len(answer) // 2)
        score = task.reward(item, f"<answer>{half}</answer>")
        assert score == score_answer(half, entries[item.prompt])
        assert 0.0 < score < 1.0 if len(answer) > 1 else score == 0.0
        assert task.reward(item, f"<answer>{answer}</answer>") == 1.0


def test_listed_settings_reach_the_dataset_as_its_tuples():
    operators = {"operators": ["+", "-"]}  # as YAML gives them: a list
    config = _config("basic_arithmetic", operators, n_train=80, n_eval=20)
    task = build_task(config)
    expected = _reasoning_gym_entries(config, "eval", operators=("+", "-"))
    assert [i.prompt for i in task.eval] == [e["question"] + INSTRUCTION for e in expected]
    assert not any(op in _question(i) for i in (*task.train, *task.eval) for op in "*/")
    default = build_task(_config("basic_arithmetic", n_train=80, n_eval=20))
    assert any(op in _question(i) for i in default.train for op in "*/")  # the setting is what removed them


def _question(item) -> str:
    return item.prompt.removesuffix(INSTRUCTION)


def _refusal(config: TaskConfig) -> str:
    with pytest.raises(ConfigError) as caught:
        build_task(config)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_an_unknown_dataset_is_one_line_listing_every_dataset():
    message = _refusal(_config("chain_sums"))
    assert "'chain_sums' is not a reasoning-gym dataset" in message
    assert all(name in message for name in DATASETS)


def test_an_unknown_setting_is_one_line_listing_the_datasets_settings():
    message = _refusal(_config(settings={"min_term": 2, "max_digits": 2}))
    assert "min_term is not a setting of chain_sum" in message
    listed = message.split("it has: ")[1].split(", ")
    assert {"min_terms", "max_terms", "min_digits", "max_digits"} <= set(listed)
    assert not {"seed", "size"} & set(listed)  # the harness's, not the study's


@pytest.mark.parametrize("key", ["seed", "size"])
def test_seed_and_size_in_the_settings_are_refused(key):
    message = _refusal(_config(settings={key: 5}))
    assert "seed and size are set by the harness" in message and "train_seed" in message and "n_train" in message


@pytest.mark.parametrize(
    ("dataset", "settings", "says"),
    [
        ("chain_sum", {"min_terms": 4, "max_terms": 2}, "max_terms"),
        ("basic_arithmetic", {"operators": ["^"]}, "unsupported operator: ^"),
        ("chain_sum", {"min_terms": "two"}, "not supported between"),  # a value of the wrong type
    ],
)
def test_values_the_dataset_refuses_are_one_line_errors(dataset, settings, says):
    message = _refusal(_config(dataset, settings))
    assert message.startswith(f"task.reasoning_gym.config for {dataset}: ") and says in message


def test_a_space_so_small_that_every_training_prompt_is_held_out_is_refused():
    one_digit_sums = {
        "min_terms": 2,
        "max_terms": 2,
        "min_digits": 1,
        "max_digits": 1,
        "operators": ["+"],
        "allow_parentheses": False,
        "allow_negation": False,
    }
    message = _refusal(_config("basic_arithmetic", one_digit_sums, n_train=5, n_eval=500))
    assert "every training prompt of basic_arithmetic is also held out" in message
    assert "task.n_eval" in message


def _study(tmp_path, model: str, **gym) -> str:
    path = tmp_path / "gym.yaml"
    path.write_text(
        "name: gym\nseeds: 1\n"
        "task:\n  reasoning_gym: {dataset: chain_sum, config: {min_terms: 2, max_terms: 2}"
        + "".join(f", {key}: {value}" for key, value in gym.items())
        + "}\n  n_train: 50\n  n_eval: 8\n"
        f"model:\n  name: {model}\n"
        "arms:\n  - {name: grpo, algorithm: grpo}\n"
    )
    return str(path)


def test_validate_counts_the_prompts_of_a_study_on_a_reasoning_gym_task(tmp_path, monkeypatch, capsys):
    # a real model's tokenizer is the trial's to check: validate reads no model
    code, out, err = run_main(monkeypatch, capsys, "validate", _study(tmp_path, "HuggingFaceTB/SmolLM2-135M-Instruct"))
    assert code == 0, err
    task = build_task(_config(settings={"min_terms": 2, "max_terms": 2}, n_train=50, n_eval=8))
    assert f"task reasoning_gym: {len(task.train)} train / 8 held-out prompts" in out


def test_validate_refuses_overlapping_seeds_in_one_line(tmp_path, monkeypatch, capsys):
    study = _study(tmp_path, "HuggingFaceTB/SmolLM2-135M-Instruct", train_seed=4, eval_seed=4)
    code, out, err = run_main(monkeypatch, capsys, "validate", study)
    assert code == 2 and "overlap the training prompts' seeds 4..53" in err
    assert len(err.strip().splitlines()) == 1


def test_the_tiny_character_model_is_refused_as_it_cannot_read_the_questions(tmp_path, monkeypatch, capsys):
    code, out, err = run_main(monkeypatch, capsys, "validate", _study(tmp_path, "tiny"))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "the tokenizer of model 'tiny' cannot encode" in err and "use a real model" in err
    spec = TrialSpec(
        arm="grpo",
        algorithm=resolve_algorithm("grpo", {}),
        task={"reasoning_gym": {"dataset": "chain_sum"}, "n_train": 20, "n_eval": 4},
        warmstart={"enabled": False},
        cache_dir=str(tmp_path / "cache"),
    )
    with pytest.raises(ConfigError, match="the tokenizer of model 'tiny' cannot encode") as caught:
        run_trial(spec)  # the trial refuses it too, before any work
    assert "\n" not in str(caught.value)
