"""A trial run in segments between its compute looks (pause after a look's evaluation, resume from
its checkpoint) gives bitwise the numbers of the same trial run whole; the looks are evaluated at
the first step that reaches each point; a checkpoint that is not this trial's is refused in one line."""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import ValidationError

from harness.engine.resume import FORMAT, checkpoint_path, looks_crossed, looks_reached
from harness.engine.spec import LookPoints, TrialResult
from harness.engine.trial import run_trial
from harness.errors import ConfigError

#: what may differ between two runs of one trial: the wall clock
CLOCK = ("time/", "compute/wall_s")


def _timeless(history: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if not k.startswith(CLOCK)} for row in history]


def _training(history: list[dict]) -> list[dict]:
    """The steps' training metrics, without the evaluations and the look tags."""
    return [{k: v for k, v in row.items() if not k.startswith(("eval/", "look"))} for row in _timeless(history)[1:]]


def _numbers(result: TrialResult) -> tuple:
    """Everything a trial measured but the wall clock: history rows, per-prompt scores, final metrics."""
    final = {k: v for k, v in result.final.items() if not k.startswith(CLOCK)}
    return _timeless(result.history), [scores.model_dump() for scores in result.prompts], final


def _same(a: TrialResult, b: TrialResult) -> bool:
    """Bitwise equal (NaN equal to NaN: explained variance may be one)."""
    return repr(_numbers(a)) == repr(_numbers(b))


def _in_segments(spec, folder) -> tuple[TrialResult, TrialResult, TrialResult]:
    first = run_trial(spec, folder, pause_after_look=0)
    second = run_trial(spec, folder, resume_after_look=0, pause_after_look=1)
    last = run_trial(spec, folder, resume_after_look=1)
    return first, second, last


def _check_segments(whole: TrialResult, segments: tuple[TrialResult, TrialResult, TrialResult]) -> None:
    first, second, last = segments
    assert (first.paused_at_look, second.paused_at_look, last.paused_at_look) == (0, 1, None)
    assert _same(whole, last)
    for part in (first, second):  # each pause is the whole trial up to its look, its own look row last
        rows = len(part.history)
        assert _timeless(part.history) == _timeless(whole.history[:rows])
        assert part.prompts == whole.prompts[: len(part.prompts)]
        assert part.final["eval/accuracy"] == part.history[-1]["eval/accuracy"]
    assert "look" in first.history[-1] and second.history[-1]["look"] == 1


def test_looks_are_evaluated_at_the_first_step_reaching_each_point_and_segments_give_the_whole_trial(
    make_spec, tmp_path
):
    axis = "compute/generated_tokens"
    plain = run_trial(make_spec("grpo", train={"steps": 4}))
    values = [row[axis] for row in plain.history]
    # look 0 between steps 1 and 2, look 1 exactly at step 3, look 2 past the last step: never reached
    at = [(values[1] + values[2]) / 2, values[3], values[4] + 1.0]
    spec = make_spec("grpo", train={"steps": 4}, looks={"axis": axis, "at": at})
    whole = run_trial(spec)
    assert [row.get("look") for row in whole.history] == [None, None, 0, 1, None]
    evaluated = [row["step"] for row in whole.history if "eval/accuracy" in row]
    assert evaluated == [0, 2, 3, 4]  # eval_every 0: the start, the looks and the last step
    assert [scores.step for scores in whole.prompts] == evaluated
    assert _training(whole.history) == _training(plain.history)  # the looks' evaluations change no training
    segments = _in_segments(spec, tmp_path)
    _check_segments(whole, segments)
    assert checkpoint_path(tmp_path, 0).is_file() and checkpoint_path(tmp_path, 1).is_file()
    assert not list((tmp_path / "resume").glob("*.tmp"))


