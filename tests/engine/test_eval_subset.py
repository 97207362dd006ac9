"""The eval subset (``TrialSpec.eval_subset``): drawn once from the start evaluation, stratified
by its scores, the same for every seed; intermediate evaluations score it, the last all prompts."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from harness.engine.eval_subset import allocate, draw_subset
from harness.engine.evaluation import eval_metrics
from harness.engine.spec import EvalSubsetConfig, PromptScores
from harness.engine.trial import run_trial


def _start(sampled: list[float], greedy: list[float] | None = None) -> PromptScores:
    n = len(sampled)
    return PromptScores(
        step=0,
        prompt_ids=[f"p{i}" for i in range(n)],
        greedy=greedy or [0.0] * n,
        sampled_mean=sampled,
        sampled_var=[0.0] * n,
        samples=4,
    )


@pytest.mark.parametrize(
    ("total", "sizes", "want"),
    [
        (8, [5, 5, 5, 5], [2, 2, 2, 2]),
        (9, [5, 5, 5, 5], [3, 2, 2, 2]),  # largest remainder, ties to the earlier stratum
        (8, [3, 3, 2, 2], [2, 2, 2, 2]),  # 2.4, 2.4, 1.6, 1.6
        (6, [10, 10], [3, 3]),
        (7, [20, 2, 2], [3, 2, 2]),  # the minimum of 2 taken from the stratum most above its share
    ],
)
def test_allocation_is_proportional_with_at_least_two_per_stratum(total, sizes, want):
    assert allocate(total, sizes) == want
    assert sum(allocate(total, sizes)) == total


def test_strata_follow_start_difficulty_and_the_draw_is_the_seeds():
    start = _start([0.0, 1.0, 0.25, 0.75, 0.5, 0.5, 1.0, 0.0, 0.25, 0.75, 0.5, 1.0])
    config = EvalSubsetConfig(size=0.5, strata=3)
    subset = draw_subset(start, config)
    assert subset.sizes == (4, 4, 4)
    for pid in start.prompt_ids:  # a harder prompt never sits in an easier stratum
        for other in start.prompt_ids:
            if start.sampled_mean[int(pid[1:])] < start.sampled_mean[int(other[1:])]:
                assert subset.strata[pid] <= subset.strata[other]
    assert len(subset.chosen) == 6
    assert [sum(subset.strata[p] == h for p in subset.chosen) for h in range(3)] == [2, 2, 2]
    assert list(subset.chosen) == [p for p in start.prompt_ids if p in subset.chosen]  # the task's order
    assert draw_subset(start, config) == subset  # reproducible
    others = {draw_subset(start, EvalSubsetConfig(size=0.5, strata=3, seed=s)).chosen for s in range(1, 6)}
    assert len(others - {subset.chosen}) >= 1  # the seed draws the sample


def test_a_subset_evaluation_estimates_the_full_mean_by_its_strata():
    scores = PromptScores(
        step=3,
        prompt_ids=["a", "b", "c"],
        greedy=[1.0, 0.0, 1.0],
        sampled_mean=[0.5, 0.0, 1.0],
        sampled_var=[0.0] * 3,
        samples=2,
        strata=[0, 0, 1],
        stratum_sizes=[2, 6],
    )
    assert scores.is_subset
    metrics = eval_metrics(scores)
    assert metrics["eval/accuracy"] == pytest.approx(0.25 * 0.5 + 0.75 * 1.0)
    assert metrics["eval/mean_reward"] == pytest.approx(0.25 * 0.25 + 0.75 * 1.0)
    with pytest.raises(ValidationError, match="within its size"):  # 3 prompts in a stratum of 2
        PromptScores.model_validate({**scores.model_dump(), "strata": [0, 0, 0]})
    with pytest.raises(ValidationError, match="go together"):
        PromptScores.model_validate({**scores.model_dump(), "stratum_sizes": None})


def test_the_spec_refuses_a_subset_that_cannot_be_read(make_spec):
    with pytest.raises(ValidationError, match="at least 2 per stratum"):
        make_spec("grpo", eval_subset={"size": 6, "strata": 4})
    with pytest.raises(ValidationError, match="fewer than all 24"):
        make_spec("grpo", eval_subset={"size": 24, "strata": 2})
    with pytest.raises(ValidationError, match="rollout.backend: hf"):
        make_spec("grpo", eval_subset={"size": 0.5}, rollout={"backend": "vllm"})
    with pytest.raises(ValidationError):
        make_spec("grpo", eval_subset={"size": 0.5, "by": "length"})


def test_without_a_subset_the_trial_id_is_unchanged(make_spec):
    plain = make_spec("grpo")
    assert "eval_subset" not in plain.model_dump()
    assert make_spec("grpo", eval_subset={"size": 0.5}).trial_id != plain.trial_id


def test_intermediate_evaluations_score_the_subset_and_the_last_all(make_spec):
    config = {"size": 0.5, "strata": 2}
    result = run_trial(make_spec("grpo", seed=0, train={"eval_every": 1}, eval_subset=config))
    start, middle, last = result.prompts
    assert [s.step for s in result.prompts] == [0, 1, 2]
    assert len(start.prompt_ids) == len(last.prompt_ids) == 24 and len(middle.prompt_ids) == 12
    assert start.stratum_sizes == middle.stratum_sizes == last.stratum_sizes == [12, 12]
    strata = dict(zip(start.prompt_ids, start.strata))
    assert all(strata[p] == h for p, h in zip(middle.prompt_ids, middle.strata))
    assert [middle.strata.count(h) for h in (0, 1)] == [6, 6]
    by_step = {row["step"]: row for row in result.history}
    assert by_step[1]["eval/accuracy"] == pytest.approx(eval_metrics(middle)["eval/accuracy"])
    whole = run_trial(make_spec("grpo", seed=0, train={"eval_every": 1}))  # the same trial, every prompt each time
    assert (last.greedy, last.sampled_mean) == (whole.prompts[-1].greedy, whole.prompts[-1].sampled_mean)
    assert result.final["eval/accuracy"] == whole.final["eval/accuracy"]
    other = run_trial(make_spec("grpo", seed=1, train={"eval_every": 1}, eval_subset=config))
    assert other.prompts[0].greedy == start.greedy  # the shared start: one subset for every seed
    assert other.prompts[1].prompt_ids == middle.prompt_ids
