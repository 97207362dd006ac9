"""A reasoning-gym dataset as a study's held-out benchmark, beside a task of another kind."""

from __future__ import annotations

from harness.algorithms import resolve_algorithm
from harness.engine.spec import BenchmarkConfig, TrialSpec
from harness.engine.task_config import TaskConfig
from harness.engine.tasks import build_task
from harness.engine.tasks.benchmarks import benchmark_task


def test_a_reasoning_gym_benchmark_scores_its_own_held_out_prompts_with_its_verifier():
    study_task = build_task(TaskConfig(reasoning_gym={"dataset": "chain_sum"}, n_train=40, n_eval=8))
    config = BenchmarkConfig(
        name="arithmetic",
        task={"reasoning_gym": {"dataset": "basic_arithmetic", "config": {"max_terms": 2}}, "n_eval": 12},
    )
    bench = benchmark_task(config, study_task)
    assert bench.name == "arithmetic" and bench.train == () and len(bench.eval) == 12
    assert not {i.prompt for i in bench.eval} & {i.prompt for i in study_task.train}
    item = bench.eval[0]
    assert item.prompt.startswith("Calculate") and "<answer></answer>" in item.prompt
    assert bench.reward(item, f"<answer>{item.answer}</answer>") == 1.0
    assert bench.reward(item, "<answer>no</answer>") == 0.0


def test_a_spec_without_reasoning_gym_dumps_and_hashes_as_before_it_existed():
    spec = TrialSpec(
        arm="grpo",
        algorithm=resolve_algorithm("grpo"),
        benchmarks=[BenchmarkConfig(name="sums", task={"name": "addition", "n_eval": 16})],
    )
    dumped = spec.model_dump(mode="json")
    assert "reasoning_gym" not in dumped["task"] and "reasoning_gym" not in dumped["benchmarks"][0]["task"]
    with_gym = spec.model_copy(update={"task": TaskConfig(reasoning_gym={"dataset": "chain_sum"})})
    assert with_gym.model_dump(mode="json")["task"]["reasoning_gym"]["dataset"] == "chain_sum"
    assert with_gym.trial_id != spec.trial_id
