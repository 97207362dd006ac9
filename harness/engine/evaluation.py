"""Held-out evaluation: each prompt's greedy score and the rewards of k samples, and their means.

The sampling generator is seeded by a constant, not by the trial seed, so every arm and seed is
scored on the same draws of the evaluation procedure. The aggregate metrics are the means of
the per-prompt scores, so the two never disagree.
"""

from __future__ import annotations

import statistics

import torch

from harness.engine.generation import generate, mean, verifier_scores
from harness.engine.models import LoadedModel
from harness.engine.spec import GREEDY_METRIC, SAMPLED_METRIC, PromptScores, TrainConfig, benchmark_metric
from harness.engine.tasks.base import Item, Task, prompt_ids

EVAL_SEED = 20_241_129
EVAL_BATCH = 256


@torch.no_grad()
def item_rewards(
    lm: LoadedModel,
    task: Task,
    items: list[Item],
    *,
    samples: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    greedy: bool = False,
) -> list[list[float]]:
    """The verifier's score of each of ``samples`` completions (or tool-calling episodes, scored
    on their final turn) per item, one list per item."""
    was_training = lm.model.training
    lm.model.eval()
    per_item: list[list[float]] = []
    for start in range(0, len(items), EVAL_BATCH):
        chunk = items[start : start + EVAL_BATCH]
        generation = generate(
            lm,
            task,
            [i.prompt for i in chunk],
            samples,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            generator=generator,
            greedy=greedy,
        )
        scores = verifier_scores(task, chunk, generation, samples)
        per_item += [scores[j : j + samples] for j in range(0, len(scores), samples)]
    lm.model.train(was_training)
    return per_item


def greedy_scores(lm: LoadedModel, task: Task, items: list[Item], max_new_tokens: int) -> list[float]:
    """Each item's score of its one greedy completion."""
    rewards = item_rewards(lm, task, items, samples=1, max_new_tokens=max_new_tokens, greedy=True)
    return [score for (score,) in rewards]


def greedy_accuracy(lm: LoadedModel, task: Task, items: list[Item], max_new_tokens: int) -> float:
    return mean(greedy_scores(lm, task, items, max_new_tokens))


def evaluate(
    lm: LoadedModel, task: Task, train: TrainConfig, step: int, *, benchmark: str | None = None
) -> PromptScores:
    """Score every held-out prompt (``train.max_eval_prompts`` of them) at ``step``; ``benchmark``
    names a benchmark's task (None: the study's own). Each call starts its own generator, so a
    benchmark scored after the study's task leaves the task's draws as they were."""
    items = list(task.eval[: train.max_eval_prompts])
    greedy = greedy_scores(lm, task, items, train.max_new_tokens)
    sampled = item_rewards(
        lm,
        task,
        items,
        samples=train.eval_samples,
        max_new_tokens=train.max_new_tokens,
        temperature=train.temperature,
        generator=torch.Generator(device=lm.device).manual_seed(EVAL_SEED),
    )
    return PromptScores(
        step=step,
        prompt_ids=prompt_ids(items),
        greedy=greedy,
        sampled_mean=[mean(rewards) for rewards in sampled],
        sampled_var=[statistics.variance(rewards) if len(rewards) > 1 else 0.0 for rewards in sampled],
        samples=train.eval_samples,
        benchmark=benchmark,
    )


def eval_metrics(scores: PromptScores) -> dict[str, float]:
    """The evaluation's aggregate metrics: the means of its per-prompt scores, named
    ``eval/<benchmark>/<metric>`` for a benchmark's."""
    return {
        metric_name(GREEDY_METRIC, scores.benchmark): mean(scores.greedy),
        metric_name(SAMPLED_METRIC, scores.benchmark): mean(scores.sampled_mean),
    }


def metric_name(metric: str, benchmark: str | None) -> str:
    """``eval/accuracy`` as the study's task names it, or ``eval/<benchmark>/accuracy``."""
    return metric if benchmark is None else benchmark_metric(benchmark, metric.removeprefix("eval/"))
