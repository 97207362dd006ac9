"""Clip-Cov and KL-Cov (Cui et al. 2025, arXiv:2505.22617) by hand, against verl's formulas."""

import math

import pytest
import torch

from harness.algorithms.config import RLConfig
from harness.algorithms.covariance_losses import covariance, largest, random_pick
from harness.algorithms.parts import POLICY_LOSSES


def total(per_token, mask):
    return torch.where(mask.bool(), per_token, 0.0).sum()


#: two rows of two tokens: mean A = 0, mean log pi = -2, so c = A * (log pi + 2):
#: (0,0) 1.5, (0,1) -1.5, (1,0) 0.5, (1,1) -0.5
LOGP = [[-0.5, -3.5], [-2.5, -1.5]]
ADV = torch.tensor([[1.0, 1.0], [-1.0, -1.0]], dtype=torch.float64)
MASK = torch.ones(2, 2, dtype=torch.float64)


def run(name, log_ratios=((0.0, 0.0), (0.0, 0.0)), **kw):
    logp = torch.tensor(LOGP, dtype=torch.float64, requires_grad=True)
    old = logp.detach() - torch.tensor(log_ratios, dtype=torch.float64)
    loss, metrics = POLICY_LOSSES.get(name)(logp, old, ADV, MASK, RLConfig(name="t", **kw), total)
    loss.backward()
    return loss.item(), logp.grad, metrics


def test_covariance_by_hand():
    cov = covariance(torch.tensor(LOGP, dtype=torch.float64), ADV, MASK)
    assert cov.flatten().tolist() == pytest.approx([1.5, -1.5, 0.5, -0.5])
    # padding is left out of both means
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    cov = covariance(torch.tensor([[-1.0, -3.0, 40.0]]), torch.tensor([[1.0, -1.0, 9.0]]), mask)
    assert cov[0, :2].tolist() == pytest.approx([1.0, 1.0])


def test_largest_takes_the_budget_of_eligible_tokens_ties_to_the_earlier():
    score = torch.tensor([[3.0, 1.0, 4.0, 1.0], [5.0, 9.0, 2.0, 6.0]])
    eligible = torch.ones(2, 4, dtype=torch.bool)
    eligible[1, 1] = False  # the 9 is not eligible
    # share 0.5 of 8 tokens: 4, the eligible largest 6, 5, 4, 3
    chosen = largest(score, eligible, 0.5, torch.ones(2, 4))
    assert chosen.nonzero().tolist() == [[0, 0], [0, 2], [1, 0], [1, 3]]
    # a share below one token still takes one (verl's max(1, int(r * n)))
    assert largest(score, eligible, 2e-4, torch.ones(2, 4)).nonzero().tolist() == [[1, 3]]
    assert largest(torch.ones(1, 3), torch.ones(1, 3, dtype=torch.bool), 0.1, torch.ones(1, 3)).tolist() == [
        [True, False, False]
    ]
    # no eligible token: none
    assert not largest(score, torch.zeros_like(eligible), 0.5, torch.ones(2, 4)).any()


def test_random_pick_takes_the_budget_from_the_eligible_tokens_the_same_each_time():
    eligible = torch.zeros(4, 50, dtype=torch.bool)
    eligible[:, ::3] = True  # 68 eligible of 200
    picked = random_pick(eligible, 0.1, torch.ones(4, 50))  # floor(0.1 * 200) = 20
    assert picked.sum().item() == 20 and not (picked & ~eligible).any()
    assert torch.equal(picked, random_pick(eligible, 0.1, torch.ones(4, 50)))
    # not the first eligible positions: a random subset, spread over the rows
    assert not torch.equal(picked, largest(-torch.arange(200.0).view(4, 50), eligible, 0.1, torch.ones(4, 50)))
    assert (picked.sum(dim=1) > 0).all()
    # it leaves torch's global generator alone
    state = torch.random.get_rng_state()
    random_pick(eligible, 0.1, torch.ones(4, 50))
    assert torch.equal(state, torch.random.get_rng_state())


