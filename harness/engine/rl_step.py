"""One RL step, readable top to bottom: rollout, score, reference and critic passes,
advantages, K epochs of minibatch updates. Every algorithm goes through the same calls; the
parts it uses come from the registries named in its ``AlgorithmConfig``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from harness.algorithms import (
    POLICY_LOSSES,
    AdvantageInputs,
    AlgorithmConfig,
    compute_advantages,
    explained_variance,
    kl_estimate,
    make_aggregator,
    value_loss,
)
from harness.errors import NonFiniteError
from harness.engine.models import LoadedModel
from harness.engine.reference import Reference
from harness.engine.rollout import Rollout, completion_forward, decode_completions, sample_groups
from harness.engine.spec import TrainConfig
from harness.engine.tasks.base import Item, RewardFn, score_groups
from harness.engine.critic import Critic


@dataclass
class Learner:
    """What an RL step reads and updates."""

    lm: LoadedModel
    reference: Reference
    critic: Critic | None
    optimizer: torch.optim.Optimizer
    algorithm: AlgorithmConfig
    train: TrainConfig
    generator: torch.Generator  # sampling and minibatch order, seeded from the trial seed

    @property
    def sampling(self) -> dict:
        """How training rollouts are drawn: the budget, the temperature, the trial's generator."""
        return {
            "max_new_tokens": self.train.max_new_tokens,
            "temperature": self.train.temperature,
            "generator": self.generator,
        }

    @property
    def parameters(self) -> list[torch.nn.Parameter]:
        return [p for group in self.optimizer.param_groups for p in group["params"]]


def scores_to_token_rewards(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Place each sequence's verifier score on its last real token."""
    last = (mask.cumsum(1) == mask.sum(1, keepdim=True)) & mask.bool()
    return last.float() * scores[:, None]


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> float:
    return float((x * mask).sum() / mask.sum().clamp(min=1))


def _check_finite(name: str, value: torch.Tensor) -> None:
    if not torch.isfinite(value).all():
        raise NonFiniteError(
            f"{name} became {value.item() if value.numel() == 1 else 'non-finite'}; lower the "
            "learning rate or max_grad_norm, or check the reward function"
        )


def apply_gradients(learner: Learner, loss: torch.Tensor) -> float:
    """One optimiser step on ``loss`` with gradient clipping; a NaN stops the trial."""
    _check_finite("train/loss", loss.detach())
    learner.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(learner.parameters, learner.algorithm.max_grad_norm)
    _check_finite("train/grad_norm", grad_norm)
    learner.optimizer.step()
    return float(grad_norm)


class MetricMean:
    """Running means of per-minibatch metrics."""

    def __init__(self):
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def add(self, metrics: dict[str, float]) -> None:
        for key, value in metrics.items():
            self.sums[key] = self.sums.get(key, 0.0) + value
            self.counts[key] = self.counts.get(key, 0) + 1

    def means(self) -> dict[str, float]:
        return {key: total / self.counts[key] for key, total in self.sums.items()}


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

    # 3. reference log-probs (and old values for the critic)
    clock = time.perf_counter()
    completion_mask = rollout.completion_mask
    ref_logprobs = learner.reference.logprobs(rollout, train.temperature)
    kl_tokens = kl_estimate(rollout.logprobs, ref_logprobs, cfg.kl_estimator)
    old_values = None
    if learner.critic is not None:
        with torch.no_grad():
            hidden = None
            if learner.critic.needs_policy_hidden:
                hidden = completion_forward(lm.model, rollout, temperature=train.temperature, want_hidden=True).hidden
            old_values = learner.critic(rollout, hidden, train.temperature)
    timings["time/reference_s"] = time.perf_counter() - clock

    # 4. advantages from token rewards (KL in the reward when the algorithm places it there)
    token_rewards = scores_to_token_rewards(scores, completion_mask)
    if cfg.kl_placement == "reward":
        token_rewards = token_rewards - cfg.kl_coef * kl_tokens * completion_mask
    adv = compute_advantages(AdvantageInputs(token_rewards, completion_mask, group, old_values), cfg)

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
        "train/frac_degenerate": float((grouped.amax(1) == grouped.amin(1)).float().mean()) if group > 1 else 0.0,
        "train/kl_ref": _masked_mean(kl_tokens, completion_mask),
        "train/completion_len": float(completion_mask.sum(1).mean()),
        "tokens/generated": generated,
        "tokens/trained": trained,
        **update_metrics,
        **timings,
    }
    if old_values is not None and adv.returns is not None:
        metrics["train/explained_var"] = explained_variance(old_values, adv.returns, completion_mask)
    return metrics


def _update(learner, rollout: Rollout, advantages, returns, old_values, ref_logprobs, keep_rows) -> dict[str, float]:
    cfg, train, lm = learner.algorithm, learner.train, learner.lm
    aggregate = make_aggregator(cfg, train.max_new_tokens)
    policy_loss = POLICY_LOSSES.get(cfg.policy_loss)
    kept = torch.nonzero(keep_rows.to(rollout.completion_mask.device)).squeeze(1)
    if kept.numel() == 0:
        return {"train/rows_updated": 0.0}
    mean = MetricMean()
    lm.model.train()
    for _ in range(cfg.epochs):
        order = kept[torch.randperm(kept.numel(), generator=learner.generator, device=kept.device)]
        for rows in order.chunk(cfg.minibatches):
            batch = rollout.rows(rows)
            mask = batch.completion_mask
            want_hidden = learner.critic is not None and learner.critic.needs_policy_hidden
            forward = completion_forward(lm.model, batch, temperature=train.temperature, want_hidden=want_hidden)
            loss, metrics = policy_loss(forward.logprobs, batch.logprobs, advantages[rows], mask, cfg, aggregate)
            metrics = {f"train/{k}": v for k, v in metrics.items()}
            metrics["train/policy_loss"] = float(loss.detach())
            if cfg.kl_placement == "loss":
                kl_loss = aggregate(kl_estimate(forward.logprobs, ref_logprobs[rows], cfg.kl_estimator), mask)
                loss = loss + cfg.kl_coef * kl_loss
            entropy = aggregate(forward.entropy, mask)
            metrics["train/entropy"] = float(entropy.detach())
            if cfg.entropy_coef:
                loss = loss - cfg.entropy_coef * entropy
            if learner.critic is not None:
                values = learner.critic(batch, forward.hidden, train.temperature)
                v_loss, v_metrics = value_loss(values, old_values[rows], returns[rows], mask, cfg.value_clip, aggregate)
                loss = loss + cfg.vf_coef * v_loss
                metrics["train/value_loss"] = float(v_loss.detach())
                metrics.update({f"train/{k}": v for k, v in v_metrics.items()})
            metrics["train/grad_norm"] = apply_gradients(learner, loss)
            metrics["train/loss"] = float(loss.detach())
            mean.add(metrics)
    lm.model.eval()
    return {**mean.means(), "train/rows_updated": float(kept.numel())}
