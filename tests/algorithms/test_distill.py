"""On-policy distillation (``distill.py``): the reverse KL to a teacher's log-probs on the sampled
tokens, in the advantage as tinker-cookbook puts it and in the loss as TRL's server distillation
does; by hand, and against each framework's formula transcribed below from its own source:
tinker-cookbook tinker_cookbook/distillation/train_on_policy.py and tinker_cookbook/rl/metrics.py
@9dfcc3a2cf44432d621a01005073dc6d76a1e87a; TRL
trl/experimental/server_distillation/server_distillation_trainer.py
@f2cd57710ae345ea6428ae95363267fcf38a3dc8."""

import math

import numpy as np
import pytest
import torch

from harness.algorithms.aggregation import make_aggregator
from harness.algorithms.distill import distilled_advantages, teacher_advantages, top1_tail_reverse_kl
from harness.algorithms.objective import UpdateBatch, update_loss
from harness.algorithms.presets import resolve_algorithm

F64 = torch.float64


# --- tinker-cookbook, transcribed (train_on_policy.py@9dfcc3a incorporate_kl_penalty, lines 91-105;
# rl/metrics.py@9dfcc3a discounted_future_sum_vectorized, lines 192-211), one datum (row) at a time ---
def _tinker_discounted_future_sum(x: np.ndarray, gamma: float) -> np.ndarray:
    result = np.empty_like(x)
    running = 0.0
    for t in range(len(x) - 1, -1, -1):
        running = x[t] + gamma * running
        result[t] = running
    return result


def _tinker_kl_advantages(sampled_logprobs, teacher_logprobs, mask, kl_penalty_coef, kl_discount_factor):
    rows = []
    for sampled, teacher, float_mask in zip(sampled_logprobs, teacher_logprobs, mask):
        reverse_kl = (sampled - teacher) * float_mask
        kl_advantages = -kl_penalty_coef * float_mask * reverse_kl
        if kl_discount_factor > 0:
            kl_advantages = _tinker_discounted_future_sum(kl_advantages, kl_discount_factor)
        rows.append(kl_advantages)
    return np.stack(rows)


# --- TRL, transcribed (server_distillation_trainer.py@f2cd577: _jsd_divergence lines 27-68 at beta 1 with a
# support mask, _add_tail_bucket lines 71-82, _compute_sparse_top_1_divergence_loss lines 197-242 at beta 1,
# _reduce_divergence_loss 'batchmean') ---
def _trl_add_tail_bucket(log_probs, valid_mask):
    log_sum = torch.logsumexp(log_probs, dim=-1, keepdim=True)
    log_sum = torch.clamp(log_sum, max=-1e-7)
    tail = torch.log(-torch.expm1(log_sum))
    tail_mask = torch.ones_like(valid_mask[..., :1], dtype=torch.bool)
    return torch.cat([log_probs, tail], dim=-1), torch.cat([valid_mask, tail_mask], dim=-1)


def _trl_reverse_kl(student_log_probs, teacher_log_probs, support_mask):
    safe_student = torch.where(support_mask, student_log_probs, torch.zeros_like(student_log_probs))
    safe_teacher = torch.where(support_mask, teacher_log_probs, torch.zeros_like(teacher_log_probs))
    student_probs = torch.where(support_mask, student_log_probs.exp(), torch.zeros_like(student_log_probs))
    return torch.nan_to_num(student_probs * (safe_student - safe_teacher), nan=0.0)


def _trl_top1_loss(sampled_student_logprobs, teacher_actual_logprobs, completion_mask):
    """The loss at beta 1, 'sampled' mode, top-1 with tail: the student's log-prob of each sampled token
    (what ``student_log_probs.gather(-1, support)`` picks), the teacher's ``actual_logprobs``."""
    required = completion_mask.bool()
    teacher_actual_logprobs = torch.where(~required, 0.0, teacher_actual_logprobs)
    support_mask = torch.ones_like(sampled_student_logprobs.unsqueeze(-1), dtype=torch.bool)
    student_sparse, support_mask2 = _trl_add_tail_bucket(sampled_student_logprobs.unsqueeze(-1), support_mask)
    teacher_sparse, _ = _trl_add_tail_bucket(teacher_actual_logprobs.unsqueeze(-1), support_mask)
    jsd = _trl_reverse_kl(student_sparse, teacher_sparse, support_mask2)
    jsd = jsd[required]
    return jsd.sum() / required.sum().clamp_min(1)


