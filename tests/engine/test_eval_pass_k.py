"""pass@k and pass^k as evaluation metrics: per prompt, their means in the trial's metrics."""

from __future__ import annotations

import hashlib
import json

import pytest
from pydantic import ValidationError

from harness.algorithms.config import identity
from harness.engine.evaluation import eval_metrics, pass_rates
from harness.engine.generation import mean
from harness.engine.spec import PromptScores, TrainConfig
from harness.engine.trial import run_trial
from harness.errors import ConfigError
from harness.stats import pass_at_k, pass_hat_k


def test_pass_rates_per_prompt_and_their_means():
    sampled = [[1.0, 0.0, 0.0, 1.0], [0.0] * 4, [1.0] * 4]
    rates = pass_rates(sampled, ["a", "b", "c"], [1, 2], "t")
    assert rates["eval/pass@2"] == pytest.approx([pass_at_k(4, 2, 2), 0.0, 1.0])
    assert rates["eval/pass^2"] == pytest.approx([pass_hat_k(4, 2, 2), 0.0, 1.0])
    assert rates["eval/pass@1"] == pytest.approx([0.5, 0.0, 1.0]) == rates["eval/pass^1"]
    scores = PromptScores(
        step=0,
        prompt_ids=["a", "b", "c"],
        greedy=[1.0, 0.0, 1.0],
        sampled_mean=[0.5, 0.0, 1.0],
        sampled_var=[1 / 3, 0.0, 0.0],
        samples=4,
        pass_rates=rates,
    )
    metrics = eval_metrics(scores)
    assert metrics["eval/pass@2"] == pytest.approx(mean(rates["eval/pass@2"]))
    assert metrics["eval/pass@1"] == pytest.approx(metrics["eval/mean_reward"])  # pass@1 is the sampled mean


def test_partial_rewards_are_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"needs 0/1 rewards, but task 't' scored prompt b 0\.5"):
        pass_rates([[1.0, 0.0], [0.5, 1.0]], ["a", "b"], [2], "t")


def test_k_above_eval_samples_is_a_one_line_error():
    with pytest.raises(ValidationError, match="k=8 but eval_samples is 4"):
        TrainConfig(eval_samples=4, eval_pass_k=[1, 8])
    with pytest.raises(ValidationError, match="repeats"):
        TrainConfig(eval_samples=4, eval_pass_k=[2, 2])


def test_trial_ids_do_not_change_unless_pass_k_is_asked(make_spec):
    plain = make_spec("grpo", seed=0)
    payload = plain.model_dump(mode="json", exclude={"cache_dir", "study", "algorithm"})
    del payload["train"]["eval_pass_k"]  # the spec as it was before the field existed
    payload["model"] = plain.model.keyed()  # chat_template: auto hashed as true, its default then
    payload["algorithm"] = identity(plain.algorithm)
    before = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]
    assert plain.config_hash() == before
    assert make_spec("grpo", seed=0, train={"eval_pass_k": [2]}).config_hash() != before


def test_a_trial_records_pass_rates_and_their_means(make_spec):
    spec = make_spec(
        "grpo",
        seed=0,
        task={"reward": "exact_match"},
        train={"eval_samples": 4, "eval_pass_k": [1, 4], "max_eval_prompts": 12},
    )
    result = run_trial(spec)
    last = result.prompts[-1]
    assert set(last.pass_rates) == {"eval/pass@1", "eval/pass^1", "eval/pass@4", "eval/pass^4"}
    correct = [round(m * 4) for m in last.sampled_mean]  # c = sampled_mean x samples on 0/1 rewards
    assert last.pass_rates["eval/pass@4"] == pytest.approx(list(pass_at_k(4, correct, 4)))
    assert result.final["eval/pass^4"] == pytest.approx(mean(last.pass_rates["eval/pass^4"]))
    assert "eval/pass@1" in result.history[0]