def test_clip_cov_detaches_the_band_token():
    # on-policy, band (1, 5): only (0,0) with c = 1.5; budget max(1, floor(2e-4 * 4)) = 1.
    # Loss -r A summed, with (0,0) set to 0: -1 + 1 + 1 = 1; (0,0) gets no gradient.
    loss, grad, metrics = run("clip_cov")
    assert loss == pytest.approx(1.0)
    assert grad.tolist() == [[0.0, -1.0], [1.0, 1.0]]
    assert metrics["cov_frac"].item() == 0.25 and metrics["clip_frac"].item() == 0.25
    # a band that holds nothing: the plain clipped surrogate
    loss, grad, metrics = run("clip_cov", clip_cov_lb=2.0, clip_cov_ub=5.0)
    assert loss == pytest.approx(0.0) and grad.tolist() == [[-1.0, -1.0], [1.0, 1.0]]
    assert metrics["cov_frac"].item() == 0.0


def test_clip_cov_leaves_out_the_tokens_the_clip_already_cut():
    # (0,0) at ratio 1.5 with A = +1 is clipped at 1.2 by PPO: no longer a candidate, so no token
    # is chosen; clip_frac counts the clipped one
    loss, grad, metrics = run("clip_cov", log_ratios=((math.log(1.5), 0.0), (0.0, 0.0)))
    assert metrics["cov_frac"].item() == 0.0 and metrics["clip_frac"].item() == 0.25
    assert loss == pytest.approx(-1.2 - 1 + 1 + 1)
    assert grad.flatten().tolist() == pytest.approx([0.0, -1.0, 1.0, 1.0])


def test_clip_cov_budget_is_a_share_of_the_tokens():
    # band (0, 5) holds (0,0) 1.5 and (1,0) 0.5; a share of 0.5 of 4 tokens takes both
    _, grad, metrics = run("clip_cov", clip_cov_lb=0.0, clip_cov_ratio=0.5)
    assert grad.tolist() == [[0.0, -1.0], [0.0, 1.0]] and metrics["cov_frac"].item() == 0.5
    # a budget of one from a band of two takes one of them
    _, grad, metrics = run("clip_cov", clip_cov_lb=0.0)
    assert metrics["cov_frac"].item() == 0.25 and (grad[0, 0] == 0) != (grad[1, 0] == 0)


def test_kl_cov_penalises_the_largest_covariance_with_abs_log_ratio():
    # (0,0) has the largest covariance (1.5); at log-ratio 0.2 its term is -e^0.2 * 1 + 1 * 0.2,
    # its gradient -e^0.2 + 1; the others are -r A at ratio 1. No clip anywhere.
    loss, grad, metrics = run("kl_cov", log_ratios=((0.2, 0.0), (0.0, 0.0)), kl_cov_coef=1.0)
    assert loss == pytest.approx(-math.exp(0.2) + 0.2 - 1 + 1 + 1)
    assert grad.flatten().tolist() == pytest.approx([-math.exp(0.2) + 1, -1.0, 1.0, 1.0])
    assert metrics["cov_frac"].item() == 0.25 and metrics["clip_frac"].item() == 0.0
    # the coefficient scales the penalty only
    loss_half, _, _ = run("kl_cov", log_ratios=((0.2, 0.0), (0.0, 0.0)), kl_cov_coef=0.5)
    assert loss - loss_half == pytest.approx(0.1)
    # without a clip a ratio of 2 keeps its full weight, where the clipped loss stops at 1.2
    _, grad, _ = run("kl_cov", log_ratios=((0.0, math.log(2.0)), (0.0, 0.0)))
    assert grad[0, 1].item() == pytest.approx(-2.0)


def test_which_tokens_are_chosen_follows_the_batch_it_is_given():
    # the covariance is relative to the batch's means: (0,0) alone, in a batch of its row only,
    # has covariance 0 (A equals its mean) and is not in the band
    logp = torch.tensor([LOGP[0]], dtype=torch.float64, requires_grad=True)
    _, metrics = POLICY_LOSSES.get("clip_cov")(logp, logp.detach(), ADV[:1], MASK[:1], RLConfig(name="t"), total)
    assert metrics["cov_frac"].item() == 0.0
