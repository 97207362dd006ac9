"""The top-entropy token filter (Wang et al. 2025, "Beyond the 80/20 Rule"), by hand."""

import pytest
import torch

from harness.algorithms.aggregation import make_aggregator
from harness.algorithms.config import RLConfig
from harness.algorithms.objective import UpdateBatch, update_loss
from harness.algorithms.token_filters import token_filter_weights


def test_top_entropy_keeps_tokens_at_or_above_the_quantile():
    # real entropies 0.1 .. 1.0 (ten tokens), the padded one 99: the 0.8 quantile (linear, as
    # torch.quantile and TRL) of 0.1..1.0 is 0.82, so 0.9 and 1.0 are kept: 20%
    entropy = torch.tensor([[0.1, 0.2, 0.3, 0.4, 0.5, 99.0], [0.6, 0.7, 0.8, 0.9, 1.0, 0.0]])
    mask = torch.tensor([[1.0, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]])
    mask[1, 5] = 0
    weights, metrics = token_filter_weights(entropy, mask, RLConfig(name="t", token_filter="top_entropy"))
    assert weights.tolist() == [[0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 1, 0]]
    assert metrics["token_filter_kept"].item() == pytest.approx(0.2)
    # share 0.5: the median 0.55 and up
    weights, _ = token_filter_weights(
        entropy, mask, RLConfig(name="t", token_filter="top_entropy", entropy_top_share=0.5)
    )
    assert weights.sum().item() == 5 and weights[1, :5].sum().item() == 5
    # all-padding: nothing kept, no error
    weights, _ = token_filter_weights(entropy, torch.zeros_like(mask), RLConfig(name="t", token_filter="top_entropy"))
    assert weights.sum().item() == 0


def test_all_keeps_every_token_exactly():
    weights, metrics = token_filter_weights(torch.rand(2, 3), torch.ones(2, 3), RLConfig(name="t"))
    assert torch.equal(weights, torch.ones(2, 3)) and metrics == {}


def test_filtered_tokens_give_no_policy_gradient_and_keep_their_place_in_the_denominator():
    # two tokens, entropies (0.1, 2.0), A = 1, on-policy: only the second is kept; token-mean over
    # both tokens (TRL multiplies the per-token loss, the mask's count stays): -1 / 2
    logp = torch.log(torch.tensor([[0.5, 0.25]], dtype=torch.float64)).requires_grad_()
    batch = UpdateBatch(
        logprobs=logp,
        old_logprobs=logp.detach(),
        ref_logprobs=logp.detach(),
        advantages=torch.ones(1, 2, dtype=torch.float64),
        mask=torch.ones(1, 2, dtype=torch.float64),
        entropy=torch.tensor([[0.1, 2.0]], dtype=torch.float64),
    )
    cfg = RLConfig(name="t", token_filter="top_entropy", aggregation="token_mean", entropy_top_share=0.5)
    loss, metrics = update_loss(batch, cfg, make_aggregator(cfg, 4))
    assert metrics["train/policy_loss"].item() == pytest.approx(-0.5)
    assert metrics["train/entropy"].item() == pytest.approx(1.05)  # the entropy term reads every token
    (grad,) = torch.autograd.grad(loss, logp)
    assert grad.tolist() == [[0.0, pytest.approx(-0.5)]]
