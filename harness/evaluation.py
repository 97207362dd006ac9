"""Held-out evaluation: greedy accuracy, and mean reward over k samples per prompt.

The sampling generator is seeded by a constant, not by the trial seed, so every arm and seed is
scored on the same draws of the evaluation procedure.
"""

from __future__ import annotations

import torch

from harness.models import LoadedModel
from harness.rollout import decode_completions, encode_prompts, sample
from harness.spec import TrainConfig
from harness.tasks.base import Task

EVAL_SEED = 20_241_129
EVAL_BATCH = 256


@torch.no_grad()
def evaluate(lm: LoadedModel, task: Task, train: TrainConfig) -> dict[str, float]:
    items = list(task.eval[: train.max_eval_prompts])
    was_training = lm.model.training
    lm.model.eval()
    generator = torch.Generator(device=lm.device).manual_seed(EVAL_SEED)
    correct = rewards = 0.0
    for start in range(0, len(items), EVAL_BATCH):
        chunk = items[start : start + EVAL_BATCH]
        ids, mask = encode_prompts(lm, [i.prompt for i in chunk])
        greedy = sample(lm, ids, mask, max_new_tokens=train.max_new_tokens, temperature=1.0, generator=None, greedy=True)
        correct += sum(task.reward(i, t) for i, t in zip(chunk, decode_completions(lm, greedy)))
        k = train.eval_samples
        sampled = sample(
            lm,
            ids.repeat_interleave(k, 0),
            mask.repeat_interleave(k, 0),
            max_new_tokens=train.max_new_tokens,
            temperature=train.temperature,
            generator=generator,
        )
        texts = decode_completions(lm, sampled)
        rewards += sum(task.reward(chunk[j // k], t) for j, t in enumerate(texts)) / k
    lm.model.train(was_training)
    return {"eval/accuracy": correct / len(items), "eval/mean_reward": rewards / len(items)}
