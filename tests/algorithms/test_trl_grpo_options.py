"""TRL GRPOTrainer's newer options (issue 35): INTELLECT-2's two-sided clip (``delta``), LUSPO and
VESPO (``loss_type``), DeepSeek-V3.2's off-policy sequence masking (``off_policy_mask_threshold``).

Each against numbers worked by hand and against TRL's own formula, re-implemented below in torch
from ``trl/trainer/grpo_trainer.py`` of TRL 1.16.0 (installed; ``GRPOTrainer._compute_loss``,
``get_gamma_weights``, ``get_off_policy_mask``), whose loss code is the same as huggingface/trl
f2cd577 but for the two places said at the functions. The references take TRL's shapes (the
advantage one per row, ``[B, 1]``) and clean padding; where the harness departs by convention
(log-ratios clamped at +-20, NaN padding masked with ``where``, empty rows left out of row means)
the test says so and checks the departure itself.
"""

from __future__ import annotations

import math

import pytest
import torch

from harness.algorithms.aggregation import make_aggregator
from harness.algorithms.config import RLConfig
from harness.algorithms.objective import UpdateBatch, update_loss
from harness.algorithms.off_policy_masks import off_policy_mask_weights
from harness.algorithms.parts import POLICY_LOSSES
from harness.algorithms.presets import PRESETS, resolve_algorithm

# --- TRL 1.16.0 trl/trainer/grpo_trainer.py, transcribed ----------------------------------------


def trl_clipped_per_token(logps, old, adv, mask, eps_low, eps_high, delta=None, level="token"):
    """``_compute_loss``, loss types grpo/bnpo/dr_grpo/dapo/luspo: ``coef_1`` (token or sequence
    level), ``coef_2`` its clip, ``coef_1`` clamped at ``delta`` (two-sided clipping), then
    ``-min(coef_1 * A, coef_2 * A)``."""
    log_ratio = logps - old
    if level == "token":
        log_iw = log_ratio
    else:
        log_iw = ((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1)
    coef_1 = torch.exp(log_iw)
    coef_2 = torch.clamp(coef_1, 1 - eps_low, 1 + eps_high)
    if delta is not None:
        coef_1 = torch.clamp(coef_1, max=delta)
    return -torch.min(coef_1 * adv, coef_2 * adv)


def trl_aggregate(per_token_loss, mask, loss_type):
    """``_compute_loss``'s aggregation for one micro-batch without gradient accumulation."""
    if loss_type == "grpo":
        return ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    if loss_type == "luspo":  # 1.16; f2cd577: (per_token_loss * mask.sum(1, keepdim=True)).mean()
        return (per_token_loss * mask).sum(-1).mean()
    if loss_type in ("bnpo", "vespo"):  # vespo: num_items_in_batch, the batch's tokens when it is one step
        return (per_token_loss * mask).sum() / mask.sum().clamp(min=1.0)
    raise AssertionError(loss_type)


@torch.no_grad()
def trl_gamma_weights(adv, log_ratio_per_token, mask, k_pos=2.0, lambda_pos=3.0, k_neg=3.0, lambda_neg=2.0):
    """``get_gamma_weights`` without vLLM's importance ratio (identical in 1.16 and f2cd577)."""
    lower_clamp = math.log(1e-8)
    log_ratio_clamped = torch.clamp(log_ratio_per_token, -20.0, 20.0)
    seq_log_ratio = torch.sum(log_ratio_clamped * mask, dim=-1, keepdim=True)
    log_w_seq = torch.clamp(seq_log_ratio, lower_clamp, 20.0)
    w_seq = torch.exp(log_w_seq)
    is_nonneg_adv = adv >= 0
    k_seq = torch.where(is_nonneg_adv, k_pos, k_neg)
    lambda_seq = torch.where(is_nonneg_adv, lambda_pos, lambda_neg).clamp(min=1e-4)
    log_phi = lambda_seq + k_seq * log_w_seq - lambda_seq * w_seq
    return torch.exp(log_phi).nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)


