"""Held-out evaluation: greedy accuracy, and mean reward over k samples per prompt.

The sampling generator is seeded by a constant, not by the trial seed, so every arm and seed is
scored on the same draws of the evaluation procedure.
"""

from __future__ import annotations

import torch

from harness.engine.models import LoadedModel
from harness.engine.rollout import decode_completions, sample_groups
from harness.engine.spec import TrainConfig
from harness.engine.tasks.base import Item, RewardFn, Task, score_groups

EVAL_SEED = 20_241_129
EVAL_BATCH = 256


@torch.no_grad()
def mean_reward(
    lm: LoadedModel,
    items: list[Item],
    reward: RewardFn,
    *,
    samples: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    greedy: bool = False,
) -> float:
    """Mean verifier score over ``samples`` completions per item (greedy: one is enough)."""
    was_training = lm.model.training
    lm.model.eval()
    total = 0.0
    for start in range(0, len(items), EVAL_BATCH):
        chunk = items[start : start + EVAL_BATCH]
        rollout = sample_groups(
            lm,
            [i.prompt for i in chunk],
            samples,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            generator=generator,
            greedy=greedy,
        )
        total += sum(score_groups(chunk, decode_completions(lm, rollout), samples, reward))
    lm.model.train(was_training)
    return total / (len(items) * samples)


def greedy_accuracy(lm: LoadedModel, items: list[Item], reward: RewardFn, max_new_tokens: int) -> float:
    return mean_reward(lm, items, reward, samples=1, max_new_tokens=max_new_tokens, greedy=True)


def evaluate(lm: LoadedModel, task: Task, train: TrainConfig) -> dict[str, float]:
    items = list(task.eval[: train.max_eval_prompts])
    return {
        "eval/accuracy": greedy_accuracy(lm, items, task.reward, train.max_new_tokens),
        "eval/mean_reward": mean_reward(
            lm,
            items,
            task.reward,
            samples=train.eval_samples,
            max_new_tokens=train.max_new_tokens,
            temperature=train.temperature,
            generator=torch.Generator(device=lm.device).manual_seed(EVAL_SEED),
        ),
    }