@pytest.mark.parametrize(
    "arm, sections",
    [
        # a critic (value head), and one step reaching two looks (1.5 and 2): look 1's segment pauses at once
        ("ppo", {"looks": {"axis": "step", "at": [1.5, 2, 4]}}),
        # a KL term in the reward, a LoRA adapter with dropout (torch's global generator), a placebo's shuffle
        (
            "rloo",
            {
                "looks": {"axis": "step", "at": [2, 3, 4]},
                "model": {"lora": {"r": 4, "alpha": 8, "dropout": 0.1}},
                "train": {"placebo_reward": True},
            },
        ),
        ("dpo", {"looks": {"axis": "step", "at": [1, 3, 4]}}),
    ],
)
def test_a_trial_in_segments_gives_bitwise_the_whole_trial(make_spec, tmp_path, arm, sections):
    overrides = {"kl_placement": "reward", "kl_coef": 0.5, "kl_estimator": "k1"} if arm == "rloo" else None
    train = {"steps": 4, **sections.pop("train", {})}
    spec = make_spec(arm, overrides=overrides, train=train, **sections)
    whole = run_trial(spec)
    segments = _in_segments(spec, tmp_path)
    _check_segments(whole, segments)
    if arm == "ppo":
        assert [row.get("look") for row in whole.history] == [None, None, 1, None, 2]
        assert segments[1].history == segments[0].history  # look 1 was reached with look 0: nothing ran


def test_a_pause_after_a_look_the_last_step_reaches_first_ends_the_trial(make_spec, tmp_path):
    spec = make_spec("grpo", looks={"axis": "step", "at": [3, 4, 5]})  # two steps: no look is reached
    result = run_trial(spec, tmp_path, pause_after_look=0)
    assert result.paused_at_look is None and result.history[-1]["step"] == 2
    assert not (tmp_path / "resume").exists()
    assert _same(result, run_trial(spec))


