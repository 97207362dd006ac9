"""Held-out evaluation: each prompt's greedy score and the rewards of k samples, and their means.

The sampling generator is seeded by a constant, not by the trial seed, so every arm and seed is
scored on the same draws of the evaluation procedure. The aggregate metrics are the means of
the per-prompt scores, so the two never disagree. With ``train.eval_pass_k`` each prompt's c
correct answers of its k samples also give pass@k and pass^k (``harness.stats.pass_at_k``).
"""

from __future__ import annotations

import statistics

import torch

from harness.engine.generation import generate, mean, verifier_scores
from harness.engine.models import LoadedModel
from harness.engine.spec import (
    GREEDY_METRIC,
    SAMPLED_METRIC,
    PromptScores,
    TrainConfig,
    metric_name,
    pass_metrics,
)
from harness.engine.tasks.base import Item, Task, prompt_ids
from harness.errors import ConfigError
from harness.stats.pass_at_k import pass_at_k, pass_hat_k

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
    return prompt_scores(task, items, greedy, sampled, train, step, benchmark=benchmark)


def prompt_scores(
    task: Task,
    items: list[Item],
    greedy: list[float],
    sampled: list[list[float]],
    train: TrainConfig,
    step: int,
    *,
    benchmark: str | None = None,
) -> PromptScores:
    """The record of an evaluation: each item's greedy score and its samples' mean, variance and
    pass rates, whichever backend generated them."""
    ids = prompt_ids(items)
    return PromptScores(
        step=step,
        prompt_ids=ids,
        greedy=greedy,
        sampled_mean=[mean(rewards) for rewards in sampled],
        sampled_var=[statistics.variance(rewards) if len(rewards) > 1 else 0.0 for rewards in sampled],
        samples=train.eval_samples,
        benchmark=benchmark,
        pass_rates=pass_rates(sampled, ids, train.eval_pass_k, task.name) if train.eval_pass_k else None,
    )


def pass_rates(sampled: list[list[float]], ids: list[str], ks: list[int], task: str) -> dict[str, list[float]]:
    """Per-prompt pass@k and pass^k from each prompt's sampled rewards, which must be 0/1: a
    partial reward has no "correct answer" to count (a ConfigError naming the prompt)."""
    for pid, rewards in zip(ids, sampled):
        bad = next((r for r in rewards if r not in (0.0, 1.0)), None)
        if bad is not None:
            raise ConfigError(
                f"train.eval_pass_k needs 0/1 rewards, but task {task!r} scored prompt {pid} {bad!r}: "
                "drop eval_pass_k or use a 0/1 verifier"
            )
    n = len(sampled[0]) if sampled else 0
    correct = [int(sum(rewards)) for rewards in sampled]
    out: dict[str, list[float]] = {}
    for k in ks:
        at, hat = pass_metrics(k)
        out[at] = [float(x) for x in pass_at_k(n, correct, k)]
        out[hat] = [float(x) for x in pass_hat_k(n, correct, k)]
    return out


def design_mean(scores: PromptScores, values: list[float]) -> float:
    """The mean over the held-out set that ``values`` (one per prompt of ``scores``) estimate: their
    mean, or on a stratified subset (``eval_subset``) each stratum's mean weighted by its share of
    the held-out prompts (Cochran's stratified mean, ``harness.stats.eval_subset``)."""
    if not scores.is_subset:
        return mean(values)
    sizes = scores.stratum_sizes
    by_stratum: dict[int, list[float]] = {}
    for h, value in zip(scores.strata, values):
        by_stratum.setdefault(h, []).append(value)
    return sum(sizes[h] * mean(group) for h, group in by_stratum.items()) / sum(sizes)


def eval_metrics(scores: PromptScores) -> dict[str, float]:
    """The evaluation's aggregate metrics: the means of its per-prompt scores (on an eval subset,
    their stratified mean: :func:`design_mean`), named ``eval/<benchmark>/<metric>`` for a benchmark's."""
    means = {
        GREEDY_METRIC: design_mean(scores, scores.greedy),
        SAMPLED_METRIC: design_mean(scores, scores.sampled_mean),
        **{name: design_mean(scores, values) for name, values in (scores.pass_rates or {}).items()},
    }
    return {metric_name(name, scores.benchmark): value for name, value in means.items()}
