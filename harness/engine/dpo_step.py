"""One DPO step on the same task as the RL arms.

Each step takes the same prompts an RL arm would, samples G completions per prompt from the
model ``pairs_from`` names (``reference``: the frozen warm start, offline DPO; ``policy``: the
policy being trained, online DPO), scores them with the task's verifier and keeps one
(chosen, rejected) pair per prompt whose samples differ in reward; ties are dropped. Then K
epochs of minibatch updates of the sigmoid DPO loss against the reference.
"""

from __future__ import annotations

import torch

from harness.algorithms import build_pairs, dpo_loss, pair_sampler
from harness.engine.learner import Learner, MetricMean, apply_gradients
from harness.engine.rollout import completion_forward, decode_completions, sample_groups
from harness.engine.tasks.base import Item, RewardFn, score_groups


def dpo_step(learner: Learner, items: list[Item], reward: RewardFn) -> dict[str, float]:
    cfg, train, lm = learner.algorithm, learner.train, learner.lm
    group = cfg.group_size
    lm.model.eval()
    sample = pair_sampler(cfg.pairs_from, policy=sample_groups, reference=learner.reference.sample_groups)
    rollout = sample(lm, [i.prompt for i in items], group, **learner.sampling)
    scores = torch.tensor(score_groups(items, decode_completions(lm, rollout), group, reward))
    pairs = build_pairs(scores.view(-1, group))
    metrics = {
        "train/reward_mean": float(scores.mean()),
        "train/reward_std_in_group": float(scores.view(-1, group).std(dim=1).mean()),
        "train/frac_degenerate": 1.0 - len(pairs) / len(items),
        "train/completion_len": float(rollout.completion_mask.sum(1).mean()),
        "tokens/generated": float(rollout.completion_mask.sum()),
        "tokens/trained": 0.0,
        "train/pairs": float(len(pairs)),
    }
    if not pairs:
        return metrics
    device = rollout.completion_mask.device
    chosen = rollout.rows(torch.tensor([p * group + c for p, c, _ in pairs], device=device))
    rejected = rollout.rows(torch.tensor([p * group + r for p, _, r in pairs], device=device))
    ref_chosen = learner.reference.logprobs(chosen, train.temperature).sum(1)
    ref_rejected = learner.reference.logprobs(rejected, train.temperature).sum(1)
    mean = MetricMean()
    lm.model.train()
    for _ in range(cfg.epochs):
        order = torch.randperm(len(pairs), generator=learner.generator, device=device)
        for rows in order.chunk(min(cfg.minibatches, len(pairs))):
            logp_c = completion_forward(lm.model, chosen.rows(rows), temperature=train.temperature).logprobs.sum(1)
            logp_r = completion_forward(lm.model, rejected.rows(rows), temperature=train.temperature).logprobs.sum(1)
            loss, step_metrics = dpo_loss(logp_c, logp_r, ref_chosen[rows], ref_rejected[rows], cfg.dpo_beta)
            step_metrics = {f"train/{k}": v for k, v in step_metrics.items()}
            step_metrics["train/grad_norm"] = apply_gradients(learner, loss)
            step_metrics["train/loss"] = float(loss.detach())
            mean.add(step_metrics)
    lm.model.eval()
    trained = float(chosen.completion_mask.sum() + rejected.completion_mask.sum()) * cfg.epochs
    metrics.update(mean.means())
    metrics["tokens/trained"] = trained
    return metrics
