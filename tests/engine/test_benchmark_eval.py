"""Held-out benchmarks: every evaluation scores each one's prompts, recorded per prompt under
``eval/<benchmark>/...``, and the study task's own numbers are what they were without them."""

from __future__ import annotations

import base64
import json
import zlib
from dataclasses import replace

import pytest

from harness.engine.generation import mean
from harness.engine.spec import BenchmarkConfig
from harness.engine.task_config import TaskConfig
from harness.engine.tasks import build_task
from harness.engine.tasks.base import prompt_id
from harness.engine.tasks.benchmarks import benchmark_task
from harness.engine.trial import run_trial
from harness.errors import ConfigError
from harness.tracking.prompt_scores import decode_scores, encode_scores, long_columns

BENCHMARKS = [
    {"name": "add_2digit", "task": {"name": "addition", "min_digits": 2, "max_digits": 2, "n_eval": 12}},
    {"name": "add_3digit", "task": {"name": "addition", "min_digits": 3, "max_digits": 3, "n_eval": 8}},
]


def test_a_benchmark_keeps_only_held_out_prompts_the_study_never_trained_on():
    study = build_task(TaskConfig(name="addition", max_digits=2, n_train=300, n_eval=24))
    config = BenchmarkConfig(name="add", task={"name": "addition", "max_digits": 2, "n_train": 300, "n_eval": 400})
    bench = benchmark_task(config, study)
    trained = {item.prompt for item in study.train}
    assert bench.train == () and bench.name == "add" and bench.alphabet == study.alphabet
    assert not {item.prompt for item in bench.eval} & trained
    full = build_task(config.task_config())
    assert len(bench.eval) == sum(item.prompt not in trained for item in full.eval) < 400


def test_a_benchmark_with_only_training_prompts_or_a_bad_task_is_refused_naming_it():
    study = build_task(TaskConfig(name="addition", max_digits=1, n_train=80, n_eval=20))
    everything = replace(study, train=study.train + study.eval, eval=())  # trains on the whole 1-digit space
    one_digit = BenchmarkConfig(
        name="one_digit", task={"name": "addition", "max_digits": 1, "n_train": 20, "n_eval": 80}
    )
    assert benchmark_task(one_digit, study).eval  # the study's held-out prompts remain
    with pytest.raises(ConfigError, match="^benchmarks: one_digit: all 80 of its held-out prompts are training"):
        benchmark_task(one_digit, everything)
    big = BenchmarkConfig(name="big", task={"name": "addition", "max_digits": 1, "n_eval": 500})
    with pytest.raises(ConfigError, match=r"^benchmarks: big: task addition: asked for"):
        benchmark_task(big, study)


@pytest.mark.slow
def test_a_trial_records_each_benchmarks_per_prompt_scores_and_its_metrics(make_spec):
    plain = run_trial(make_spec("grpo", seed=0, train={"eval_every": 1}))
    spec = make_spec("grpo", seed=0, train={"eval_every": 1}, benchmarks=BENCHMARKS)
    result = run_trial(spec)
    study_task = build_task(spec.task)
    by_benchmark = {}
    for scores in result.prompts:
        by_benchmark.setdefault(scores.benchmark, []).append(scores)
    assert set(by_benchmark) == {None, "add_2digit", "add_3digit"}
    for name, config in zip(("add_2digit", "add_3digit"), spec.benchmarks):
        bench = benchmark_task(config, study_task)
        assert [s.step for s in by_benchmark[name]] == [0, 1, 2]
        for scores in by_benchmark[name]:
            assert scores.prompt_ids == [prompt_id(item) for item in bench.eval]
            row = next(r for r in result.history if r["step"] == scores.step)
            assert row[f"eval/{name}/accuracy"] == mean(scores.greedy)
            assert row[f"eval/{name}/mean_reward"] == mean(scores.sampled_mean)
        assert result.final[f"eval/{name}/accuracy"] == mean(by_benchmark[name][-1].greedy)
    # the study task's numbers do not move: its evaluation draws from its own generator
    assert [s.model_dump() for s in by_benchmark[None]] == [s.model_dump() for s in plain.prompts]
    assert {k: v for k, v in result.final.items() if "/add_" not in k and not k.startswith("time/")} == {
        k: v for k, v in plain.final.items() if not k.startswith("time/")
    }
    # stored and read back; the long layout names a benchmark's rows eval/<benchmark>/<metric>
    decoded = decode_scores(encode_scores(result.prompts), "here")
    assert decoded == result.prompts
    metrics = set(long_columns(decoded)["metric"])
    assert {"eval/accuracy", "eval/add_3digit/accuracy", "eval/add_3digit/mean_reward.sample_var"} <= metrics


def test_a_spec_without_benchmarks_hashes_and_stores_as_before(make_spec):
    spec = make_spec("grpo")
    assert "benchmarks" not in spec.model_dump() and "benchmarks" not in spec.model_dump(mode="json")
    assert make_spec("grpo", benchmarks=BENCHMARKS).config_hash() != spec.config_hash()
    scores = run_trial(make_spec("grpo", train={"max_eval_prompts": 3})).prompts
    stored = json.loads(zlib.decompress(base64.b64decode(encode_scores(scores).removeprefix("ps1:"))))
    assert all("benchmark" not in evaluation for evaluation in stored)