def trl_vespo_loss(logps, old, adv, mask, **kernel):
    phi = trl_gamma_weights(adv, logps - old, mask, **kernel)
    return trl_aggregate(-phi * adv * logps, mask, "vespo")


def trl_off_policy_mask(adv, logps, sampling, mask, threshold):
    """``get_off_policy_mask`` (1.16 adds ``nan_to_num`` of the KL; f2cd577 has none)."""
    kl_div = torch.nan_to_num(sampling - logps.detach(), nan=0.0)
    avg_seq_kl = (kl_div * mask).sum(dim=1, keepdim=True) / mask.sum(dim=1, keepdim=True).clamp(min=1.0)
    return ((adv >= 0) | (avg_seq_kl <= threshold)).to(dtype=mask.dtype)


# --- helpers --------------------------------------------------------------------------------------


def cfg(**fields) -> RLConfig:
    return RLConfig(name="t", **fields)


def harness_loss(loss: str, logps, old, adv_rows, mask, aggregation="seq_mean_token_mean", **fields):
    """The harness's loss and d loss / d logprobs; advantages placed on every token of the row."""
    config = cfg(policy_loss=loss, aggregation=aggregation, **fields)
    leaf = logps.clone().requires_grad_(True)
    adv = torch.where(mask.bool(), adv_rows.expand_as(mask), 0.0)
    value, _ = POLICY_LOSSES.get(loss)(leaf, old, adv, mask, config, make_aggregator(config, mask.shape[1]))
    (grad,) = torch.autograd.grad(value, leaf)
    return value.detach(), grad


def reference(fn, logps, *args, **kwargs):
    leaf = logps.clone().requires_grad_(True)
    value = fn(leaf, *args, **kwargs)
    (grad,) = torch.autograd.grad(value, leaf)
    return value.detach(), grad


