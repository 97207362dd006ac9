"""A program's handed-in scores (``trainer.scores: program``) are checked before they count: only
the steps the study evaluates, every value in its metric's range (``read_scores`` on files written
here)."""

from __future__ import annotations

import json

import pytest

from harness.engine.spec import TrainConfig
from harness.trainers.faults import ProgramTrialError
from harness.trainers.handed_scores import evaluated_steps, read_scores
from harness.trainers.program_metrics import read_metrics

IDS = ["p0", "p1"]


def row(step: int, prompt_id: str, **values) -> dict:
    return {
        "step": step,
        "prompt_id": prompt_id,
        "benchmark": None,
        "greedy": 1.0,
        "sampled_mean": 0.5,
        "sampled_var": 0.25,
        "samples": 2,
        **values,
    }


def scores_of(tmp_path, steps: list[int], train: TrainConfig, **values):
    path = tmp_path / "scores.jsonl"
    rows = [row(step, pid, **values) for step in steps for pid in IDS]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return read_scores(path, {None: IDS}, train)


def refusal(tmp_path, steps: list[int], train: TrainConfig, **values) -> str:
    with pytest.raises(ProgramTrialError) as caught:
        scores_of(tmp_path, steps, train, **values)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_the_evaluated_steps_are_the_builtin_trials():
    assert evaluated_steps(TrainConfig(steps=2, eval_every=0)) == [0, 2]
    assert evaluated_steps(TrainConfig(steps=25, eval_every=10)) == [0, 10, 20, 25]
    assert evaluated_steps(TrainConfig(steps=20, eval_every=10)) == [0, 10, 20]


def test_a_step_past_the_budget_is_refused_naming_it_and_the_allowed_ones(tmp_path):
    """The issue's case: with train.steps 2, a score at step 10^12 decided the final accuracy."""
    message = refusal(tmp_path, [0, 2, 10**12], TrainConfig(steps=2, eval_every=0))
    assert f"step {10**12} is not an evaluated step" in message
    assert message.endswith("score only steps 0, 2")


def test_a_step_off_the_evaluation_schedule_is_refused(tmp_path):
    train = TrainConfig(steps=25, eval_every=10)
    assert "score only steps 0, 10, 20, 25" in refusal(tmp_path, [0, 5, 25], train)
    long = TrainConfig(steps=2000, eval_every=10)
    message = refusal(tmp_path, [0, 15, 2000], long)
    assert "step 15 is not an evaluated step" in message
    assert "every multiple of 10 up to 2000" in message
    assert [s.step for s in scores_of(tmp_path, [0, 10, 20, 2000], long)] == [0, 10, 20, 2000]


def test_scores_on_the_schedule_are_read_step_by_step(tmp_path):
    scores = scores_of(tmp_path, [0, 10, 25], TrainConfig(steps=25, eval_every=10))
    assert [(s.step, s.greedy, s.sampled_mean, s.samples) for s in scores] == [
        (0, [1.0, 1.0], [0.5, 0.5], 2),
        (10, [1.0, 1.0], [0.5, 0.5], 2),
        (25, [1.0, 1.0], [0.5, 0.5], 2),
    ]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"sampled_mean": 5.0}, "sampled_mean is 5.0, outside [0, 1]"),
        ({"sampled_mean": -0.5}, "sampled_mean is -0.5, outside [0, 1]"),
        ({"greedy": 1.5}, "greedy is 1.5, outside [0, 1]"),
        # two scores in [0, 1] with mean 0.5 spread at most (0 and 1): a sample variance of 0.5
        ({"sampled_var": 0.75}, "sampled_var is 0.75, outside [0, 0.5]"),
        ({"sampled_mean": 1.0, "sampled_var": 0.1}, "sampled_var is 0.1, outside [0, 0]"),
        ({"samples": 1, "sampled_var": 0.25}, "sampled_var is 0.25, outside [0, 0]"),
        ({"sampled_var": -0.1}, "sampled_var is -0.1, outside [0, 0.5]"),
    ],
)
def test_every_handed_in_value_lies_in_its_metrics_range(tmp_path, values, expected):
    assert expected in refusal(tmp_path, [0, 2], TrainConfig(steps=2, eval_every=0), **values)


def test_values_at_the_edges_of_their_ranges_are_believed(tmp_path):
    train = TrainConfig(steps=2, eval_every=0)
    assert scores_of(tmp_path, [0, 2], train, sampled_mean=0.5, sampled_var=0.5)[1].sampled_var == [0.5, 0.5]
    # four scores 0, 0, 1, 1: mean 0.5, sample variance 1/3, the most four scores in [0, 1] can spread
    assert scores_of(tmp_path, [0, 2], train, samples=4, sampled_var=1 / 3)[0].samples == 4
    assert scores_of(tmp_path, [0, 2], train, greedy=0.0, sampled_mean=0.0, sampled_var=0.0)[0].greedy == [0.0, 0.0]


def test_metrics_past_the_budget_are_refused(tmp_path):
    """A metrics row past train.steps would be the last history row: its compute totals the trial's."""
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"step": 2, "compute/flops": 1e9}) + "\n")
    assert read_metrics(path, 2) == {2: {"compute/flops": 1e9}}
    path.write_text(json.dumps({"step": 10**12, "compute/flops": 1.0}) + "\n")
    with pytest.raises(ProgramTrialError, match=f"line 1: step {10**12} is past train.steps 2; report steps 0 to 2"):
        read_metrics(path, 2)
