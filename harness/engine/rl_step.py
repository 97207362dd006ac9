"""One RL step, readable top to bottom: rollout, score, the no-grad passes (the policy's own
where the old log-probs are recomputed or the critic shares its trunk, the reference's),
advantages, K epochs of minibatch updates. Every algorithm goes through the same calls; the
parts it uses come from the registries named in its ``RLConfig``, and the loss of each update is
``harness.algorithms.objective.update_loss``.
"""

from __future__ import annotations

import time
from dataclasses import replace

import torch

from harness.algorithms.advantages import AdvantageInputs, compute_advantages
from harness.algorithms.aggregation import make_aggregator
from harness.algorithms.critic import explained_variance
from harness.algorithms.kl import kl_estimate
from harness.algorithms.objective import UpdateBatch, token_rewards, update_loss
from harness.algorithms.old_logprobs import recomputes_old_logprobs
from harness.engine.critic import critic_values
from harness.engine.learner import Learner, MetricMean, apply_gradients
from harness.engine.rollout import (
    Rollout,
    completion_forward,
    decode_completions,
    sample_groups,
)
from harness.engine.tasks.base import Item, RewardFn, score_groups


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> float:
    return float((x * mask).sum() / mask.sum().clamp(min=1))


def rl_step(learner: Learner, items: list[Item], reward: RewardFn) -> dict[str, float]:
    cfg, train, lm = learner.algorithm, learner.train, learner.lm
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    # 1. rollout: G samples per prompt, rows grouped by prompt
    lm.model.eval()
    group = cfg.group_size
    rollout = sample_groups(lm, [i.prompt for i in items], group, **learner.sampling)
    timings["time/generate_s"] = time.perf_counter() - clock

    # 2. score with the verifier
    clock = time.perf_counter()
    scores = torch.tensor(score_groups(items, decode_completions(lm, rollout), group, reward), device=lm.device)
    timings["time/score_s"] = time.perf_counter() - clock

    # 3. no-grad passes: the policy's own (old log-probs recomputed, or hidden states for a
    #    critic on its trunk), the reference's log-probs, the critic's old values
    clock = time.perf_counter()
    completion_mask = rollout.completion_mask
    recompute = recomputes_old_logprobs(cfg, {p.dtype for p in lm.model.parameters()})
    shares_trunk = learner.critic is not None and learner.critic.trunk is None
    gap: dict[str, float] = {}
    own, old_values = None, None
    with torch.no_grad():
        if recompute or shares_trunk:
            own = completion_forward(lm.model, rollout, temperature=train.temperature, want_hidden=shares_trunk)
        if recompute:
            # the largest per-token |sampler - trainer| log-prob difference in the rollout
            gap["train/old_logprob_gap"] = float(((own.logprobs - rollout.logprobs) * completion_mask).abs().max())
            rollout = replace(rollout, logprobs=own.logprobs)
        if learner.critic is not None:
            hidden = None if own is None else own.hidden
            old_values = critic_values(learner.critic, rollout, hidden, train.temperature)
    ref_logprobs = learner.reference.logprobs(rollout, train.temperature)
    kl_tokens = kl_estimate(rollout.logprobs, ref_logprobs, cfg.kl_estimator)
    timings["time/reference_s"] = time.perf_counter() - clock

    # 4. advantages from token rewards (with the KL the placement puts in the reward)
    rewards = token_rewards(scores, completion_mask, kl_tokens, cfg)
    adv = compute_advantages(AdvantageInputs(rewards, completion_mask, group, old_values, scores=scores), cfg)

    # 5. K epochs of minibatch updates over the rows that are kept
    clock = time.perf_counter()
    update_metrics = _update(learner, rollout, adv.advantages, adv.returns, old_values, ref_logprobs, adv.keep_rows)
    timings["time/update_s"] = time.perf_counter() - clock

    grouped = scores.view(-1, group)
    generated = float(completion_mask.sum())
    trained = float(completion_mask[adv.keep_rows].sum()) * cfg.epochs
    metrics = {
        "train/reward_mean": float(scores.mean()),
        "train/reward_std_in_group": float(grouped.std(dim=1).mean()) if group > 1 else 0.0,
        "train/frac_degenerate": float(adv.degenerate.float().mean()),
        "train/kl_ref": _masked_mean(kl_tokens, completion_mask),
        "train/completion_len": float(completion_mask.sum(1).mean()),
        "tokens/generated": generated,
        "tokens/trained": trained,
        **gap,
        **update_metrics,
        **timings,
    }
    if old_values is not None and adv.returns is not None:
        metrics["train/explained_var"] = explained_variance(old_values, adv.returns, completion_mask)
    return metrics


def _update(learner, rollout: Rollout, advantages, returns, old_values, ref_logprobs, keep_rows) -> dict[str, float]:
    cfg, train, lm, critic = learner.algorithm, learner.train, learner.lm, learner.critic
    aggregate = make_aggregator(cfg, train.max_new_tokens)
    kept = torch.nonzero(keep_rows.to(rollout.completion_mask.device)).squeeze(1)
    if kept.numel() == 0:
        return {"train/rows_updated": 0.0}
    want_hidden = critic is not None and critic.trunk is None
    mean = MetricMean()
    lm.model.train()
    for _ in range(cfg.epochs):
        order = kept[torch.randperm(kept.numel(), generator=learner.generator, device=kept.device)]
        for rows in order.chunk(cfg.minibatches):
            batch = rollout.rows(rows)
            forward = completion_forward(lm.model, batch, temperature=train.temperature, want_hidden=want_hidden)
            loss, metrics = update_loss(UpdateBatch(
                logprobs=forward.logprobs,
                old_logprobs=batch.logprobs,
                ref_logprobs=ref_logprobs[rows],
                advantages=advantages[rows],
                mask=batch.completion_mask,
                entropy=forward.entropy,
                values=None if critic is None else critic_values(critic, batch, forward.hidden, train.temperature),
                old_values=None if old_values is None else old_values[rows],
                returns=None if returns is None else returns[rows],
            ), cfg, aggregate)
            metrics["train/grad_norm"] = apply_gradients(learner, loss)
            mean.add(metrics)
    lm.model.eval()
    return {**mean.means(), "train/rows_updated": float(kept.numel())}
