"""verl's rollout correction (``rollout_corr``: batch-normalised importance weights, rejection by a
k1/k2/k3 statistic that takes tokens or whole sequences out of the loss's mask) and OpenRLHF's
``seq-mask-tis`` and two-sided ``tis``: by hand, and against the frameworks' own formulas
transcribed below from their source, on ordinary inputs and extreme ones."""

import math

import pytest
import torch

from harness.algorithms.aggregation import make_aggregator
from harness.algorithms.config import RLConfig
from harness.algorithms.mismatch import mismatch_weights
from harness.algorithms.objective import UpdateBatch, update_loss
from harness.algorithms.presets import resolve_algorithm
from harness.errors import ConfigError

F64 = torch.float64


def _rows(*rows: list[float], width: int = 3) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Old and sampler log-probs with ``pi_old / mu`` = each row's ratios, padded with garbage, and the mask."""
    log_w = torch.tensor([[math.log(r) for r in row] + [-70.0] * (width - len(row)) for row in rows], dtype=F64)
    mask = torch.tensor([[1.0] * len(row) + [0.0] * (width - len(row)) for row in rows], dtype=F64)
    old = torch.full_like(log_w, -1.5)
    old[mask == 0] = 35.0
    return old, old - log_w, mask


def correct(old, sampler, mask, **kw):
    return mismatch_weights(old, sampler, mask, RLConfig(name="t", **kw))


# --- verl's formula, transcribed -------------------------------------------------------------
# verl verl/trainer/ppo/rollout_corr_helper.py@b178a3c (compute_rollout_correction_weights,
# compute_rollout_rejection_mask) and verl/utils/torch_functional.py@b178a3c (masked_sum, masked_mean)


def verl_masked_sum(values, mask, axis=None):
    return (torch.where(mask.bool(), values, 0.0) * mask).sum(axis)


def verl_masked_mean(values, mask, axis=None):
    return verl_masked_sum(values, mask, axis) / (mask.sum(axis) + 1e-8)


def verl_is_weights(log_ratio, response_mask, rollout_is, threshold, batch_normalize):
    if rollout_is == "token":
        weights = torch.exp(torch.clamp(log_ratio, min=-20.0, max=20.0))
    else:
        log_ratio_sum = verl_masked_sum(log_ratio, response_mask, axis=-1).unsqueeze(-1)
        weights = torch.exp(torch.clamp(log_ratio_sum, min=-20.0, max=20.0)).expand_as(log_ratio)
    weights = weights * response_mask
    weights = weights.clamp(max=threshold)
    if batch_normalize:
        if rollout_is == "token":
            mean = verl_masked_mean(weights, response_mask)
        else:
            seq_weights = verl_masked_mean(weights, response_mask, axis=-1)
            seq_mask = (response_mask.sum(dim=-1) > 0).to(dtype=weights.dtype)
            mean = (seq_weights * seq_mask).sum() / seq_mask.sum().clamp_min(1e-8)
        if mean > 1e-8:
            weights = weights / mean
    return weights


def verl_rejection_mask(log_ratio, response_mask, option, upper, lower=None):
    # lower: the first half of verl's "lower_upper" k1 spec; None as a single float, 1 / upper
    safe = torch.clamp(log_ratio, min=-20.0, max=20.0)
    k = {"k1": -safe, "k2": 0.5 * safe**2, "k3": torch.exp(safe) - 1.0 - safe}[option[-2:]]
    if option.startswith("seq_sum"):
        k = verl_masked_sum(k, response_mask, axis=-1).unsqueeze(-1).expand_as(response_mask)
    elif option.startswith("seq_mean"):
        k = verl_masked_mean(k, response_mask, axis=-1).unsqueeze(-1).expand_as(response_mask)
    elif option.startswith("seq_max"):
        filled = k.masked_fill(~response_mask.bool(), float("-inf")).max(dim=-1).values
        k = torch.where(filled == float("-inf"), torch.zeros_like(filled), filled).unsqueeze(-1).expand_as(k)
    if option.endswith("k1"):
        lower = 1.0 / upper if lower is None else lower
        keep = (k >= math.log(lower)) & (k <= math.log(upper))
    else:
        keep = k <= upper
    return response_mask * keep.to(dtype=log_ratio.dtype)


def verl_token_mean(loss_mat, loss_mask):
    # verl/trainer/ppo/core_algos.py@b178a3c agg_loss "token-mean": masked_sum / batch_num_tokens
    return verl_masked_sum(loss_mat, loss_mask) / loss_mask.sum()


