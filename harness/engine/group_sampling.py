"""A step's groups: ``group_size`` samples of each prompt, scored, in as many draws as the
algorithm's sampling part (``harness.algorithms.sampling``) asks for; one loop for every part.

The first draw is the step's own prompts (the trial's prompt schedule, the same for every arm).
The part says which of a draw's groups count toward the batch and how many draws a step may
make; while fewer than ``len(items)`` groups count and draws remain, the step draws the samples of
``len(items)`` more train prompts, picked with the trial's generator (DAPO's dynamic sampling).
The batch is the counted groups in the order drawn, cut to ``len(items)``; at the cap it is
topped up with uncounted ones, in the order drawn, so it always holds ``len(items)`` groups. One
draw whose groups all count (``once``) is the batch as drawn.

The reward metrics are the first draw's: the step's own prompts, as in an arm that draws once.
``tokens/generated`` counts every draw's tokens, the compute the step spent; ``sampled`` what
every draw's sampling passes ran (``harness.engine.compute.sampling_pass``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch import Tensor

from harness.algorithms.sampling import choose_groups
from harness.engine.compute import PassTokens, sampling_pass
from harness.engine.generation import Generation
from harness.engine.learner import Learner, draw_samples, training_scores
from harness.engine.rollout import join_rollouts
from harness.engine.tasks.base import Item, Task


@dataclass
class Drawn:
    """What a step trains on, and what drawing it cost."""

    generation: Generation
    scores: Tensor  # [B] training scores of the batch's rows
    reward_metrics: dict[str, float]  # the first draw's
    generated_tokens: Tensor  # sampled tokens of every draw
    sampled: PassTokens  # what every draw's sampling passes ran
    metrics: dict[str, float]  # ``train/sampling_draws`` where the part may draw more than once


def draw_groups(learner: Learner, task: Task, items: list[Item], timings: dict[str, float]) -> Drawn:
    """The step's batch of ``len(items)`` groups; adds the time spent to ``time/generate_s`` and
    ``time/score_s`` in ``timings``."""
    cfg = learner.algorithm
    draws: list[tuple[Generation, Tensor]] = []
    counted: list[tuple[int, int]] = []  # (draw, group) in the order drawn
    uncounted: list[tuple[int, int]] = []
    prompts, reward_metrics, generated, sampled = items, None, None, None
    while True:
        clock = time.perf_counter()
        generation = draw_samples(learner, task, prompts)
        timings["time/generate_s"] = timings.get("time/generate_s", 0.0) + time.perf_counter() - clock
        clock = time.perf_counter()
        scores, metrics = training_scores(learner, task, prompts, generation)
        timings["time/score_s"] = timings.get("time/score_s", 0.0) + time.perf_counter() - clock
        choice = choose_groups(scores, cfg.group_size, cfg)
        for group, counts in enumerate(choice.counted.tolist()):
            (counted if counts else uncounted).append((len(draws), group))
        draws.append((generation, scores))
        reward_metrics = metrics if reward_metrics is None else reward_metrics
        tokens = generation.rollout.sampled.sum()
        generated = tokens if generated is None else generated + tokens
        processed = sampling_pass(generation.rollout, cfg.group_size, generation.episodes)
        sampled = processed if sampled is None else sampled + processed
        if len(counted) >= len(items) or len(draws) >= choice.max_draws:
            break
        prompts = _more_prompts(learner, task, len(items))
    chosen = (counted + uncounted)[: len(items)]
    sampling = {"train/sampling_draws": float(len(draws))} if choice.max_draws > 1 else {}
    if chosen == [(0, group) for group in range(len(items))]:  # the first draw as it is
        generation, scores = draws[0]
    else:
        generation, scores = _assemble(learner, draws, chosen)
    return Drawn(generation, scores, reward_metrics, generated, sampled, sampling)


def _more_prompts(learner: Learner, task: Task, n: int) -> list[Item]:
    picks = torch.randint(len(task.train), (n,), generator=learner.generator, device=learner.generator.device)
    return [task.train[i] for i in picks.tolist()]


def _assemble(
    learner: Learner, draws: list[tuple[Generation, Tensor]], chosen: list[tuple[int, int]]
) -> tuple[Generation, Tensor]:
    """The rows of the ``chosen`` groups, in that order, as one generation and its scores."""
    group = learner.algorithm.group_size
    rollouts, texts, episodes, scores = [], [], [], []
    for draw, group_index in chosen:
        generation, draw_scores = draws[draw]
        rows = list(range(group_index * group, (group_index + 1) * group))
        index = torch.tensor(rows, device=draw_scores.device)
        rollouts.append(generation.rollout.rows(index))
        texts += [generation.texts[r] for r in rows]
        episodes += [] if generation.episodes is None else [generation.episodes[r] for r in rows]
        scores.append(draw_scores[index])
    rollout = join_rollouts(rollouts, learner.lm.tokenizer.pad_token_id)
    joined = Generation(rollout, texts, episodes if draws[0][0].episodes is not None else None)
    return joined, torch.cat(scores)