def test_a_checkpoint_that_is_not_this_trials_is_refused_before_any_work(make_spec, tmp_path):
    spec = make_spec("grpo", looks={"axis": "step", "at": [1, 2, 4]}, train={"steps": 4})
    run_trial(spec, tmp_path, pause_after_look=0)
    saved = checkpoint_path(tmp_path, 0)
    good = saved.read_bytes()

    with pytest.raises(ConfigError, match=r"no checkpoint .*look_1\.pt; run the segment that pauses after look 1"):
        run_trial(spec, tmp_path, resume_after_look=1)
    other = make_spec("grpo", seed=1, looks={"axis": "step", "at": [1, 2, 4]}, train={"steps": 4})
    with pytest.raises(ConfigError, match=f"holds trial '{spec.trial_id}' after look 0, not trial {other.trial_id}"):
        run_trial(other, tmp_path, resume_after_look=0)
    checkpoint_path(tmp_path, 1).write_bytes(good)  # look 0's state under look 1's name
    with pytest.raises(ConfigError, match="after look 0, not trial .* after look 1"):
        run_trial(spec, tmp_path, resume_after_look=1)

    payload = torch.load(saved, weights_only=True)
    payload["header"]["format"] = FORMAT + 1
    torch.save(payload, saved)
    with pytest.raises(ConfigError, match=f"format {FORMAT + 1} and this harness reads format {FORMAT}"):
        run_trial(spec, tmp_path, resume_after_look=0)
    payload["header"]["format"] = FORMAT
    payload["policy"].popitem()
    torch.save(payload, saved)
    with pytest.raises(ConfigError, match="does not fit this trial's learner .*policy's trained parameters"):
        run_trial(spec, tmp_path, resume_after_look=0)
    payload["history"] = payload["history"][:-1]
    torch.save(payload, saved)
    with pytest.raises(ConfigError, match="not a whole checkpoint .*its history ends at step 0, not at its step 1"):
        run_trial(spec, tmp_path, resume_after_look=0)
    del payload["optimizer"]
    torch.save(payload, saved)
    with pytest.raises(ConfigError, match="not a whole checkpoint .*lacks optimizer"):
        run_trial(spec, tmp_path, resume_after_look=0)
    for corrupt in (good[: len(good) // 2], b"not a checkpoint"):
        saved.write_bytes(corrupt)
        with pytest.raises(ConfigError, match=r"cannot be read as a checkpoint .*pause_after_look=0\) again$"):
            run_trial(spec, tmp_path, resume_after_look=0)


@pytest.mark.parametrize(
    "arguments, sections, error",
    [
        ({"pause_after_look": 0}, {}, "need looks in the trial spec"),
        ({"pause_after_look": 2}, {}, "pause_after_look 2: the trial has looks 0..2 and look 2 is the budget"),
        ({"resume_after_look": -1}, {}, "name a look from 0 to 1"),
        ({"pause_after_look": 0, "resume_after_look": 1}, {}, "pause_after_look 0 is not after resume_after_look 1"),
        ({"pause_after_look": 0, "folder": None}, {}, "need the trial's folder"),
        ({"pause_after_look": 0}, {"rollout": {"backend": "vllm"}}, "rollout.backend vllm cannot be paused"),
    ],
)
def test_pause_and_resume_arguments_are_checked_before_any_work(make_spec, tmp_path, arguments, sections, error):
    looks = {} if "need looks" in error else {"looks": {"axis": "step", "at": [1, 2, 3]}}
    spec = make_spec("grpo", **looks, **sections)
    folder = arguments.pop("folder", tmp_path)
    with pytest.raises(ConfigError, match=error):
        run_trial(spec, folder, **arguments)
    assert not (tmp_path / "resume").exists()


def test_a_row_reaches_the_looks_at_or_past_their_points():
    looks = LookPoints(axis="compute/flops", at=[10.0, 20.0, 30.0])
    reached = [looks_reached(looks, {"compute/flops": x}) for x in (0.0, 9.9, 10.0, 25.0, 30.0, 99.0)]
    assert reached == [0, 0, 1, 2, 3, 3]
    assert looks_crossed(looks, {"compute/flops": 5.0}, {"compute/flops": 21.0}) == range(0, 2)
    assert not looks_crossed(looks, {"compute/flops": 10.0}, {"compute/flops": 19.0})
    assert looks_reached(None, {"compute/flops": 99.0}) == 0


@pytest.mark.parametrize(
    "looks, error",
    [
        ({"axis": "step", "at": []}, "at least 1 item"),
        ({"axis": "step", "at": [1, 1]}, "must rise strictly: 1.0 follows 1.0"),
        ({"axis": "step", "at": [2, 1]}, "must rise strictly"),
        ({"axis": "step", "at": [0, 1]}, "holds 0.0: every point must be a number > 0"),
        ({"axis": "step", "at": [-1]}, "holds -1.0"),
        ({"axis": "step", "at": [1, math.inf]}, r"at\.1\n  Input should be a finite number"),
        ({"axis": "step", "at": [math.nan]}, "finite number"),
        ({"axis": "tokens/generated", "at": [1]}, "compute/flops"),
        ({"axis": "step", "at": [1], "every": 2}, "every"),
    ],
)
def test_look_points_are_checked(looks, error):
    with pytest.raises(ValidationError, match=error):
        LookPoints(**looks)


def test_a_spec_without_looks_keeps_its_id_and_a_program_trainer_takes_none(make_spec):
    plain = make_spec("grpo")
    assert "looks" not in plain.model_dump() and plain.model_dump() == make_spec("grpo", looks=None).model_dump()
    looked = make_spec("grpo", looks={"axis": "step", "at": [1, 2]})
    assert looked.trial_id != plain.trial_id and looked.model_dump()["looks"]["at"] == [1.0, 2.0]
    with pytest.raises(ValidationError, match="looks: trainer trl cannot be evaluated at compute looks"):
        make_spec("grpo", looks={"axis": "step", "at": [1]}, trainer="trl")


def test_a_result_stored_before_pauses_existed_still_loads():
    old = {"trial_id": "grpo-s0-873258b2", "final": {"eval/accuracy": 0.5}, "history": [{"step": 0}]}
    result = TrialResult.model_validate(old)
    assert result.paused_at_look is None
    assert TrialResult.model_validate_json(result.model_dump_json()) == result


@pytest.mark.slow
def test_a_tool_calling_trial_in_segments_gives_bitwise_the_whole_trial(make_tool_spec, tmp_path):
    spec = make_tool_spec(
        "grpo", {"steps": 2, "prompts_per_step": 2, "max_eval_prompts": 4}, looks={"axis": "step", "at": [1, 2]}
    )
    whole = run_trial(spec)
    paused = run_trial(spec, tmp_path, pause_after_look=0)
    resumed = run_trial(spec, tmp_path, resume_after_look=0)
    assert paused.paused_at_look == 0 and _same(whole, resumed)
    assert _timeless(paused.history) == _timeless(whole.history[:2])
    assert all(row["tools/calls_per_episode"] > 0 for row in whole.history[1:])  # the episodes called the tool
