"""One RL step, readable top to bottom: rollout, score, the no-grad passes (the policy's own
where the old log-probs are recomputed, the critic's old values, the reference's, a distillation
teacher's), advantages,
K epochs of minibatch updates, the metrics. Every algorithm goes through the same calls; the
parts it uses come from the registries named in its ``RLConfig``, and the loss of each update is
``harness.algorithms.objective.update_loss``.

Memory is bounded by ``TrainConfig.micro_batch_size``: the no-grad passes run over micro-batches
of that many rows, and each update accumulates its minibatch's gradient over micro-batches,
each one's loss its share of the minibatch's (``_share_of``). Metrics stay on the device until
the step ends, then move to the host in one transfer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from functools import partial

import torch
from torch import Tensor

from harness.algorithms.advantages import AdvantageInputs, compute_advantages
from harness.algorithms.aggregation import Aggregator, make_aggregator
from harness.algorithms.critic import explained_variance
from harness.algorithms.distill import distilled_advantages, teacher_log_ratio
from harness.algorithms.kl import kl_estimate
from harness.algorithms.mismatch import mismatch_measure
from harness.algorithms.objective import UpdateBatch, token_rewards, update_loss
from harness.algorithms.old_logprobs import recomputes_old_logprobs
from harness.algorithms.parts import ADVANTAGES
from harness.algorithms.sampling import trained_rows
from harness.engine.compute import NONE, STEP_FLOPS, StepTokens, hidden_pass, logprob_pass, model_size, step_flops
from harness.engine.critic import critic_values
from harness.engine.group_sampling import Drawn, draw_groups
from harness.engine.learner import Learner, MetricMean, apply_gradients, to_host
from harness.engine.logprobs import completion_forward
from harness.engine.micro_batches import in_micro_batches
from harness.engine.rollout import Rollout
from harness.engine.tasks.base import Item, Task


def _masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1)


def rl_step(learner: Learner, task: Task, items: list[Item]) -> dict[str, float]:
    """One RL update of ``learner``'s policy on the prompts ``items``: sample a group per prompt,
    score it, compute advantages (with the KL against the reference where the algorithm puts it),
    then ``epochs`` passes of minibatch updates of ``update_loss``; the policy (and critic) are
    updated in place.

    Returns the step's metrics as host floats (``train/*`` rewards, KL, clip and loss terms,
    ``tokens/*`` counts, ``time/*`` per phase), one row of the trial's history. Every algorithm
    runs these same calls and differs only in the parts its ``RLConfig`` names, so a difference
    between arms is a difference of parts, not of code paths. Raises ``NonFiniteError`` when a
    metric that must stay finite (the loss, the gradient norm: ``learner.to_host``) is not.
    """
    cfg, lm = learner.algorithm, learner.lm
    timings: dict[str, float] = {}

    # 1-2. rollout and score: G samples (or tool-calling episodes) per prompt, rows grouped by
    #    prompt, scored by the verifier, an episode's trajectory reward or a learned reward (a
    #    placebo arm: its scores shuffled across the batch); the sampling part may draw more
    #    prompts until enough groups have a spread of scores (DAPO's dynamic sampling)
    lm.model.eval()
    group = cfg.group_size
    drawn = draw_groups(learner, task, items, timings)
    generation, scores, reward_metrics = drawn.generation, drawn.scores, drawn.reward_metrics

    # 3. no-grad passes, over micro-batches of rows: the policy's own (old log-probs recomputed,
    #    with the hidden states for a critic on its trunk), the critic's old values, the
    #    reference's log-probs; and how far the sampler's log-probs are from the trainer's
    clock = time.perf_counter()
    passes = _no_grad_passes(learner, generation.rollout)
    rollout, completion_mask, recompute = passes.rollout, passes.rollout.completion_mask, passes.recompute
    kl_tokens = kl_estimate(rollout.logprobs, passes.ref_logprobs, cfg.kl_estimator)
    timings["time/reference_s"] = time.perf_counter() - clock

    # 4. advantages from token rewards (with the KL the placement puts in the reward); the rows
    #    the loss reads: those the estimator keeps, less any cut off by the budget that the
    #    truncation part masks; a distillation teacher's reverse KL where its part adds it to them
    rewards = token_rewards(scores, completion_mask, kl_tokens, cfg)
    adv = compute_advantages(passes.advantage_inputs(rewards, scores, group), cfg)
    advantages = distilled_advantages(
        adv.advantages, passes.sampler_logprobs, passes.teacher_logprobs, completion_mask, cfg
    )
    trained, truncation_metrics = trained_rows(rollout.cut_off(lm.tokenizer.eos_token_id), cfg)
    keep_rows = adv.keep_rows & trained

    # 5. K epochs of minibatch updates over the rows that are kept
    clock = time.perf_counter()
    targets = _Targets.of(passes, advantages, adv.returns)
    update_metrics = _update(learner, targets, keep_rows, measure_mismatch=not recompute)
    timings["time/update_s"] = time.perf_counter() - clock

    # 6. the metrics, moved to the host in one transfer (a non-finite loss stops the trial here)
    grouped = scores.view(-1, group)
    kept_tokens = (completion_mask.sum(1) * keep_rows.to(completion_mask)).sum()
    metrics = {
        STEP_FLOPS: _flops(learner, drawn, rollout, keep_rows, recompute or passes.token_probs is not None),
        "train/reward_mean": scores.mean(),
        "train/reward_std_in_group": grouped.std(dim=1).mean() if group > 1 else 0.0,
        "train/frac_degenerate": adv.degenerate.float().mean(),
        "train/kl_ref": _masked_mean(kl_tokens, completion_mask),
        "train/completion_len": rollout.sampled.sum(1).mean(),  # the policy's own tokens, whatever the loss reads
        "tokens/generated": drawn.generated_tokens,  # every draw's
        "tokens/trained": kept_tokens * cfg.epochs,
        **passes.metrics,
        **_staleness(learner, rollout),
        **reward_metrics,
        **drawn.metrics,
        **truncation_metrics,
        **update_metrics,
        **timings,
    }
    if passes.old_values is not None and adv.returns is not None:
        metrics["train/explained_var"] = explained_variance(passes.old_values, adv.returns, completion_mask)
    return to_host(metrics)


@dataclass
class _NoGradPasses:
    """What the no-grad passes give the rest of the step."""

    rollout: Rollout  # its log-probs the old ones the ratio reads (recomputed, or the sampler's)
    old_values: Tensor | None
    ref_logprobs: Tensor
    sampler_logprobs: Tensor  # what a mismatch correction weighs the old log-probs against
    recompute: bool  # whether the old log-probs were recomputed (then ``metrics`` holds the mismatch)
    metrics: dict[str, Tensor]
    teacher_logprobs: Tensor | None = None  # the distillation teacher's, where the learner has one
    # the policy's own log-probs and sums of squared probabilities, for an advantage estimator that
    # reads them (``needs_token_probs``); None otherwise
    token_probs: tuple[Tensor, Tensor] | None = None

    def advantage_inputs(self, rewards: Tensor, scores: Tensor, group_size: int) -> AdvantageInputs:
        """What the advantage estimator reads: the token rewards and scores, with what these passes gave."""
        token_logprobs, sum_pi_squared = self.token_probs or (None, None)
        return AdvantageInputs(
            rewards,
            self.rollout.completion_mask,
            group_size,
            self.old_values,
            scores=scores,
            token_logprobs=token_logprobs,
            sum_pi_squared=sum_pi_squared,
        )


def _no_grad_passes(learner: Learner, rollout: Rollout) -> _NoGradPasses:
    """The policy's own pass where the old log-probs are recomputed (or a correction compares
    them, or the advantage estimator reads the policy's token probabilities: ``needs_token_probs``,
    which alone does not replace the old log-probs), the critic's old values, the reference's
    log-probs and a distillation teacher's, over micro-batches of rows.
    Where the policy's pass ran, its log-probs of the sampled tokens, at the weights the
    updates start from, are also the trainer's side of the mismatch measure (``mismatch/*``)."""
    cfg, train, lm, micro = learner.algorithm, learner.train, learner.lm, learner.train.micro_batch_size
    # tool tokens in the loss (mask_tool_tokens off) have no sampled log-probs: recompute them
    recompute = recomputes_old_logprobs(cfg, {p.dtype for p in lm.model.parameters()}) or rollout.unsampled_in_loss
    wants_probs = ADVANTAGES.meta(cfg.advantage)["needs_token_probs"]
    shares_trunk = learner.critic is not None and learner.critic.trunk is None
    metrics: dict[str, Tensor] = {}
    own, old_values, sampler_logprobs, token_probs = None, None, rollout.logprobs, None
    with torch.no_grad():
        if recompute or wants_probs:
            own_pass = partial(
                completion_forward,
                lm.model,
                temperature=train.temperature,
                want_hidden=shares_trunk,
                want_sum_pi_squared=wants_probs,
            )
            own = in_micro_batches(own_pass, rollout, micro)
            if wants_probs:
                token_probs = (own.logprobs, own.sum_pi_squared)
        if recompute:
            # the largest per-token |sampler - trainer| log-prob difference in the rollout
            metrics["train/old_logprob_gap"] = ((own.logprobs - rollout.logprobs) * rollout.sampled).abs().max()
            metrics.update(mismatch_measure(own.logprobs, rollout.logprobs, rollout.sampled))
            # tokens the policy did not sample (tool outputs in the loss) have no sampler log-prob: weight 1
            sampler_logprobs = torch.where(rollout.sampled.bool(), rollout.logprobs, own.logprobs)
            rollout = replace(rollout, logprobs=own.logprobs)
        if learner.critic is not None:
            hidden = None if own is None else own.hidden
            old_values = critic_values(learner.critic, lm.model, rollout, hidden, micro_batch_size=micro)
    ref_logprobs = learner.reference.logprobs(rollout, train.temperature, micro_batch_size=micro)
    teacher = learner.teacher
    teacher_logprobs = None
    if teacher is not None:  # tinker-cookbook's teacher_kl metric: the sampler's log-ratio to the teacher
        teacher_logprobs = teacher.logprobs(rollout, train.temperature, micro_batch_size=micro)
        log_ratio = teacher_log_ratio(sampler_logprobs, teacher_logprobs, rollout.completion_mask)
        metrics["train/teacher_kl"] = _masked_mean(log_ratio, rollout.completion_mask)
    return _NoGradPasses(
        rollout,
        old_values,
        ref_logprobs,
        sampler_logprobs,
        recompute,
        metrics,
        teacher_logprobs=teacher_logprobs,
        token_probs=token_probs,
    )


def _staleness(learner: Learner, rollout: Rollout) -> dict[str, Tensor]:
    """How many optimiser steps behind the trained policy the rows' sampling policies were
    (``harness.engine.samplers.staleness``); nothing for rows the policy itself sampled."""
    if rollout.policy_version is None:
        return {}
    lag = (learner.policy_version - rollout.policy_version).double()
    return {"rollout/staleness_mean": lag.mean(), "rollout/staleness_max": lag.max()}


def _flops(learner: Learner, drawn: Drawn, rollout: Rollout, keep_rows: Tensor, recompute: bool) -> Tensor:
    """The step's estimated FLOPs (``harness.engine.compute``), from the passes it ran: the
    sampling of every draw, the reference's log-probs (always: ``train/kl_ref``), the recomputed
    old log-probs, the critic's old values (on the policy's trunk a trunk pass of its own unless
    the recompute pass gave its hidden states), a distillation teacher's log-probs and ``epochs``
    updates of the kept rows. ``recompute``: whether the policy's own no-grad pass ran (for the old
    log-probs, or for the token probabilities an advantage estimator reads)."""
    critic, epochs = learner.critic, learner.algorithm.epochs
    updated = rollout.rows(torch.nonzero(keep_rows.to(rollout.completion_mask.device)).squeeze(1))
    own_trunk = critic is not None and critic.trunk is not None
    forward = logprob_pass(rollout) * (1 + recompute)  # the reference's, and the old log-probs' when recomputed
    if critic is not None and not own_trunk and not recompute:
        forward = forward + hidden_pass(rollout)  # the old values on the policy's trunk
    tokens = StepTokens(
        sampled=drawn.sampled,
        forward=forward,
        updated=logprob_pass(updated) * epochs,
        critic_forward=hidden_pass(rollout) if own_trunk else NONE,
        critic_updated=hidden_pass(updated) * epochs if own_trunk else NONE,
        teacher_forward=NONE if learner.teacher is None else logprob_pass(rollout),
    )
    policy = model_size(learner.lm.model, checkpointed=learner.train.gradient_checkpointing)
    teacher = None if learner.teacher is None else model_size(learner.teacher.model)
    return step_flops(tokens, policy, model_size(critic.trunk, head=False) if own_trunk else None, teacher)


@dataclass
class _Targets:
    """What the updates fit, for every row of the rollout: its tokens and old log-probs, the
    advantages, returns, old values and reference log-probs of the no-grad passes, and the
    sampler's log-probs (a mismatch correction's other side)."""

    rollout: Rollout
    advantages: Tensor
    returns: Tensor | None
    old_values: Tensor | None
    ref_logprobs: Tensor
    sampler_logprobs: Tensor  # the sampler's (the old ones where they were not recomputed)
    teacher_logprobs: Tensor | None = None  # the distillation teacher's, where there is one

    @classmethod
    def of(cls, passes: _NoGradPasses, advantages: Tensor, returns: Tensor | None) -> _Targets:
        return cls(
            passes.rollout,
            advantages,
            returns,
            passes.old_values,
            passes.ref_logprobs,
            passes.sampler_logprobs,
            passes.teacher_logprobs,
        )


def _update(
    learner: Learner, targets: _Targets, keep_rows: Tensor, *, measure_mismatch: bool
) -> dict[str, Tensor | float]:
    """``epochs`` passes of minibatch updates over the kept rows; with ``measure_mismatch``, the
    mismatch measure (``mismatch/*``) of the first minibatch, whose forward pass ran at the
    weights the rollout was scored against (no pass of its own: the loss's)."""
    cfg, lm = learner.algorithm, learner.lm
    aggregate = make_aggregator(cfg, learner.token_budget)
    kept = torch.nonzero(keep_rows.to(targets.rollout.completion_mask.device)).squeeze(1)
    if kept.numel() == 0:
        return {"train/rows_updated": 0.0}
    mean, mismatch = MetricMean(), {}
    lm.model.train()
    for _ in range(cfg.epochs):
        order = kept[torch.randperm(kept.numel(), generator=learner.generator, device=kept.device)]
        for rows in order.chunk(cfg.minibatches):
            micro_loss = partial(_micro_batch_loss, learner, targets, rows, aggregate)
            grad_norm, batch = apply_gradients(learner, rows, micro_loss)
            _, metrics = update_loss(batch, cfg, aggregate)  # the whole minibatch's, from its parts
            mean.add({**metrics, "train/grad_norm": grad_norm})
            if measure_mismatch and not mismatch:
                mismatch = mismatch_measure(batch.logprobs, batch.sampler_logprobs, batch.mask)
    lm.model.eval()
    return {**mean.means(), **mismatch, "train/rows_updated": float(kept.numel())}


def _micro_batch_loss(
    learner: Learner, targets: _Targets, rows: Tensor, aggregate: Aggregator, part: Tensor
) -> tuple[Tensor, UpdateBatch]:
    """The loss of the micro-batch ``rows[part]`` as its share of minibatch ``rows``' loss, and
    the loss's view of it, with the policy's (and the critic's) forward pass on it."""
    cfg, train, critic, model = learner.algorithm, learner.train, learner.critic, learner.lm.model
    micro = rows[part]
    rollout = targets.rollout.rows(micro)
    shares_trunk = critic is not None and critic.trunk is None
    forward = completion_forward(  # the loss always reports the entropy; its term needs a gradient
        model,
        rollout,
        temperature=train.temperature,
        want_entropy=True,
        entropy_grad=bool(cfg.entropy_coef),
        want_hidden=shares_trunk,
    )
    batch = UpdateBatch(
        logprobs=forward.logprobs,
        old_logprobs=rollout.logprobs,
        ref_logprobs=targets.ref_logprobs[micro],
        advantages=targets.advantages[micro],
        mask=rollout.completion_mask,
        entropy=forward.entropy,
        values=None if critic is None else critic_values(critic, model, rollout, forward.hidden),
        old_values=None if targets.old_values is None else targets.old_values[micro],
        returns=None if targets.returns is None else targets.returns[micro],
        sampler_logprobs=targets.sampler_logprobs[micro],
        teacher_logprobs=None if targets.teacher_logprobs is None else targets.teacher_logprobs[micro],
    )
    share = _share_of(aggregate, targets.rollout.completion_mask[rows], part)
    return update_loss(batch, cfg, share)[0], batch


def _share_of(aggregate: Aggregator, minibatch_mask: Tensor, part: Tensor) -> Aggregator:
    """``aggregate`` of a micro-batch (the minibatch's rows ``part``) as its share of the
    minibatch's: its per-token terms placed in its rows of the minibatch, zeros elsewhere, and
    normalised by the whole minibatch's mask. Every aggregation sums row terms linear in the
    per-token values and divides by a count from the mask (tokens, or rows with a token), so
    the micro-batches' shares of each term sum to the minibatch's, and so do their gradients.
    (Parts that pick tokens from the batch they see, Clip-Cov, KL-Cov and the top-entropy filter,
    pick them within each micro-batch, as verl's and TRL's do.)"""

    def share(per_token: Tensor, mask: Tensor) -> Tensor:
        return aggregate(per_token.new_zeros(minibatch_mask.shape).index_copy(0, part, per_token), minibatch_mask)

    return share
