"""``trainer:`` in a study: study-wide or per arm (the arm's wins), builtin by default, parsed into
``TrialSpec.trainer``; a builtin trial's spec (and so its trial id) is as it was before the key."""

from __future__ import annotations

import pytest

from harness.engine.spec import TrialSpec
from harness.engine.trainer_config import TrainerConfig
from harness.errors import ConfigError
from harness.study.expand import condition_spec
from harness.study.load import parse_study

BASE = {
    "name": "mixed",
    "seeds": 2,
    "task": {"name": "addition", "n_train": 40, "n_eval": 8},
    "arms": [{"name": "own", "algorithm": "grpo"}, {"name": "prog", "algorithm": "grpo"}],
    "control": "own",
}
COMMAND = ["python", "train.py", "{trial_file}", "--lr", "{algorithm.lr}", "--steps", "{train.steps}"]


def study(**changes):
    data = {**BASE, **changes}
    return parse_study(data)


def trainer_of(loaded, arm: str) -> TrainerConfig:
    return condition_spec(loaded, arm, loaded.seeds[0]).trainer


def test_builtin_is_the_default_and_leaves_the_spec_as_it_was():
    loaded = study()
    spec = condition_spec(loaded, "own", 0)
    assert spec.trainer.kind == "builtin"
    assert "trainer" not in spec.model_dump()  # the trial id of every existing study is unchanged
    assert TrialSpec.model_validate_json(spec.model_dump_json()) == spec


def test_the_arms_trainer_wins_over_the_studys():
    arms = [
        {"name": "own", "algorithm": "grpo", "trainer": "builtin"},
        {"name": "prog", "algorithm": "grpo"},
    ]
    loaded = study(trainer={"kind": "command", "command": COMMAND, "env": {"LR": "{algorithm.lr}"}}, arms=arms)
    assert trainer_of(loaded, "own").kind == "builtin"
    prog = trainer_of(loaded, "prog")
    assert (prog.kind, prog.command, prog.env, prog.scores) == ("command", COMMAND, {"LR": "{algorithm.lr}"}, "judge")
    other = condition_spec(loaded, "prog", 0)
    builtin = other.model_copy(update={"trainer": TrainerConfig()})
    assert other.trial_id != builtin.trial_id  # the trainer is part of what the trial is
    assert TrialSpec.model_validate_json(other.model_dump_json()).trainer == prog  # it travels to the child


def test_a_bare_kind_is_short_for_a_mapping():
    arms = [{"name": "own", "algorithm": "grpo"}, {"name": "prog", "algorithm": "grpo", "trainer": "trl"}]
    trainer = trainer_of(study(arms=arms), "prog")
    assert trainer == TrainerConfig(kind="trl")


@pytest.mark.parametrize(
    ("trainer", "expected"),
    [
        ({"kind": "command"}, "kind: command needs `command`"),
        ({"kind": "trl", "command": ["x"]}, "`command` is read only by kind: command"),
        ({"kind": "command", "command": ["x"], "vllm": {"use_vllm": True}}, "`vllm` is read only by kind: trl"),
        ({"kind": "builtin", "scores": "program"}, "read only by a program trainer"),
        ({"kind": "command", "command": ["x"], "env": {"HARNESS_STORAGE": "y"}}, "starts with HARNESS_"),
        ({"kind": "verl"}, "kind"),
        ({"kind": "command", "command": ["x"], "shell": True}, "shell"),
        ({"kind": "command", "command": ["python", "train\0.py"]}, "command[1] holds a NUL byte"),
        ({"kind": "command", "command": ["x"], "env": {"MY_LR": "1\0"}}, "env: MY_LR holds a NUL byte"),
    ],
)
def test_a_bad_trainer_is_one_line_naming_the_key(trainer, expected):
    with pytest.raises(ConfigError) as caught:
        study(trainer=trainer)
    message = str(caught.value)
    assert "\n" not in message and "trainer" in message and expected in message


def test_a_placeholder_naming_no_field_is_refused_at_validate_time():
    arms = [
        {"name": "own", "algorithm": "grpo"},
        {"name": "prog", "algorithm": "grpo", "trainer": {"kind": "command", "command": ["run", "{seeds}"]}},
    ]
    with pytest.raises(ConfigError) as caught:
        study(arms=arms)
    message = str(caught.value)
    assert message.startswith("arms[1] (prog): trainer.command[1]: {seeds} names no field of the trial file")
    assert "valid top-level fields: contract, trial_id, study, arm, seed, algorithm" in message


def test_a_nested_placeholder_lists_the_fields_at_its_level():
    with pytest.raises(ConfigError, match=r"\{train.stepz\} names no field .* train has: steps, prompts_per_step"):
        study(trainer={"kind": "command", "command": ["run", "{train.stepz}"]})


def test_the_placebo_needs_a_builtin_control():
    with pytest.raises(ConfigError, match="placebo: needs the control on the builtin trainer"):
        study(trainer={"kind": "command", "command": COMMAND}, placebo="random_reward")


def test_handed_in_scores_cannot_decide_on_pass_at_k():
    trainer = {"kind": "command", "command": COMMAND, "scores": "program"}
    with pytest.raises(ConfigError, match="primary_metric: eval/pass@2 is not among the scores a program hands in"):
        study(trainer=trainer, primary_metric="eval/pass@2", train={"eval_samples": 2, "eval_pass_k": [2]})


def test_a_tool_calling_task_is_refused_for_a_program_trainer():
    with pytest.raises(ConfigError, match=r"arms\[1\] \(prog\): trainer command: a tool-calling task") as caught:
        study(
            task={"name": "multiplication", "tools": ["calculator"], "n_train": 40, "n_eval": 8},
            arms=[
                {"name": "own", "algorithm": "grpo"},
                {"name": "prog", "algorithm": "grpo", "trainer": {"kind": "command", "command": COMMAND}},
            ],
        )
    assert "\n" not in str(caught.value)