# --- the advantage (tinker-cookbook) ---
def test_teacher_advantage_by_hand():
    sampler = torch.tensor([[-1.0, -2.0, -0.3]], dtype=F64)
    teacher = torch.tensor([[-1.5, -1.0, -9.0]], dtype=F64)
    mask = torch.tensor([[1.0, 1.0, 0.0]], dtype=F64)
    # -(log p - log q): -(-1 + 1.5) = -0.5, -(-2 + 1) = +1; padding 0
    assert teacher_advantages(sampler, teacher, mask, 1.0, 0.0).tolist() == [[-0.5, 1.0, 0.0]]
    assert teacher_advantages(sampler, teacher, mask, 2.0, 0.0).tolist() == [[-1.0, 2.0, 0.0]]
    # discount 0.5: -0.5 + 0.5 * 1 = 0 on the first token
    assert teacher_advantages(sampler, teacher, mask, 1.0, 0.5).tolist() == [[0.0, 1.0, 0.0]]


@pytest.mark.parametrize("coef, discount", [(1.0, 0.0), (0.3, 0.0), (1.0, 0.9), (2.0, 1.0)])
def test_teacher_advantage_matches_tinker_cookbook(coef, discount):
    gen = torch.Generator().manual_seed(0)
    sampler = -torch.rand(4, 6, generator=gen, dtype=F64) * 5
    teacher = -torch.rand(4, 6, generator=gen, dtype=F64) * 5
    mask = torch.tensor([[1.0] * 6, [1.0] * 3 + [0.0] * 3, [1.0] + [0.0] * 5, [0.0] * 6], dtype=F64)
    ours = teacher_advantages(sampler, teacher, mask, coef, discount)
    theirs = _tinker_kl_advantages(sampler.numpy(), teacher.numpy(), mask.numpy(), coef, discount)
    assert np.allclose(ours.numpy(), theirs * mask.numpy())  # on the tokens: tinker's; the harness zeroes padding
    assert ours[3].abs().sum() == 0  # an all-padding row: nothing
    assert ours[2, 1:].abs().sum() == 0 and ours[2, 0] == pytest.approx(theirs[2, 0])  # a one-token row


def test_teacher_advantage_clamps_the_log_ratio_and_masks_nan_padding():
    sampler = torch.tensor([[-0.1, -50.0, float("nan")]], dtype=F64)
    teacher = torch.tensor([[-130.0, -0.2, float("nan")]], dtype=F64)
    mask = torch.tensor([[1.0, 1.0, 0.0]], dtype=F64)
    out = teacher_advantages(sampler, teacher, mask, 1.0, 0.5)
    # log-ratios 129.9 and -49.8 clamped to +-20 (tinker: unclamped); NaN padding gives 0
    assert out.tolist() == [[-20.0 + 0.5 * 20.0, 20.0, 0.0]]
    theirs = _tinker_kl_advantages(sampler[:, :2].numpy(), teacher[:, :2].numpy(), mask[:, :2].numpy(), 1.0, 0.0)
    assert theirs.tolist() == [[pytest.approx(-129.9), pytest.approx(49.8)]]  # where the clamp departs


def test_distilled_advantages_keep_or_drop_the_task_reward():
    task = torch.tensor([[0.5, 0.5], [-0.5, 0.0]], dtype=F64)
    sampler = torch.tensor([[-1.0, -1.0], [-1.0, -1.0]], dtype=F64)
    teacher = torch.tensor([[-2.0, -1.0], [-0.5, -1.0]], dtype=F64)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]], dtype=F64)
    kl_term = torch.tensor([[-1.0, 0.0], [0.5, 0.0]], dtype=F64)
    alone = resolve_algorithm("on_policy_distill")
    assert torch.equal(distilled_advantages(task, sampler, teacher, mask, alone), kl_term)
    both = resolve_algorithm("on_policy_distill", {"distill_task_reward": True, "distill_coef": 0.5})
    assert torch.equal(distilled_advantages(task, sampler, teacher, mask, both), task + 0.5 * kl_term)
    grpo = resolve_algorithm("grpo")
    assert distilled_advantages(task, sampler, None, mask, grpo) is task
    with pytest.raises(ValueError, match="teacher's log-probs"):
        distilled_advantages(task, sampler, None, mask, alone)
    # the loss part leaves the advantages to the task reward (or to nothing)
    in_loss = resolve_algorithm("trl_server_distillation")
    assert distilled_advantages(task, sampler, teacher, mask, in_loss).abs().sum() == 0