def batch(seed=0, rows=6, length=7, scale=0.6):
    """Random rows of lengths 1..length, padding 0 in every tensor."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, length + 1, (rows,), generator=g)
    lengths[0] = 1  # a one-token row
    mask = (torch.arange(length)[None, :] < lengths[:, None]).double()
    old = -torch.rand(rows, length, generator=g, dtype=torch.float64) * 3 - 0.05
    logps = old + scale * torch.randn(rows, length, generator=g, dtype=torch.float64)
    adv = torch.randn(rows, 1, generator=g, dtype=torch.float64)
    return logps * mask, old * mask, adv, mask


def close(a, b):
    return torch.allclose(a, b, rtol=1e-10, atol=1e-12)


# --- two-sided clip: TRL's delta ------------------------------------------------------------------


def one_token(loss, ratio, advantage, **fields):
    logps, old = (
        torch.tensor([[math.log(ratio) - 1.0]], dtype=torch.float64),
        torch.tensor([[-1.0]], dtype=torch.float64),
    )
    value, grad = harness_loss(
        loss, logps, old, torch.tensor([[advantage]], dtype=torch.float64), torch.ones(1, 1), **fields
    )
    return round(float(value), 10), round(float(grad[0, 0]), 10)


def test_two_sided_delta_by_hand():
    # A < 0: the term -min(min(r, 4) A, clip(r) A) is r |A| up to 4 |A|, then flat (no gradient)
    assert one_token("clipped", 5.0, -1.0, two_sided_delta=4.0) == (4.0, 0.0)
    assert one_token("clipped", 2.0, -1.0, two_sided_delta=4.0) == (2.0, 2.0)  # d(r|A|)/dlogp = r|A|
    assert one_token("clipped", 5.0, -1.0) == (5.0, 5.0)  # without it, unbounded
    # A > 0 and delta above the band: the clip already won, nothing changes
    assert one_token("clipped", 5.0, 1.0, two_sided_delta=4.0) == one_token("clipped", 5.0, 1.0) == (-1.2, 0.0)
    # delta inside the band caps positive advantages too: min(1.1, 1.15) = 1.1
    assert one_token("clipped", 1.15, 1.0, two_sided_delta=1.1) == (-1.1, 0.0)


@pytest.mark.parametrize("delta", [1.1, 1.5, 4.0])
@pytest.mark.parametrize("loss,level", [("clipped", "token"), ("gspo", "sequence")])
def test_two_sided_delta_matches_trl(delta, loss, level):
    logps, old, adv, mask = batch(seed=1, scale=0.8)
    eps = {"eps_low": 0.2, "eps_high": 0.28}
    got = harness_loss(loss, logps, old, adv, mask, two_sided_delta=delta, **eps)

    def trl(leaf):
        return trl_aggregate(trl_clipped_per_token(leaf, old, adv, mask, 0.2, 0.28, delta, level), mask, "grpo")

    want = reference(trl, logps)
    assert close(got[0], want[0]) and close(got[1], want[1])


def test_two_sided_delta_at_extreme_log_ratios():
    # log-ratios of +30 and +100 (beyond the harness's +-20 clamp; TRL's exp runs on, e^100 in fp64):
    # delta (A < 0) or the clip (A > 0) binds, both give the capped value and no gradient
    logps = torch.tensor([[30.0 - 1, 100.0 - 1]], dtype=torch.float64)
    old, mask = torch.full((1, 2), -1.0, dtype=torch.float64), torch.ones(1, 2, dtype=torch.float64)
    for sign, capped in ((1.0, -1.2), (-1.0, 4.0)):
        adv = torch.full((1, 1), sign, dtype=torch.float64)
        got = harness_loss("clipped", logps, old, adv, mask, two_sided_delta=4.0)

        def trl(leaf, adv=adv):
            return trl_aggregate(trl_clipped_per_token(leaf, old, adv, mask, 0.2, 0.2, 4.0), mask, "grpo")

        want = reference(trl, logps)
        assert close(got[0], want[0]) and close(got[1], want[1]) and not got[1].any()
        assert float(got[0]) == pytest.approx(capped)
    # -30 and -100: for A < 0 the clip's 0.8 binds in both; for A > 0 the unclipped r * A wins, which
    # the harness reads at the clamp, e^-20, with no gradient, and TRL at e^-30 and e^-100
    low = torch.tensor([[-30.0 - 1, -100.0 - 1]], dtype=torch.float64)
    got = harness_loss("clipped", low, old, -torch.ones(1, 1, dtype=torch.float64), mask, two_sided_delta=4.0)
    assert float(got[0]) == pytest.approx(0.8) and not got[1].any()
    got = harness_loss("clipped", low, old, torch.ones(1, 1, dtype=torch.float64), mask, two_sided_delta=4.0)
    assert float(got[0]) == pytest.approx(-math.exp(-20)) and not got[1].any()


def test_two_sided_delta_above_the_band_is_the_dual_clip():
    logps, old, adv, mask = batch(seed=2, scale=1.5)
    assert all(
        close(a, b)
        for a, b in zip(
            harness_loss("clipped", logps, old, adv, mask, two_sided_delta=3.0),
            harness_loss("clipped", logps, old, adv, mask, dual_clip=3.0),
        )
    )


# --- LUSPO: GSPO's loss, each sequence's term summed over its tokens ------------------------------


def test_luspo_preset_is_trls_luspo():
    preset = PRESETS["luspo"].config
    assert (preset.policy_loss, preset.aggregation) == ("gspo", "seq_mean_token_sum")
    logps, old, adv, mask = batch(seed=3, scale=0.002)  # sequence log-ratios inside and outside (2e-3, 2.5e-3)
    fields = {"eps_low": preset.eps_low, "eps_high": preset.eps_high}
    got = harness_loss("gspo", logps, old, adv, mask, aggregation="seq_mean_token_sum", **fields)

    def trl(leaf):
        per_token = trl_clipped_per_token(leaf, old, adv, mask, 2e-3, 2.5e-3, level="sequence")
        return trl_aggregate(per_token, mask, "luspo")

    want = reference(trl, logps)
    assert close(got[0], want[0]) and close(got[1], want[1])


def test_luspo_by_hand_scales_each_sequence_by_its_length():
    # on-policy: s_i = 1, each sequence's term -A_i, times its length, mean over rows: -(2 * 1 + 3 * (-1)) / 2 = 0.5
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
    logps = torch.full((2, 3), -1.0, dtype=torch.float64) * mask
    value, grad = harness_loss("gspo", logps, logps, torch.tensor([[1.0], [-1.0]]).double(), mask, "seq_mean_token_sum")
    assert float(value) == pytest.approx(0.5)
    # d/dlogp_t of -A_i |o_i| exp(mean_t log r): -A_i |o_i| / |o_i| / 2 rows = -A_i / 2 on every real token
    assert grad.flatten().tolist() == pytest.approx([-0.5, -0.5, 0.0, 0.5, 0.5, 0.5])


def test_luspo_leaves_an_all_padding_row_out_of_the_mean():
    logps, old, adv, mask = batch(seed=4, scale=0.002)
    padded = torch.cat([mask, torch.zeros(1, mask.shape[1], dtype=torch.float64)])
    pad = torch.full((1, mask.shape[1]), float("nan"), dtype=torch.float64)
    got = harness_loss(
        "gspo", torch.cat([logps, pad]), torch.cat([old, pad]), torch.cat([adv, adv[:1]]), padded, "seq_mean_token_sum"
    )
    clean = harness_loss("gspo", logps, old, adv, mask, "seq_mean_token_sum")
    assert close(got[0], clean[0]) and close(got[1][:-1], clean[1]) and not got[1][-1].any()
    # TRL counts the empty row in its mean over rows: its loss is rows / (rows + 1) of this one
    n = mask.shape[0]
    trl = trl_aggregate(trl_clipped_per_token(logps, old, adv, mask, 0.2, 0.2, level="sequence"), mask, "luspo")
    assert close(trl * n / (n + 1), clean[0] * n / (n + 1))


# --- VESPO ---------------------------------------------------------------------------------------


def test_vespo_by_hand():
    # W = 1: phi = 1, REINFORCE: loss -A logp, gradient -A
    assert one_token("vespo", 1.0, 2.0, aggregation="token_mean") == (2.0, -2.0)
    # W = 2, A > 0 (k, lambda = 2, 3): phi = 2^2 e^(3 (1 - 2)) = 4 e^-3; the gradient is -phi A (phi detached)
    value, grad = one_token("vespo", 2.0, 1.0, aggregation="token_mean")
    phi = 4 * math.exp(-3)
    assert grad == pytest.approx(-phi) and value == pytest.approx(-phi * (math.log(2.0) - 1.0))
    # W = 2, A < 0 (k, lambda = 3, 2): phi = 8 e^-2
    assert one_token("vespo", 2.0, -1.0, aggregation="token_mean")[1] == pytest.approx(8 * math.exp(-2))
    # the kernel peaks at W = k / lambda: for A > 0 at 2/3, where phi = (2/3)^2 e^(3 - 2) > 1
    assert one_token("vespo", 2 / 3, 1.0, aggregation="token_mean")[1] == pytest.approx(-((2 / 3) ** 2) * math.e)


@pytest.mark.parametrize("scale", [0.05, 0.5, 3.0])
@pytest.mark.parametrize(
    "kernel", [{}, {"k_pos": 1.0, "lambda_pos": 1.5, "k_neg": 0.5, "lambda_neg": 4.0}], ids=["trl-defaults", "other"]
)
def test_vespo_matches_trl(scale, kernel):
    logps, old, adv, mask = batch(seed=5, scale=scale)
    fields = {f"vespo_{key}": value for key, value in kernel.items()}
    got = harness_loss("vespo", logps, old, adv, mask, "token_mean", **fields)
    want = reference(trl_vespo_loss, logps, old, adv, mask, **kernel)
    assert close(got[0], want[0]) and close(got[1], want[1])


def test_vespo_at_extreme_log_ratios_and_nan_padding():
    # token log-ratios of +-20, +-30 and +-100: both clamp each to +-20 and the sum to [log 1e-8, 20]
    logps = torch.tensor([[19.0, 0.0], [-101.0, -1.0], [29.0, 29.0], [-21.0, 0.0]], dtype=torch.float64)
    old = torch.full((4, 2), -1.0, dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0], [1.0, 1.0], [1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    adv = torch.tensor([[1.0], [-1.0], [-2.0], [0.5]], dtype=torch.float64)
    want = reference(trl_vespo_loss, logps * mask, old * mask, adv, mask)
    nan_padded = torch.where(mask.bool(), logps, float("nan"))
    got = harness_loss("vespo", nan_padded, torch.where(mask.bool(), old, float("nan")), adv, mask, "token_mean")
    assert close(got[0], want[0]) and close(got[1], want[1]) and torch.isfinite(got[1]).all()


def test_vespo_one_token_rows_and_an_all_padding_row():
    logps, old, adv, mask = batch(seed=6, rows=4, length=1)  # every row one token
    mask = torch.cat([mask, torch.zeros(1, 1, dtype=torch.float64)])
    logps, old, adv = (
        torch.cat([logps, torch.zeros(1, 1)]),
        torch.cat([old, torch.zeros(1, 1)]),
        torch.cat([adv, -adv[:1]]),
    )
    got = harness_loss("vespo", logps, old, adv, mask, "token_mean")
    want = reference(trl_vespo_loss, logps, old, adv, mask)
    assert close(got[0], want[0]) and close(got[1], want[1]) and got[1][-1, 0] == 0


# --- off-policy sequence masking -----------------------------------------------------------------


def test_opsm_by_hand():
    # mean log(mu/pi) per row: 0.6, 0.6, 0.4; masked only where A < 0 and the mean > 0.5
    logps = torch.full((3, 2), -1.0, dtype=torch.float64)
    sampler = logps + torch.tensor([[0.2, 1.0], [0.6, 0.6], [0.4, 0.4]], dtype=torch.float64)
    adv = torch.tensor([[-1.0], [1.0], [-1.0]], dtype=torch.float64).expand(3, 2)
    weights, metrics = off_policy_mask_weights(
        logps, sampler, adv, torch.ones(3, 2), cfg(off_policy_mask="opsm", off_policy_mask_threshold=0.5)
    )
    assert weights.tolist() == [[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]]
    assert float(metrics["off_policy_masked"]) == pytest.approx(2 / 6)
    weights, metrics = off_policy_mask_weights(logps, sampler, adv, torch.ones(3, 2), cfg())
    assert weights.tolist() == [[1.0, 1.0]] * 3 and metrics == {}


@pytest.mark.parametrize("threshold", [0.05, 0.5, 1.0])
def test_opsm_matches_trl_in_the_loss(threshold):
    logps, old, adv, mask = batch(seed=7, rows=12, scale=0.5)
    g = torch.Generator().manual_seed(8)
    # each row drifts by its own offset, 0 to 1.2 nats per token, plus noise: some rows on each side
    offset = torch.linspace(0.0, 1.2, logps.shape[0], dtype=torch.float64)[:, None]
    adv = adv.abs() * torch.tensor([1.0, -1.0] * (logps.shape[0] // 2), dtype=torch.float64)[:, None]
    sampler = (logps + offset + 0.3 * torch.randn(old.shape, generator=g, dtype=torch.float64)) * mask
    config = cfg(
        policy_loss="clipped",
        aggregation="seq_mean_token_mean",
        off_policy_mask="opsm",
        off_policy_mask_threshold=threshold,
    )
    leaf = logps.clone().requires_grad_(True)
    batch_ = UpdateBatch(
        logprobs=leaf,
        old_logprobs=old,
        ref_logprobs=old,
        advantages=adv.expand_as(mask) * mask,
        mask=mask,
        entropy=torch.zeros_like(mask),
        sampler_logprobs=sampler,
    )
    loss, metrics = update_loss(batch_, config, make_aggregator(config, mask.shape[1]))
    (grad,) = torch.autograd.grad(loss, leaf)

    def trl(leaf):  # _compute_loss: per_token_loss * off_policy_mask, then the grpo aggregation
        keep = trl_off_policy_mask(adv, leaf, sampler, mask, threshold)
        return trl_aggregate(trl_clipped_per_token(leaf, old, adv, mask, 0.2, 0.2) * keep, mask, "grpo")

    want = reference(trl, logps)
    assert close(loss.detach(), want[0]) and close(grad, want[1])
    keep = trl_off_policy_mask(adv, logps, sampler, mask, threshold)
    assert 0 < float(metrics["train/off_policy_masked"]) < 1
    assert float(metrics["train/off_policy_masked"]) == pytest.approx(float(((1 - keep) * mask).sum() / mask.sum()))


def test_opsm_at_extreme_log_ratios_nan_padding_and_empty_rows():
    # a token 100 nats off: TRL's mean reads 100 / 2, the harness clamps it to 20 / 2; both exceed 0.5
    logps = torch.tensor([[-101.0, -1.0], [-1.0, float("nan")], [float("nan")] * 2], dtype=torch.float64)
    sampler = torch.tensor([[-1.0, -1.0], [-0.2, float("nan")], [float("nan")] * 2], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    adv = torch.full((3, 2), -1.0, dtype=torch.float64) * mask
    weights, metrics = off_policy_mask_weights(logps, sampler, adv, mask, cfg(off_policy_mask="opsm"))
    assert torch.isfinite(weights).all()
    assert (weights * mask).tolist() == [[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]  # one-token row: 0.8 > 0.5
    assert float(metrics["off_policy_masked"]) == pytest.approx(1.0)
    trl = trl_off_policy_mask(adv[:, :1], torch.nan_to_num(logps), torch.nan_to_num(sampler), mask, 0.5)
    assert trl[:2].flatten().tolist() == [0.0, 0.0]
    # the empty row: neither masks anything that counts (mean 0; the harness's weight there is 1)
    assert weights[2].tolist() == [1.0, 1.0] and trl[2].item() == 1.0


def test_opsm_keeps_every_sequence_of_positive_advantage_whatever_its_drift():
    logps = torch.full((2, 3), -5.0, dtype=torch.float64)
    sampler = torch.zeros(2, 3, dtype=torch.float64)  # 5 nats per token off
    adv = torch.tensor([[0.0] * 3, [2.0] * 3], dtype=torch.float64)
    weights, _ = off_policy_mask_weights(logps, sampler, adv, torch.ones(2, 3), cfg(off_policy_mask="opsm"))
    assert weights.tolist() == [[1.0] * 3] * 2


def test_the_new_parts_resolve_as_presets_and_overrides():
    assert resolve_algorithm("grpo", {"off_policy_mask": "opsm"}).off_policy_mask_threshold == 0.5
    assert resolve_algorithm("vespo").policy_loss == "vespo"
    assert resolve_algorithm("grpo", {"two_sided_delta": 4.0}).two_sided_delta == 4.0
    with pytest.raises(Exception, match="two_sided_delta"):
        resolve_algorithm("grpo", {"two_sided_delta": 0.5})
