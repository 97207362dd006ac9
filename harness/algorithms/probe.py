"""The no-op probe: run an algorithm's advantages and update loss on one fixed batch, so two arms
that differ in the study file but compute the same thing can be told apart from real ablations.

A well-known trainer once shipped a loss variant numerically identical to its baseline; a study
comparing the two spends its seeds measuring noise. ``probe(cfg, max_new_tokens)`` gives the
loss and its gradient (with respect to the log-probs, the entropies and the critic's values) on
a batch of random log-probs, rewards and masks, drawn once from a fixed seed in float64 with
ratios well outside every clip range, so clip bounds, dual clips, estimators, placements and
aggregations all leave a mark. It reads nothing of the model: the optimiser's numbers (``lr``,
``epochs``, ``minibatches``, ``max_grad_norm``, ``critic_lr``) and the group size are outside
its view (``UNPROBED``), and two configs differing there are never called the same; so are
where the old log-probs come from (``old_logprobs``) and the sampling side (``sampling``,
``max_draws``, ``truncated``), which change the data, not the formula. The sampler's log-probs
differ from the old ones by a planted mismatch (log-ratios of sd 0.3), so every mismatch
correction acts; a teacher's log-probs (a distillation part's) differ from the old ones by sd 0.5.
``UNPROBED``, ``TOLERANCE`` and the result's comparison are in ``probe_result.py`` (torch-free).
"""

from __future__ import annotations

from functools import cache

import torch
from torch import Tensor

from harness.algorithms.advantages import AdvantageInputs, compute_advantages
from harness.algorithms.aggregation import make_aggregator
from harness.algorithms.config import RLConfig
from harness.algorithms.distill import distilled_advantages
from harness.algorithms.kl import kl_estimate
from harness.algorithms.objective import UpdateBatch, token_rewards, update_loss
from harness.algorithms.probe_result import ProbeResult

PROMPTS, LENGTH, SEED = 6, 10, 20240601


@cache
def _batch(group_size: int) -> dict[str, Tensor]:
    """The fixed probe batch for one group size: ``PROMPTS`` groups of ``LENGTH``-token rows."""
    g = torch.Generator().manual_seed(SEED)
    rows = PROMPTS * group_size
    lengths = torch.randint(2, LENGTH + 1, (rows,), generator=g)
    mask = (torch.arange(LENGTH)[None, :] < lengths[:, None]).double()
    old = -torch.rand(rows, LENGTH, generator=g, dtype=torch.float64) * 3 - 0.05
    # heavy-tailed log-ratios (Student t, 2 dof): ratios from ~0.05 to ~20, so every clip acts
    chi2 = (torch.randn(2, rows, LENGTH, generator=g, dtype=torch.float64) ** 2).sum(0)
    t = torch.randn(rows, LENGTH, generator=g, dtype=torch.float64) / torch.sqrt(chi2 / 2)
    logprobs = old + 0.4 * t.clamp(-8, 8)
    ref = old + 0.3 * torch.randn(rows, LENGTH, generator=g, dtype=torch.float64)
    scores = (torch.rand(rows, generator=g, dtype=torch.float64) < 0.5).double()
    scores[:group_size] = 1.0  # one degenerate group, so drop_degenerate matters
    old_values = torch.randn(rows, LENGTH, generator=g, dtype=torch.float64) * 0.5
    values = old_values + 0.4 * torch.randn(rows, LENGTH, generator=g, dtype=torch.float64)
    entropy = torch.rand(rows, LENGTH, generator=g, dtype=torch.float64) * 2
    sampler = old + 0.3 * torch.randn(rows, LENGTH, generator=g, dtype=torch.float64)  # drawn after the rest: it stays
    teacher = old + 0.5 * torch.randn(rows, LENGTH, generator=g, dtype=torch.float64)  # issue 35: a teacher's
    # the policy's squared probabilities over the vocabulary: the sampled token's p^2 plus a share
    # of (1 - p)^2 for the rest (an estimator with needs_token_probs reads them); drawn after the rest
    p = old.exp()
    sum_pi_squared = p**2 + (1 - p) ** 2 * torch.rand(rows, LENGTH, generator=g, dtype=torch.float64)
    return {
        "mask": mask,
        "old": old,
        "logprobs": logprobs.clamp(max=0.0),
        "ref": ref,
        "scores": scores,
        "old_values": old_values,
        "values": values,
        "entropy": entropy,
        "sampler": sampler,
        "teacher": teacher.clamp(max=0.0),
        "sum_pi_squared": sum_pi_squared,
    }


def probe(cfg: RLConfig, max_new_tokens: int) -> ProbeResult:
    """Loss and gradient of ``cfg``'s update on the fixed batch of its group size."""
    data = _batch(cfg.group_size)
    mask = data["mask"]
    with torch.no_grad():
        kl = kl_estimate(data["old"], data["ref"], cfg.kl_estimator)
        rewards = token_rewards(data["scores"], mask, kl, cfg)
    inputs = AdvantageInputs(
        rewards,
        mask,
        cfg.group_size,
        data["old_values"],
        scores=data["scores"],
        token_logprobs=data["old"],
        sum_pi_squared=data["sum_pi_squared"],
    )
    adv = compute_advantages(inputs, cfg)
    advantages = distilled_advantages(adv.advantages, data["sampler"], data["teacher"], mask, cfg)
    keep = adv.keep_rows.double()[:, None]
    leaves = {k: data[k].clone().requires_grad_(True) for k in ("logprobs", "entropy", "values")}
    with_critic = adv.returns is not None
    loss, _ = update_loss(
        UpdateBatch(
            logprobs=leaves["logprobs"],
            old_logprobs=data["old"],
            ref_logprobs=data["ref"],
            advantages=advantages,
            mask=mask * keep,
            entropy=leaves["entropy"],
            values=leaves["values"] if with_critic else None,
            old_values=data["old_values"] if with_critic else None,
            returns=adv.returns,
            sampler_logprobs=data["sampler"],
            teacher_logprobs=data["teacher"],
        ),
        cfg,
        make_aggregator(cfg, max_new_tokens),
    )
    grads = torch.autograd.grad(loss, list(leaves.values()), allow_unused=True)
    flat = torch.cat(
        [(torch.zeros_like(leaf) if grad is None else grad).flatten() for leaf, grad in zip(leaves.values(), grads)]
    )
    return ProbeResult(loss=float(loss.detach()), gradient=tuple(flat.detach().tolist()))
