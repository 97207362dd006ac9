"""One DPO step on the same task as the RL arms.

Each step takes the same prompts an RL arm would, samples G completions per prompt from the
model ``pairs_from`` names (``reference``: the frozen warm start, offline DPO; ``policy``: the
policy being trained, online DPO), scores them with the task's verifier and keeps one
(chosen, rejected) pair per prompt whose samples differ in reward; ties are dropped. Then K
epochs of minibatch updates of the sigmoid DPO loss against the reference.
"""

from __future__ import annotations

from functools import partial

import torch
from torch import Tensor

from harness.algorithms import build_pairs, dpo_loss, pair_sampler
from harness.engine.compute import STEP_FLOPS, StepTokens, logprob_pass, model_size, sampling_pass, step_flops
from harness.engine.generation import generate
from harness.engine.learner import (
    Learner,
    MetricMean,
    apply_gradients,
    to_host,
    training_scores,
)
from harness.engine.logprobs import completion_forward
from harness.engine.rollout import Rollout
from harness.engine.tasks.base import Item, Task


def dpo_step(learner: Learner, task: Task, items: list[Item]) -> dict[str, float]:
    """One DPO update of ``learner``'s policy on the prompts ``items``: sample a group per prompt
    (from the reference or the policy, by ``pairs_from``), score it with the task's reward, keep
    one (chosen, rejected) pair per prompt whose samples differ, then ``epochs`` passes of
    minibatch updates of the sigmoid DPO loss against the frozen reference; the policy is updated
    in place.

    Returns the step's metrics as host floats, with the same ``train/reward_*``, ``tokens/*`` and
    ``train/frac_degenerate`` keys as ``rl_step`` (a prompt without a pair counts as degenerate),
    so DPO arms sit in the same tables and curves as the RL arms they are compared with. A step
    without any pair updates nothing and reports ``train/pairs`` 0. Raises ``NonFiniteError`` as
    ``rl_step`` does.
    """
    cfg, train, lm = learner.algorithm, learner.train, learner.lm
    group = cfg.group_size
    lm.model.eval()
    sample = pair_sampler(cfg.pairs_from, policy=generate, reference=learner.reference.generate)
    generation = sample(
        lm, task, [i.prompt for i in items], group, mask_tool_tokens=train.mask_tool_tokens, **learner.sampling
    )
    rollout = generation.rollout
    scores, reward_metrics = training_scores(learner, task, items, generation)
    pairs = build_pairs(scores.view(-1, group))
    metrics = {
        **reward_metrics,
        "train/reward_mean": scores.mean(),
        "train/reward_std_in_group": scores.view(-1, group).std(dim=1).mean(),
        "train/frac_degenerate": 1.0 - len(pairs) / len(items),
        "train/completion_len": rollout.sampled.sum(1).mean(),
        "tokens/generated": rollout.sampled.sum(),
        "tokens/trained": 0.0,
        "train/pairs": float(len(pairs)),
    }
    policy = model_size(lm.model, checkpointed=train.gradient_checkpointing)
    sampled = sampling_pass(rollout, group, generation.episodes)  # from the reference or the policy: the same size
    if not pairs:
        return to_host({STEP_FLOPS: step_flops(StepTokens(sampled=sampled), policy), **metrics})
    device = rollout.completion_mask.device
    chosen = rollout.rows(torch.tensor([p * group + c for p, c, _ in pairs], device=device))
    rejected = rollout.rows(torch.tensor([p * group + r for p, _, r in pairs], device=device))
    sides = (chosen, rejected)
    ref = tuple(learner.reference.logprobs(side, train.temperature, train.micro_batch_size).sum(1) for side in sides)
    mean = MetricMean()
    lm.model.train()
    for _ in range(cfg.epochs):
        order = torch.randperm(len(pairs), generator=learner.generator, device=device)
        for pair_rows in order.chunk(min(cfg.minibatches, len(pairs))):
            micro_loss = partial(_micro_batch_loss, learner, sides, ref, pair_rows)
            grad_norm, logps = apply_gradients(learner, pair_rows, micro_loss)
            loss, step_metrics = dpo_loss(*logps, *(r[pair_rows] for r in ref), cfg.dpo_beta)
            step_metrics = {f"train/{k}": v for k, v in step_metrics.items()}
            mean.add({**step_metrics, "train/grad_norm": grad_norm, "train/loss": loss})
    lm.model.eval()
    metrics.update(mean.means())
    metrics["tokens/trained"] = (chosen.completion_mask.sum() + rejected.completion_mask.sum()) * cfg.epochs
    # the passes: sampling, the reference's log-probs of the pairs, ``epochs`` updates of the
    # pairs (harness.engine.compute)
    pair_tokens = logprob_pass(chosen) + logprob_pass(rejected)
    tokens = StepTokens(sampled=sampled, forward=pair_tokens, updated=pair_tokens * cfg.epochs)
    return to_host({STEP_FLOPS: step_flops(tokens, policy), **metrics})


def _micro_batch_loss(
    learner: Learner, sides: tuple[Rollout, Rollout], ref: tuple[Tensor, Tensor], pair_rows: Tensor, part: Tensor
) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """The DPO loss of the pairs ``pair_rows[part]``, weighted by their share of the minibatch
    ``pair_rows`` (the loss is a mean over pairs), and their (chosen, rejected) log-probs."""
    micro = pair_rows[part]
    logps = tuple(_sequence_logprobs(learner, side.rows(micro)) for side in sides)
    loss, _ = dpo_loss(*logps, *(r[micro] for r in ref), learner.algorithm.dpo_beta)
    return loss * (len(micro) / len(pair_rows)), logps


def _sequence_logprobs(learner: Learner, rollout: Rollout) -> Tensor:
    """Each completion's log-probability under the policy, with gradient."""
    return completion_forward(learner.lm.model, rollout, temperature=learner.train.temperature).logprobs.sum(1)