# --- OpenRLHF's formula, transcribed -------------------------------------------------------------
# OpenRLHF openrlhf/models/loss.py@3c3be62 PolicyLoss.forward, lines 197-217; masked_mean from
# openrlhf/models/utils.py@3c3be62 (no clamp of the count, no clamp of the log-ratio)


def openrlhf_vllm_is(old_log_probs, rollout_log_probs, action_mask, correction_type, low, high):
    rollout_log_ratio = old_log_probs - rollout_log_probs
    if correction_type == "icepop":
        vllm_is = torch.exp(rollout_log_ratio)
        return vllm_is * ((vllm_is >= low) & (vllm_is <= high))
    if correction_type == "seq-mask-tis":
        seq_log_ratio = (rollout_log_ratio * action_mask).sum(dim=-1) / action_mask.sum(dim=-1)
        seq_is = torch.exp(seq_log_ratio)
        seq_mask = (seq_is >= low) & (seq_is <= high)
        return seq_mask.unsqueeze(-1) * torch.exp(rollout_log_ratio)
    return torch.exp(rollout_log_ratio).clamp(min=low, max=high)


# --- ordinary and extreme inputs -----------------------------------------------------------------


def _ordinary(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Six rows of lengths 5, 4, 3, 2, 1 (a one-token row) and 0 (all padding), log-weights ~0.4."""
    gen = torch.Generator().manual_seed(seed)
    old = -torch.rand(6, 5, generator=gen, dtype=F64) * 3
    sampler = old - 0.4 * torch.randn(6, 5, generator=gen, dtype=F64)
    mask = (torch.arange(5)[None, :] < torch.tensor([5, 4, 3, 2, 1, 0])[:, None]).to(F64)
    return old, sampler, mask


def _extreme() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Log-weights of +-20 and beyond (+-25, +-100), a one-token row, an all-padding row."""
    log_w = torch.tensor(
        [
            [25.0, -25.0, 0.1, 0.0],
            [20.0, 20.0, 0.0, 0.0],
            [-100.0, 0.2, 0.0, 0.0],
            [100.0, 0.0, 0.0, 0.0],
            [0.0, 0.0, 0.0, 0.0],
        ],
        dtype=F64,
    )
    mask = torch.tensor(
        [[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]],
        dtype=F64,
    )
    old = torch.full_like(log_w, -2.0)
    return old, old - log_w, mask


INPUTS = [_ordinary(0), _ordinary(1), _extreme()]
VERL_IS = [("token", False), ("token", True), ("sequence", False), ("sequence", True)]
# verl's options, with thresholds from its presets (verl/trainer/config/algorithm.py@b178a3c:
# seq_mean_k3 0.01 in decoupled_k3_rs, line 481; seq_mean_k1 "0.999_1.001" in decoupled_geo_rs,
# line 237; seq_sum_k1 "0.5_2.0" in decoupled_seq_is_rs, line 213) and bounds the inputs straddle.
# The harness takes one k1 threshold, [1/t, t]; verl's presets' "lower_upper" pairs are reciprocal
# (0.5_2.0) or within 1e-6 of it (0.999_1.001): compared against verl's own spec strings
VERL_RS = [
    ("token_k1", 1.5, None),
    ("token_k2", 0.05, None),
    ("token_k3", 0.05, None),
    ("seq_sum_k1", 2.0, 0.5),
    ("seq_sum_k2", 0.2, None),
    ("seq_sum_k3", 0.2, None),
    ("seq_mean_k1", 1.001, 0.999),
    ("seq_mean_k1", 1.3, None),
    ("seq_mean_k2", 0.05, None),
    ("seq_mean_k3", 0.01, None),
    ("seq_mean_k3", 0.1, None),
    ("seq_max_k2", 0.1, None),
    ("seq_max_k3", 0.1, None),
]


@pytest.mark.parametrize("inputs", INPUTS, ids=["ordinary0", "ordinary1", "extreme"])
@pytest.mark.parametrize("level, normalize", VERL_IS)
def test_rollout_corr_weights_match_verls_formula(inputs, level, normalize):
    old, sampler, mask = inputs
    weights, kept, _ = correct(
        old, sampler, mask, mismatch="rollout_corr", rollout_is=level, rollout_is_batch_normalize=normalize
    )
    expected = verl_is_weights(old - sampler, mask, level, 2.0, normalize)
    on = mask.bool()
    # rtol 1e-7: verl's masked_mean divides by the count + 1e-8, a relative 1e-8 / n in the batch mean
    assert torch.allclose(weights[on], expected[on], rtol=1e-7, atol=0)
    assert torch.all(weights[~on] == 0) and torch.equal(kept, mask)  # no rejection chosen: the mask as given


@pytest.mark.parametrize("inputs", INPUTS, ids=["ordinary0", "ordinary1", "extreme"])
@pytest.mark.parametrize("option, upper, lower", VERL_RS)
def test_rollout_corr_rejection_matches_verls_mask(inputs, option, upper, lower):
    old, sampler, mask = inputs
    kw = {"rollout_rs": option, "rollout_rs_threshold": upper}
    weights, kept, metrics = correct(old, sampler, mask, mismatch="rollout_corr", rollout_is="none", **kw)
    expected = verl_rejection_mask(old - sampler, mask, option, upper, lower)
    assert torch.equal(kept, expected)
    assert torch.equal(weights, mask)  # rollout_is none: weight 1 on every token
    rejected = (mask - kept).sum() / mask.sum()
    assert metrics["mismatch_rejected_frac"].item() == pytest.approx(rejected.item())


def test_the_inputs_exercise_both_sides_of_every_rejection():
    # a rejection test that never rejects, or always does, would compare nothing
    old, sampler, mask = _ordinary(0)
    for option, upper, lower in VERL_RS:
        kept = verl_rejection_mask(old - sampler, mask, option, upper, lower)
        if (option, upper) != ("seq_mean_k1", 1.001):  # verl's +-0.1% geometric band rejects every row here
            assert 0 < kept.sum() < mask.sum(), option


def test_rollout_corr_by_hand():
    # row 1: pi_old/mu = (3, 0.5, 1.2), product 1.8; row 2: one token, 0.5; row 3: padding only
    old, sampler, mask = _rows([3.0, 0.5, 1.2], [0.5], [])
    # token TIS at C = 2: (2, 0.5, 1.2 | 0.5); batch mean over the 4 tokens 4.2 / 4 = 1.05
    weights, _, metrics = correct(
        old, sampler, mask, mismatch="rollout_corr", rollout_is="token", rollout_is_batch_normalize=True
    )
    expected = [[2 / 1.05, 0.5 / 1.05, 1.2 / 1.05], [0.5 / 1.05, 0, 0], [0, 0, 0]]
    assert weights.flatten().tolist() == pytest.approx(sum(expected, []))
    assert metrics["mismatch_batch_norm_factor"].item() == pytest.approx(1.05)
    assert metrics["mismatch_frac"].item() == pytest.approx(1 / 4)  # the 3 truncated to 2
    # sequence TIS: weights 1.8 and 0.5; the mean over the two non-empty rows 1.15 (the empty row left out)
    weights, _, metrics = correct(
        old, sampler, mask, mismatch="rollout_corr", rollout_is="sequence", rollout_is_batch_normalize=True
    )
    assert weights[:, 0].tolist() == pytest.approx([1.8 / 1.15, 0.5 / 1.15, 0])
    assert metrics["mismatch_batch_norm_factor"].item() == pytest.approx(1.15)
    # seq_mean_k3: row 1 mean of r - 1 - ln r = (0.9014 + 0.1931 + 0.0177) / 3 = 0.3707 > 0.3: the whole
    # row leaves the mask; row 2 0.1931 stays
    k3 = [r - 1 - math.log(r) for r in (3.0, 0.5, 1.2)]
    assert sum(k3) / 3 == pytest.approx(0.3707, abs=1e-4) and k3[1] == pytest.approx(0.1931, abs=1e-4)
    _, kept, metrics = correct(
        old, sampler, mask, mismatch="rollout_corr", rollout_rs="seq_mean_k3", rollout_rs_threshold=0.3
    )
    assert kept.tolist() == [[0, 0, 0], [1, 0, 0], [0, 0, 0]]
    assert metrics["mismatch_rejected_frac"].item() == pytest.approx(3 / 4)
    assert metrics["mismatch_rejected_seq_frac"].item() == pytest.approx(1 / 2)  # of the two non-empty rows
    # seq_mean_k1 (geometric mean), bounds [1/1.5, 1.5] on exp(mean -ln r): row 1 1.8^(-1/3) = 0.82 stays,
    # row 2 1 / 0.5 = 2 leaves
    _, kept, _ = correct(
        old, sampler, mask, mismatch="rollout_corr", rollout_rs="seq_mean_k1", rollout_rs_threshold=1.5
    )
    assert kept.tolist() == [[1, 1, 1], [0, 0, 0], [0, 0, 0]]
    # token_k1 at 2.5: -ln r in [ln 0.4, ln 2.5], i.e. r in [0.4, 2.5]: the 3 leaves
    _, kept, _ = correct(old, sampler, mask, mismatch="rollout_corr", rollout_rs="token_k1", rollout_rs_threshold=2.5)
    assert kept.tolist() == [[0, 1, 1], [1, 0, 0], [0, 0, 0]]


def _update(cfg: RLConfig, old, sampler, mask, advantages):
    logp = old.clone().requires_grad_(True)  # the current policy at the old one: every ratio 1
    batch = UpdateBatch(
        logprobs=logp,
        old_logprobs=old,
        ref_logprobs=old,
        advantages=advantages,
        mask=mask,
        entropy=torch.zeros_like(mask),
        sampler_logprobs=sampler,
    )
    loss, metrics = update_loss(batch, cfg, make_aggregator(cfg, mask.shape[1]))
    return loss, metrics, logp


def test_sequence_rejection_shrinks_the_loss_denominator_to_verls():
    # row 1 (3 tokens, A = 1) is rejected by seq_mean_k3 at 0.3, row 2 (2 tokens, A = 2, no mismatch) kept.
    # verl replaces response_mask by the rejected one, so its token-mean divides by the 2 tokens left:
    # loss (-2 - 2) / 2 = -2. A weight of 0 instead (the *_mask parts, TRL's and OpenRLHF's way) keeps the
    # rejected tokens in the denominator: (0 + 0 + 0 - 2 - 2) / 5 = -0.8
    old, sampler, mask = _rows([3.0, 0.5, 1.2], [1.0, 1.0])
    advantages = torch.tensor([[1.0] * 3, [2.0] * 3], dtype=F64)
    cfg = RLConfig(
        name="t",
        aggregation="token_mean",
        mismatch="rollout_corr",
        rollout_is="none",
        rollout_rs="seq_mean_k3",
        rollout_rs_threshold=0.3,
    )
    _, kept, _ = mismatch_weights(old, sampler, mask, cfg)
    assert kept.sum().item() == 2  # the denominator: the unmasked tokens after rejection
    loss, metrics, logp = _update(cfg, old, sampler, mask, advantages)
    verl_mask = verl_rejection_mask(old - sampler, mask, "seq_mean_k3", 0.3)
    assert verl_mask.sum().item() == 2
    assert loss.item() == pytest.approx(verl_token_mean(-advantages, verl_mask).item())
    assert loss.item() == pytest.approx(-2.0)
    (grad,) = torch.autograd.grad(loss, logp)
    assert grad[0].tolist() == [0.0, 0.0, 0.0]  # the rejected row has no gradient
    assert grad[1, :2].tolist() == pytest.approx([-1.0, -1.0])  # d(-A r / 2)/dlogp = -A / 2
    # the same loss with the whole row's weight zeroed (sequence_mask's way): the old denominator
    zeroed = RLConfig(name="t", aggregation="token_mean", mismatch="sequence_mask", mismatch_cap=1.5)
    assert _update(zeroed, old, sampler, mask, advantages)[0].item() == pytest.approx(-0.8)
    # seq_mean_token_mean: the rejected row leaves the row count too (verl's global_batch_size of rows with tokens)
    per_row = cfg.model_copy(update={"aggregation": "seq_mean_token_mean"})
    assert _update(per_row, old, sampler, mask, advantages)[0].item() == pytest.approx(-2.0)


def test_rejection_and_weights_together_and_every_term_reads_the_rejected_mask():
    # verl's pipeline: pg_losses * rollout_is_weights aggregated over the rejected mask (token-mean)
    old, sampler, mask = _ordinary(3)
    advantages = torch.randn(6, 5, generator=torch.Generator().manual_seed(4), dtype=F64)
    cfg = RLConfig(
        name="t",
        aggregation="token_mean",
        mismatch="rollout_corr",
        rollout_is="token",
        rollout_is_batch_normalize=True,
        rollout_rs="seq_mean_k3",
        rollout_rs_threshold=0.01,
        kl_placement="loss",
        kl_coef=0.1,
    )
    weights = verl_is_weights(old - sampler, mask, "token", 2.0, True)
    verl_mask = verl_rejection_mask(old - sampler, mask, "seq_mean_k3", 0.01)
    assert 0 < verl_mask.sum() < mask.sum()
    _, metrics, _ = _update(cfg, old, sampler, mask, advantages)
    assert metrics["train/policy_loss"].item() == pytest.approx(
        verl_token_mean(-advantages * weights, verl_mask).item()
    )
    # the KL term (0 here: the reference is the policy) and the logged entropy read the rejected mask too
    entropy = torch.rand(6, 5, generator=torch.Generator().manual_seed(5), dtype=F64)
    batch = UpdateBatch(old.clone(), old, old, advantages, mask, entropy, sampler_logprobs=sampler)
    got = update_loss(batch, cfg, make_aggregator(cfg, 5))[1]["train/entropy"].item()
    assert got == pytest.approx(verl_token_mean(entropy, verl_mask).item())


def test_nan_padding_is_masked_with_where():
    # verl's IS weights multiply NaN padding by the mask (NaN); here padding reads 0 and the real
    # tokens' weights and rejection are those of the same rows with finite padding
    old, sampler, mask = _ordinary(0)
    nan_old = torch.where(mask.bool(), old, torch.nan)
    for kw in (
        {"rollout_is": "sequence", "rollout_is_batch_normalize": True, "rollout_rs": "seq_sum_k3"},
        {"rollout_is": "token", "rollout_rs": "seq_max_k2"},
    ):
        kw = {"mismatch": "rollout_corr", "rollout_rs_threshold": 0.1, **kw}
        clean = correct(old, sampler, mask, **kw)
        dirty = correct(nan_old, sampler, mask, **kw)
        assert torch.equal(clean[0], dirty[0]) and torch.equal(clean[1], dirty[1])
        assert all(math.isfinite(v.item()) for v in dirty[2].values())


def test_rollout_corr_rejecting_everything_leaves_a_zero_loss_not_a_nan():
    old, sampler, mask = _rows([3.0, 0.2], [4.0])
    cfg = RLConfig(
        name="t", mismatch="rollout_corr", rollout_rs="seq_mean_k3", rollout_rs_threshold=0.01, aggregation="token_mean"
    )
    loss, metrics, _ = _update(cfg, old, sampler, mask, torch.ones_like(mask))
    assert loss.item() == 0.0 and metrics["train/mismatch_rejected_seq_frac"].item() == 1.0


# --- OpenRLHF ------------------------------------------------------------------------------------


def test_seq_mask_tis_by_hand():
    # row 1: (3, 0.5, 1.2), geometric mean 1.8^(1/3) = 1.216, inside [0.5, 5]: each token its own,
    # unclamped weight (3 stays 3, as OpenRLHF's code); row 2: one token of 0.4 < 0.5: masked;
    # row 3: (6, 6), geometric mean 6 > 5: masked
    old, sampler, mask = _rows([3.0, 0.5, 1.2], [0.4], [6.0, 6.0])
    weights, kept, metrics = correct(old, sampler, mask, mismatch="seq_mask_tis", mismatch_cap=5.0, mismatch_floor=0.5)
    assert weights.flatten().tolist() == pytest.approx([3.0, 0.5, 1.2, 0, 0, 0, 0, 0, 0])
    assert kept is mask  # a weight of 0: the tokens stay in the denominator, as OpenRLHF's
    assert metrics["mismatch_frac"].item() == pytest.approx(3 / 6)
    # a cap of 1.2 and no floor: row 1 masked too (1.216 > 1.2), row 2's 0.4 kept
    weights = correct(old, sampler, mask, mismatch="seq_mask_tis", mismatch_cap=1.2)[0]
    assert weights.flatten().tolist() == pytest.approx([0, 0, 0, 0.4, 0, 0, 0, 0, 0])


def test_two_sided_tis_by_hand():
    # OpenRLHF's default tis: clamp(w, 0.5, 5); the floor 0 (verl's and TRL's) clamps above only
    old, sampler, mask = _rows([0.2, 6.0, 1.2])
    weights, _, metrics = correct(old, sampler, mask, mismatch="token_truncate", mismatch_cap=5.0, mismatch_floor=0.5)
    assert weights[0].tolist() == pytest.approx([0.5, 5.0, 1.2])
    assert metrics["mismatch_frac"].item() == pytest.approx(2 / 3)
    weights, _, _ = correct(old, sampler, mask, mismatch="token_truncate", mismatch_cap=5.0)
    assert weights[0].tolist() == pytest.approx([0.2, 5.0, 1.2])


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(
    "mismatch, openrlhf_type", [("seq_mask_tis", "seq-mask-tis"), ("token_truncate", "tis"), ("token_mask", "icepop")]
)
def test_openrlhf_corrections_match_its_formula(seed, mismatch, openrlhf_type):
    old, sampler, mask = _ordinary(seed)
    sampler = old - 2.5 * (old - sampler)  # log-weights ~1, so the [0.5, 5] band bites
    weights, _, _ = correct(old, sampler, mask, mismatch=mismatch, mismatch_cap=5.0, mismatch_floor=0.5)
    expected = openrlhf_vllm_is(old, sampler, mask, openrlhf_type, 0.5, 5.0)
    on = mask.bool()
    assert torch.allclose(weights[on], expected[on], rtol=1e-9, atol=0)
    assert 0 < (weights[on] != torch.exp(old - sampler)[on]).sum() < on.sum()  # the band changed some, not all


def test_seq_mask_tis_on_extreme_inputs_departs_from_openrlhf_only_by_the_clamp():
    old, sampler, mask = _extreme()
    weights, _, metrics = correct(old, sampler, mask, mismatch="seq_mask_tis", mismatch_cap=5.0, mismatch_floor=0.5)
    expected = openrlhf_vllm_is(old, sampler, mask, "seq-mask-tis", 0.5, 5.0)
    assert torch.all(torch.isfinite(weights)) and all(math.isfinite(v.item()) for v in metrics.values())
    # row 1 (+25, -25, 0.1): geometric mean e^0.033 kept; its tokens' weights e^+-20 here, e^+-25 in
    # OpenRLHF (no clamp of the log-ratio)
    assert weights[0, :3].tolist() == pytest.approx([math.exp(20), math.exp(-20), math.exp(0.1)])
    assert expected[0, :2].tolist() == pytest.approx([math.exp(25), math.exp(-25)])
    # rows 2-4: geometric means e^20, e^-49.9, e^100: masked by both; row 5 (padding only): 0 here,
    # OpenRLHF's 0/0 mean is NaN and its comparison false: masked too
    assert torch.all(weights[1:] == 0) and torch.all(expected[1:4][mask[1:4].bool()] == 0)


# --- configuration --------------------------------------------------------------------------------


def test_rollout_corr_defaults_are_verls():
    cfg = RLConfig(name="t", mismatch="rollout_corr")
    # verl/trainer/config/algorithm.py@b178a3c lines 173-177: sequence IS, threshold 2.0, no batch norm, no RS
    assert (cfg.rollout_is, cfg.mismatch_cap, cfg.rollout_is_batch_normalize, cfg.rollout_rs) == (
        "sequence",
        2.0,
        False,
        "none",
    )


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"rollout_rs": "seq_mean_k3"}, "rollout_rs=seq_mean_k3 needs rollout_rs_threshold"),
        (
            {"rollout_rs": "seq_mean_k1", "rollout_rs_threshold": 0.9},
            "empty at rollout_rs_threshold 0.9; set it above 1",
        ),
        ({"rollout_rs": "seq_k3", "rollout_rs_threshold": 0.1}, "rollout_rs"),
    ],
)
def test_rollout_corr_bad_settings_are_one_clear_error(overrides, message):
    with pytest.raises(ConfigError, match=message):
        resolve_algorithm("grpo", {"mismatch": "rollout_corr", **overrides})


def test_rollout_corr_fields_are_refused_on_other_corrections_and_the_floor_now_reaches_token_truncate():
    with pytest.raises(ConfigError, match="rollout_rs is read by none .*mismatch=rollout_corr"):
        resolve_algorithm("grpo", {"mismatch": "token_truncate", "rollout_rs": "seq_mean_k3"})
    cfg = resolve_algorithm("grpo", {"mismatch": "token_truncate", "mismatch_cap": 5.0, "mismatch_floor": 0.5})
    assert (cfg.mismatch_cap, cfg.mismatch_floor) == (5.0, 0.5)
    cfg = resolve_algorithm(
        "grpo",
        {"mismatch": "rollout_corr", "rollout_is": "token", "rollout_rs": "seq_mean_k1", "rollout_rs_threshold": 1.001},
    )
    assert (cfg.rollout_is, cfg.rollout_rs, cfg.rollout_rs_threshold) == ("token", "seq_mean_k1", 1.001)