# --- the loss (TRL) ---
def test_top1_tail_reverse_kl_by_hand():
    # p_s = 0.5, p_t = 0.25: 0.5 ln(0.5 / 0.25) + 0.5 ln(0.5 / 0.75) = 0.5 ln(4/3)
    student = torch.log(torch.tensor([[0.5, 0.25]], dtype=F64))
    teacher = torch.log(torch.tensor([[0.25, 0.25]], dtype=F64))
    out = top1_tail_reverse_kl(student, teacher, torch.ones(1, 2, dtype=F64))
    assert out.tolist() == [[pytest.approx(0.5 * math.log(4 / 3)), pytest.approx(0.0, abs=1e-15)]]
    # d/d log p_s = p_s (log p_s - log p_t) - p_s (log(1 - p_s) - log(1 - p_t)) = 0.5 ln 2 - 0.5 ln(2/3) = 0.5 ln 3
    student.requires_grad_(True)
    top1_tail_reverse_kl(student, teacher, torch.ones(1, 2, dtype=F64)).sum().backward()
    assert student.grad[0, 0].item() == pytest.approx(0.5 * math.log(3))


def _inputs(seed: int):
    gen = torch.Generator().manual_seed(seed)
    student = torch.log(torch.rand(4, 5, generator=gen, dtype=F64).clamp(min=1e-3))
    teacher = torch.log(torch.rand(4, 5, generator=gen, dtype=F64).clamp(min=1e-3))
    mask = torch.tensor([[1.0] * 5, [1.0] * 2 + [0.0] * 3, [1.0] + [0.0] * 4, [0.0] * 5], dtype=F64)
    return student, teacher, mask


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_top1_tail_reverse_kl_matches_trl_value_and_gradient(seed):
    student, teacher, mask = _inputs(seed)
    token_mean = make_aggregator(resolve_algorithm("trl_server_distillation"), 5)
    ours_in = student.clone().requires_grad_(True)
    ours = token_mean(top1_tail_reverse_kl(ours_in, teacher, mask), mask)
    ours.backward()
    theirs_in = student.clone().requires_grad_(True)
    theirs = _trl_top1_loss(theirs_in, teacher, mask)
    theirs.backward()
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-12)
    assert torch.allclose(ours_in.grad, theirs_in.grad * mask, atol=1e-12)


def test_top1_tail_reverse_kl_at_the_extremes():
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]], dtype=F64)
    # log-ratios +-20 exactly, beyond (+-100), a student sure of its token, and NaN padding
    student = torch.tensor([[-0.5, -100.5, -1e-12, float("nan")], [float("nan")] * 4], dtype=F64)
    teacher = torch.tensor([[-20.5, -0.5, -300.0, float("nan")], [float("nan")] * 4], dtype=F64)
    student.requires_grad_(True)
    out = top1_tail_reverse_kl(student, teacher, mask)
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(student.grad).all()
    assert out[1].abs().sum() == 0 and student.grad[1].abs().sum() == 0  # an all-padding row
    assert out[0, 3] == 0 and student.grad[0, 3] == 0  # NaN padding
    # at +20 exactly the clamp changes nothing: TRL's value
    theirs = _trl_top1_loss(student[:1, :1].detach(), teacher[:1, :1], mask[:1, :1])
    assert out[0, 0].item() == pytest.approx(theirs.item(), rel=1e-12)
    # beyond it, the tail's log-ratio log(1 - p_s) - log(1 - p_t) = log(1e-7) - 0 is inside +-20 (TRL's
    # clamp of the mass), the top's log-ratio 299.99 is clamped to 20
    p = math.exp(-1e-12)
    expected = p * 20.0 + (1 - math.exp(-1e-7)) * (math.log(-math.expm1(-1e-7)) - math.log(-math.expm1(-300.0)))
    assert out[0, 2].item() == pytest.approx(expected, rel=1e-9)
    assert _trl_top1_loss(student[:1, 2:3].detach(), teacher[:1, 2:3], mask[:1, 2:3]).item() > 299 * p


def test_the_loss_part_adds_the_weighted_reverse_kl_to_the_update_loss():
    student, teacher, mask = _inputs(4)
    cfg = resolve_algorithm("trl_server_distillation", {"distill_coef": 0.5})
    plain = resolve_algorithm("trl_server_distillation", {"distill": "none"})
    aggregate = make_aggregator(cfg, 5)

    def batch(teacher_logprobs):
        zero = torch.zeros_like(student)
        return UpdateBatch(student, student, student, zero, mask, zero, teacher_logprobs=teacher_logprobs)

    loss, metrics = update_loss(batch(teacher), cfg, aggregate)
    base, _ = update_loss(batch(teacher), plain, aggregate)
    distill = aggregate(top1_tail_reverse_kl(student, teacher, mask), mask)
    assert loss.item() == pytest.approx(base.item() + 0.5 * distill.item(), rel=1e-12)
    assert metrics["train/distill_loss"].item() == pytest.approx(distill.item())
    with pytest.raises(ValueError, match="teacher's log-probs"):
        update_loss(batch(None), cfg, aggregate)
