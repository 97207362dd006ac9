"""The sampler-trainer mismatch correction: each variant by hand, on a planted mismatch.

In fp32 on the CPU the sampler and a training pass differ by ~2e-7 per token, so every test here
plants its own log-ratios log(pi_old / mu)."""

import math

import pytest
import torch

from harness.algorithms.aggregation import make_aggregator
from harness.algorithms.config import RLConfig
from harness.algorithms.mismatch import mismatch_weights
from harness.algorithms.objective import UpdateBatch, update_loss
from harness.algorithms.parts import MISMATCH

#: one row, three tokens, pi_old / mu = (3, 0.5, 1.2) (product 1.8), and a padded fourth holding garbage
WEIGHTS = [3.0, 0.5, 1.2]
OLD = torch.tensor([[-1.0, -2.0, -0.5, 30.0]], dtype=torch.float64)
SAMPLER = OLD - torch.tensor([[math.log(w) for w in WEIGHTS] + [-80.0]], dtype=torch.float64)
MASK = torch.tensor([[1.0, 1.0, 1.0, 0.0]], dtype=torch.float64)


def correct(kind, **kw):
    weights, metrics = mismatch_weights(OLD, SAMPLER, MASK, RLConfig(name="t", mismatch=kind, **kw))
    return weights[0].tolist(), {k: v.item() for k, v in metrics.items()}


@pytest.mark.parametrize(
    "kind, kw, expected, frac",
    [
        # TIS: min(w, C) per token
        ("token_truncate", {"mismatch_cap": 2.0}, [2.0, 0.5, 1.2, 0.0], 1 / 3),
        # MIS / IcePop: w inside [floor, C], 0 outside
        ("token_mask", {"mismatch_cap": 2.0}, [0.0, 0.5, 1.2, 0.0], 1 / 3),
        ("token_mask", {"mismatch_cap": 2.0, "mismatch_floor": 0.6}, [0.0, 0.0, 1.2, 0.0], 2 / 3),
        # the sequence's product 1.8 on every token
        ("sequence_truncate", {"mismatch_cap": 2.0}, [1.8, 1.8, 1.8, 0.0], 0.0),
        ("sequence_truncate", {"mismatch_cap": 1.5}, [1.5, 1.5, 1.5, 0.0], 1.0),
        ("sequence_mask", {"mismatch_cap": 2.0}, [1.8, 1.8, 1.8, 0.0], 0.0),
        ("sequence_mask", {"mismatch_cap": 1.5}, [0.0, 0.0, 0.0, 0.0], 1.0),  # the whole row masked
        ("sequence_mask", {"mismatch_cap": 3.0, "mismatch_floor": 2.0}, [0.0, 0.0, 0.0, 0.0], 1.0),
    ],
)
def test_each_correction_by_hand(kind, kw, expected, frac):
    weights, metrics = correct(kind, **kw)
    assert weights == pytest.approx(expected)
    assert metrics["mismatch_frac"] == pytest.approx(frac)
    assert metrics["mismatch_weight_mean"] == pytest.approx(sum(expected) / 3)
    # verl's mismatch metrics: k1 = mean(log mu - log pi_old) = -ln(1.8) / 3, k3 = mean(w - ln w - 1)
    assert metrics["mismatch_kl"] == pytest.approx(-math.log(1.8) / 3)
    assert metrics["mismatch_k3"] == pytest.approx(sum(w - math.log(w) - 1 for w in WEIGHTS) / 3)


def test_no_correction_is_an_exact_one_with_no_metrics():
    weights, metrics = correct("none")
    assert weights == [1.0] * 4  # padding too: the aggregation never reads it
    assert metrics == {}
    assert MISMATCH.meta("none")["compares"] is False
    assert all(MISMATCH.meta(n)["compares"] for n in MISMATCH.names() if n != "none")


@pytest.mark.parametrize("kind", [n for n in MISMATCH.names() if n != "none"])
def test_no_mismatch_gives_weight_one(kind):
    weights, metrics = mismatch_weights(OLD, OLD, MASK, RLConfig(name="t", mismatch=kind))
    assert weights[0, :3].tolist() == [1.0, 1.0, 1.0]
    assert metrics["mismatch_frac"].item() == 0.0 and metrics["mismatch_kl"].item() == 0.0


@pytest.mark.parametrize("kind", [n for n in MISMATCH.names() if n != "none"])
@pytest.mark.parametrize("log_weight", [100.0, -100.0])
def test_extreme_log_weights_stay_finite_in_fp32(kind, log_weight):
    # the log-weight is clamped to +-20 before exp (verl's SAFETY_BOUND): e^100 would be inf in fp32
    old = torch.full((2, 3), -1.0)
    sampler = old - log_weight
    weights, metrics = mismatch_weights(old, sampler, torch.ones(2, 3), RLConfig(name="t", mismatch=kind))
    assert torch.all(torch.isfinite(weights)) and all(math.isfinite(v.item()) for v in metrics.values())
    # above the cap: truncated to C or masked to 0; far below: a weight of ~e^-20 (or masked by a floor)
    if log_weight > 0:
        assert weights.unique().tolist() == ([2.0] if kind.endswith("truncate") else [0.0])
    else:  # m2po keeps one of the 6 tied tokens, weighed by 6 tokens / 1 kept (its denominator)
        assert torch.all(weights <= math.exp(-20.0) * 1.0001 * (6 if kind == "m2po" else 1))


def test_the_weights_multiply_each_tokens_policy_term_and_nothing_else():
    # one token, ratio 1 (old = current), A = 1, a planted pi_old / mu = 3 capped at 2: the
    # policy term -r A becomes -2; the KL-in-loss and entropy terms are untouched
    logp = torch.tensor([[math.log(0.5)]], dtype=torch.float64, requires_grad=True)
    batch = UpdateBatch(
        logprobs=logp,
        old_logprobs=logp.detach(),
        ref_logprobs=logp.detach() + 0.1,
        advantages=torch.ones(1, 1, dtype=torch.float64),
        mask=torch.ones(1, 1, dtype=torch.float64),
        entropy=torch.full((1, 1), 0.7, dtype=torch.float64),
        sampler_logprobs=logp.detach() - math.log(3.0),
    )
    cfg = RLConfig(name="t", mismatch="token_truncate", kl_placement="loss", kl_coef=0.04)
    loss, metrics = update_loss(batch, cfg, make_aggregator(cfg, 4))
    k3 = math.exp(0.1) - 0.1 - 1
    assert metrics["train/policy_loss"].item() == pytest.approx(-2.0)
    assert loss.item() == pytest.approx(-2.0 + 0.04 * k3)
    assert metrics["train/mismatch_frac"].item() == 1.0
    (grad,) = torch.autograd.grad(loss, logp)
    # the weight is detached: d(-w r A)/dlogp = -w = -2, plus the KL term's gradient 0.04 * (1 - e^0.1)
    assert grad.item() == pytest.approx(-2.0 + 0.04 * (1 - math.exp(0.1)))
    # without sampler log-probs (None: the old ones) the correction is 1
    plain = UpdateBatch(**{**vars(batch), "sampler_logprobs": None})
    assert update_loss(plain, cfg, make_aggregator(cfg, 4))[1]["train/policy_loss"].item() == pytest.approx(-1.0)
