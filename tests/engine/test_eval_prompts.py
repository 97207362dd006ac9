"""Every evaluation keeps each held-out prompt's scores; the eval metrics are their means."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from harness.engine.generation import mean
from harness.engine.spec import PromptScores
from harness.engine.tasks import build_task
from harness.engine.tasks.base import Item, prompt_id, prompt_ids
from harness.engine.trial import run_trial


def test_prompt_ids_come_from_the_text_alone_and_repeats_stay_distinct():
    assert prompt_id(Item("07+35=", "042")) == "4429cb03ae0a"  # pinned: the same in every process
    assert prompt_id(Item("07+35=", "other", "solution")) == "4429cb03ae0a"
    same, other = Item("a", "1"), Item("b", "2")
    assert prompt_ids([same, other, same]) == [prompt_id(same), prompt_id(other), prompt_id(same) + "#2"]


@pytest.mark.parametrize(
    "change, says",
    [({"greedy": [1.0]}, "one value per prompt id"), ({"prompt_ids": ["a", "a"]}, "prompt ids repeat")],
)
def test_prompt_scores_refuse_misaligned_or_repeated_ids(change, says):
    fields = {
        "step": 0,
        "prompt_ids": ["a", "b"],
        "greedy": [1.0, 0.0],
        "sampled_mean": [0.5, 0.5],
        "sampled_var": [0.5, 0.5],
        "samples": 2,
        **change,
    }
    with pytest.raises(ValidationError, match=says):
        PromptScores(**fields)


def test_every_evaluation_keeps_per_prompt_scores_whose_means_are_the_metrics(make_spec):
    spec = make_spec("grpo", seed=0, train={"eval_every": 1})
    result = run_trial(spec)
    evaluations = {row["step"]: row for row in result.history if "eval/accuracy" in row}
    assert [s.step for s in result.prompts] == sorted(evaluations) == [0, 1, 2]
    task = build_task(spec.task)
    k = spec.train.eval_samples
    for scores in result.prompts:
        assert scores.prompt_ids == [prompt_id(item) for item in task.eval]
        assert scores.samples == k
        row = evaluations[scores.step]
        assert row["eval/accuracy"] == mean(scores.greedy)
        assert row["eval/mean_reward"] == mean(scores.sampled_mean)
        for m, var in zip(scores.sampled_mean, scores.sampled_var):
            assert 0.0 <= m <= 1.0 and 0.0 <= var <= k / (4 * (k - 1)) + 1e-12
    assert result.final["eval/accuracy"] == mean(result.prompts[-1].greedy)
    assert result.final["eval/mean_reward_start"] == mean(result.prompts[0].sampled_mean)

    other = run_trial(make_spec("grpo", seed=1, train={"max_eval_prompts": 10, "eval_samples": 1}))
    assert [s.step for s in other.prompts] == [0, 2]  # the start and the last step
    assert other.prompts[0].samples == 1 and other.prompts[0].sampled_var == [0.0] * 10
    assert other.prompts[0].prompt_ids == result.prompts[0].prompt_ids[:10]
    assert other.prompts[0].greedy == result.prompts[0].greedy[:10]  # the shared warm start, scored alike
