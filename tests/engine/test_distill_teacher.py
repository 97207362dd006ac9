"""The distillation teacher in the RL step (issue 35): on the testbed the tiny model at twice the
width and depth, warm-started once and cached like the policy's warm start; its log-probs are
those of the policy's sampled tokens."""

import copy
import math

import pytest

from harness.engine.compute import ModelSize, PassTokens, StepTokens, step_flops
from harness.engine.rl_step import rl_step
from harness.engine.teacher import Teacher
from harness.engine.teacher_load import load_teacher, tiny_teacher_spec
from harness.engine.trial import make_learner, start_policy
from harness.engine.warmstart_key import MANIFEST_FILE, cache_folder
from harness.errors import ConfigError


def _size(model) -> int:
    return sum(p.numel() for p in model.parameters())


def test_the_tiny_teacher_is_bigger_cached_and_read_on_the_sampled_tokens(make_spec):
    spec = make_spec("on_policy_distill")
    task, lm, _, _ = start_policy(spec)
    learner = make_learner(spec, lm, task)
    folder = cache_folder(tiny_teacher_spec(spec))
    assert tiny_teacher_spec(spec).warmstart.target_accuracy == 1.0 > spec.warmstart.target_accuracy
    assert (folder / MANIFEST_FILE).is_file() and folder != cache_folder(spec)
    assert _size(learner.teacher.model) > 2 * _size(lm.model)
    assert learner.teacher.metrics["teacher/steps"] == spec.warmstart.steps  # no early stop short of 100%
    assert 0 <= learner.teacher.metrics["teacher/val_accuracy"] <= 1
    items = list(task.train[:4])
    metrics = rl_step(learner, task, items)
    assert math.isfinite(metrics["train/teacher_kl"]) and abs(metrics["train/teacher_kl"]) > 1e-3
    # the policy as its own teacher: its log-probs of its own samples, so the log-ratio is ~0
    learner.teacher = Teacher(copy.deepcopy(lm.model), "itself")
    assert rl_step(learner, task, items)["train/teacher_kl"] == pytest.approx(0.0, abs=1e-4)


def test_no_teacher_without_distill_and_a_tiny_teacher_needs_the_tiny_model(make_spec):
    assert load_teacher(make_spec("grpo"), None, None) is None
    spec = make_spec("on_policy_distill", model={"name": "some-org/some-model"})
    with pytest.raises(ConfigError, match="teacher_model tiny scores the built-in model's tokens"):
        load_teacher(spec, None, None)


def test_a_teacher_pass_is_counted_with_the_teachers_size():
    policy = ModelSize(trunk=100, head=10, trunk_trainable=100, head_trainable=10)
    teacher = ModelSize(trunk=400, head=20, trunk_trainable=0, head_trainable=0)
    tokens = StepTokens(forward=PassTokens(7.0, 3.0), teacher_forward=PassTokens(7.0, 3.0))
    alone = step_flops(StepTokens(forward=PassTokens(7.0, 3.0)), policy)
    assert alone == 2 * 100 * 7 + 2 * 10 * 3
    assert step_flops(tokens, policy, None, teacher) == alone + 2 * 400 * 7 + 2 * 20 * 3


def test_a_teacher_named_by_its_folder_is_loaded_as_it_is(make_spec):
    # the policy's own warm start, saved in the cache, named as the teacher: at the first step the
    # policy is that model, so its samples' log-ratio to the teacher is ~0
    grpo = make_spec("grpo")
    folder = cache_folder(grpo)
    task, lm, _, _ = start_policy(grpo)
    assert (folder / MANIFEST_FILE).is_file()
    spec = make_spec("on_policy_distill", overrides={"teacher_model": str(folder)})
    learner = make_learner(spec, lm, task)
    assert learner.teacher.name == str(folder) and _size(learner.teacher.model) == _size(lm.model)
    assert rl_step(learner, task, list(task.train[:4]))["train/teacher_kl"] == pytest.approx(0.0, abs=1e-4)
