"""Do the seeds reach the rollouts? Checked once before a study's first trial.

Widely used trainers have shipped versions in which the seed never reached the sampler, so every
"seed" of a study was the same run and its noise floor was zero. ``check_seeds(spec)`` starts
the control's trial as ``run_trial`` does (task, warm-started policy, the trial generator) and
samples the first step's rollouts three times on the same prompts: at the trial's seed, at that
seed again, and at the next seed. The same seed must give the same rollouts (bitwise on a CPU;
on a GPU, whose kernels are not bitwise deterministic, at least ``GPU_TOKEN_AGREEMENT`` of the
tokens alike and the log-probs of those within ``GPU_LOGPROB_TOL``), and the two seeds
different ones. Either failure is a ``SeedCheckError`` that says what it saw and what to do.
It runs in a trial process (the runner reaches it by ``"harness.engine.seed_check:check_seeds"``)
and returns a ``TrialResult`` whose ``final`` holds what it measured.
"""

from __future__ import annotations

import time

import torch

from harness.engine.generation import generate
from harness.engine.rollout import Rollout
from harness.engine.spec import TrialResult, TrialSpec
from harness.engine.trial import prompt_batches, start_policy, trial_generator
from harness.errors import HarnessError

GPU_TOKEN_AGREEMENT = 0.99
GPU_LOGPROB_TOL = 1e-3


class SeedCheckError(HarnessError):
    """The seed does not reach the rollouts, or one seed does not repeat."""


def _first_rollout(lm, task, spec: TrialSpec, prompts: list[str], group: int) -> Rollout:
    lm.model.eval()
    return generate(
        lm,
        task,
        prompts,
        group,
        max_new_tokens=spec.train.max_new_tokens,
        temperature=spec.train.temperature,
        generator=trial_generator(spec, lm.device),
    ).rollout


def _agreement(a: Rollout, b: Rollout) -> tuple[float, float]:
    """(share of generated tokens alike, largest log-prob gap on the tokens alike)."""
    width = max(a.completion_ids.shape[1], b.completion_ids.shape[1])

    def padded(t: torch.Tensor, value) -> torch.Tensor:
        return torch.nn.functional.pad(t, (0, width - t.shape[1]), value=value)

    ids_a, ids_b = padded(a.completion_ids, -1), padded(b.completion_ids, -1)
    mask = torch.maximum(padded(a.completion_mask, 0.0), padded(b.completion_mask, 0.0)) > 0
    alike = (ids_a == ids_b) & mask
    share = float(alike.sum() / mask.sum().clamp(min=1))
    gap = (padded(a.logprobs, 0.0) - padded(b.logprobs, 0.0)).abs()[alike]
    return share, float(gap.max()) if gap.numel() else 0.0


def check_seeds(spec: TrialSpec) -> TrialResult:
    started = time.perf_counter()
    task, lm, _, _ = start_policy(spec)
    prompts = [item.prompt for item in prompt_batches(task.train, spec.train.prompts_per_step, 1, spec.seed)[0]]
    group = spec.algorithm.group_size
    other = spec.model_copy(update={"seed": spec.seed + 1})
    first, again, second = (_first_rollout(lm, task, s, prompts, group) for s in (spec, spec, other))
    same_share, same_gap = _agreement(first, again)
    other_share, _ = _agreement(first, second)
    on_gpu = lm.device.type != "cpu"
    repeats = (
        (same_share >= GPU_TOKEN_AGREEMENT and same_gap <= GPU_LOGPROB_TOL)
        if on_gpu
        else (torch.equal(first.completion_ids, again.completion_ids) and torch.equal(first.logprobs, again.logprobs))
    )
    where = f"arm {spec.arm}'s first step ({len(prompts)} prompts x {group} samples)"
    if not repeats:
        raise SeedCheckError(
            f"seed {spec.seed} twice gave different rollouts in {where}: {same_share:.1%} of the tokens alike, "
            f"log-probs apart by up to {same_gap:.3g}; sampling is not reproducible, so no seed can be re-run "
            "or paired; find the nondeterminism (or set checks: {seeds: false} to run anyway)"
        )
    if other_share == 1.0:
        raise SeedCheckError(
            f"seeds {spec.seed} and {other.seed} gave identical rollouts in {where}: the seed does not reach the "
            "sampler (or the policy is deterministic at this temperature), so every seed would be the same run; "
            "fix the seeding (or set checks: {seeds: false} if a deterministic policy is intended)"
        )
    return TrialResult(
        trial_id=spec.trial_id,
        final={
            "check/same_seed_tokens_alike": same_share,
            "check/same_seed_logprob_gap": same_gap,
            "check/other_seed_tokens_alike": other_share,
        },
        wall_time_s=time.perf_counter() - started,
    )
