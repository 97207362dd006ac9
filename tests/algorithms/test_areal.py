"""AReaL's objectives for asynchronous training, against AReaL's own code at its commit
4aef98d8d818af55b43621aaadba047ae10f4e77: the decoupled PPO objective (``decoupled_ppo``: the
clipped ratio against the proximal policy, the trainer's recomputed log-probs, each token weighed
by proximal / behaviour, the sampler's perhaps stale log-probs, masked above 5) and M2PO (``m2po``:
the tokens of the largest second moment ``(log behaviour/proximal)^2`` left out of the loss until
the rest's mean is below ``m2_threshold``). By hand, and against a transcription of AReaL's
functions written here, on ordinary and extreme inputs (log-ratios of +-20 and beyond, padding
holding NaN, all-padding rows, one-token rows)."""

import math

import pytest
import torch

from harness.algorithms.aggregation import make_aggregator
from harness.algorithms.config import RLConfig
from harness.algorithms.mismatch import m2po_keep, mismatch_weights
from harness.algorithms.objective import UpdateBatch, update_loss
from harness.algorithms.old_logprobs import recomputes_old_logprobs
from harness.algorithms.parts import describe_parts
from harness.algorithms.presets import resolve_algorithm

F64 = torch.float64


# --- AReaL, transcribed (inclusionAI/AReaL@4aef98d) ------------------------------------------------


def _areal_m2po_mask(old_logp, prox_logp, loss_mask, m2_threshold):
    """``_apply_m2po_masking`` and ``_get_m2po_loss_mask``, areal/trainer/ppo/actor.py@4aef98d
    lines 769-850 (``old_logp`` is the behaviour policy's, the sampler's)."""
    delta = old_logp - prox_logp
    m2 = delta * delta
    mask_flat = loss_mask.view(-1)
    m2_selected = m2.view(-1)[mask_flat]
    if m2_selected.numel() == 0:
        return loss_mask
    sorted_m2, indices = torch.sort(m2_selected, descending=True)
    restored_indices = torch.argsort(indices)
    n = sorted_m2.numel()
    suffix_sums = sorted_m2.flip(0).cumsum(0).flip(0)
    counts = torch.arange(n, 0, -1, dtype=sorted_m2.dtype)
    avg_m2_suffix = suffix_sums / counts
    below_threshold_indices = torch.where(avg_m2_suffix < m2_threshold)[0]
    num_to_mask = below_threshold_indices[0].item() if len(below_threshold_indices) > 0 else n - 1
    sorted_mask = torch.ones_like(sorted_m2, dtype=torch.bool)
    if num_to_mask > 0:
        sorted_mask[:num_to_mask] = False
    m2_full_flat = torch.zeros_like(mask_flat, dtype=torch.bool)
    m2_full_flat[mask_flat] = sorted_mask[restored_indices]
    return m2_full_flat.view_as(loss_mask)


def _areal_loss(logprobs, proximal, behaviour, advantages, loss_mask, eps_clip=0.2, upper=5.0, m2_threshold=None):
    """``grpo_loss_fn`` (areal/trainer/ppo/actor.py@4aef98d lines 408-475: the M2PO mask, then
    ``ppo_actor_loss_fn``) with ``ppo_actor_loss_fn`` and ``apply_rejection_sampling``
    (areal/utils/functional/functional.py@4aef98d lines 185-560) for the rejection sampling of
    AReaL's examples: level token, action mask, metric ratio, ``upper``; no dual clip, token ratios."""
    loss_mask = loss_mask.bool()
    if m2_threshold is not None:
        loss_mask = _areal_m2po_mask(behaviour, proximal, loss_mask, m2_threshold)
    loss_mask_count = loss_mask.count_nonzero() or 1
    # AReaL upcasts to fp32 here (``.float()``, for bf16 inputs); these inputs are fp64 and stay so
    log_ratio = proximal.detach() - behaviour.detach()
    log_ratio = torch.where(torch.isfinite(log_ratio), log_ratio, 0.0)
    behave_imp_weight = torch.exp(log_ratio)
    in_bounds = behave_imp_weight <= upper
    loss_mask = loss_mask & in_bounds
    behave_imp_weight = torch.where(loss_mask, behave_imp_weight, 0.0)
    ratio = torch.where(loss_mask, torch.exp(logprobs - proximal), 0)
    clipped_ratio = torch.clamp(ratio, 1.0 - eps_clip, 1.0 + eps_clip)
    pg_loss = torch.max(-advantages * ratio, -advantages * clipped_ratio) * behave_imp_weight
    return torch.where(loss_mask, pg_loss, 0).sum() / loss_mask_count


# --- the harness ------------------------------------------------------------------------------------


def _ours(cfg, logprobs, proximal, behaviour, advantages, mask):
    batch = UpdateBatch(
        logprobs=logprobs,
        old_logprobs=proximal,
        ref_logprobs=proximal,
        advantages=advantages,
        mask=mask,
        entropy=torch.zeros_like(mask),
        sampler_logprobs=behaviour,
    )
    return update_loss(batch, cfg, make_aggregator(cfg, mask.shape[1]))


def _random(seed, rows=4, width=6, spread=1.0):
    """Proximal, current and behaviour log-probs, advantages and a mask with short rows, one
    one-token row and one all-padding row."""
    gen = torch.Generator().manual_seed(seed)
    proximal = -torch.rand(rows, width, generator=gen, dtype=F64) * 3 - 0.05
    logprobs = proximal + (torch.rand(rows, width, generator=gen, dtype=F64) - 0.5) * 0.6
    behaviour = proximal + torch.randn(rows, width, generator=gen, dtype=F64) * spread
    advantages = torch.randn(rows, 1, generator=gen, dtype=F64).expand(rows, width).clone()
    mask = torch.ones(rows, width, dtype=F64)
    mask[1, 3:] = 0
    mask[2, 1:] = 0  # one token
    mask[3] = 0  # all padding
    return proximal, logprobs, behaviour, advantages, mask


def _both(preset, proximal, logprobs, behaviour, advantages, mask, nan_padding=False):
    """Our loss and gradient (padding holding NaN where asked), and AReaL's (padding holding 0)."""
    cfg = resolve_algorithm(preset)
    pad = mask == 0
    fill = math.nan if nan_padding else 0.0
    mine = logprobs.masked_fill(pad, fill).requires_grad_()
    ours, metrics = _ours(
        cfg, mine, proximal.masked_fill(pad, fill), behaviour.masked_fill(pad, fill), advantages, mask
    )
    (our_grad,) = torch.autograd.grad(ours, mine)
    theirs_in = logprobs.clone().requires_grad_()
    m2 = cfg.m2_threshold if cfg.mismatch == "m2po" else None
    theirs = _areal_loss(theirs_in, proximal, behaviour, advantages, mask, cfg.eps_high, cfg.mismatch_cap, m2)
    (their_grad,) = torch.autograd.grad(theirs, theirs_in)
    return (ours, our_grad, metrics), (theirs, their_grad)


# --- the presets ----------------------------------------------------------------------------------


def test_the_presets_are_areals_objectives():
    for name in ("decoupled_ppo", "m2po"):
        cfg = resolve_algorithm(name)
        assert (cfg.policy_loss, cfg.aggregation, cfg.kl_placement) == ("clipped", "token_mean", "none")
        assert (cfg.mismatch_cap, cfg.mismatch_floor, cfg.eps_low, cfg.eps_high) == (5.0, 0.0, 0.2, 0.2)
        # the proximal log-probs are the trainer's, recomputed at the start of every step, in any precision
        assert recomputes_old_logprobs(cfg, {torch.float32}) and recomputes_old_logprobs(cfg, {torch.bfloat16})
    assert resolve_algorithm("m2po").mismatch == "m2po" and resolve_algorithm("m2po").m2_threshold == 0.04


# --- M2PO by hand -----------------------------------------------------------------------------------


def test_m2po_by_hand():
    # log(proximal / behaviour) = (0.5, 0.1, -0.3 | 0.05, 0, pad): second moments 0.25, 0.01, 0.09, 0.0025,
    # 0 (mean 0.0705); sorted, the means of the rest: 0.0705, then 0.1025 / 4 = 0.0256 < 0.04, so the
    # largest (0.5) leaves the loss's mask and the other four are weighed by e^l
    log_weights = torch.tensor([[0.5, 0.1, -0.3], [0.05, 0.0, 0.0]], dtype=F64)
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], dtype=F64)
    old = torch.full_like(mask, -1.0)
    cfg = RLConfig(name="t", mismatch="m2po", mismatch_cap=5.0)
    weights, kept, metrics = mismatch_weights(old, old - log_weights, mask, cfg)
    expected = [[0.0, math.exp(0.1), math.exp(-0.3)], [math.exp(0.05), 1.0, 0.0]]
    assert weights.tolist() == [pytest.approx(row) for row in expected]
    assert kept.tolist() == [[0.0, 1.0, 1.0], [1.0, 1.0, 0.0]]
    assert metrics["m2po_frac"].item() == pytest.approx(1 / 5)
    assert metrics["m2po_m2"].item() == pytest.approx(0.0705)
    assert metrics["m2po_m2_kept"].item() == pytest.approx(0.1025 / 4)
    assert metrics["mismatch_frac"].item() == pytest.approx(1 / 5)
    # a lower threshold leaves out more: 0.01 keeps 0.0025 and 0 only (means 0.0256, 0.0042 >= 0.004)
    keep = m2po_keep(log_weights, mask, 0.004)
    assert keep.tolist() == [[False, False, False], [True, True, False]]


def test_m2po_keeps_the_smallest_when_no_rest_is_below_the_threshold():
    # every second moment >= 0.04: all but the smallest left out of the mask (AReaL's fallback)
    log_weights = torch.tensor([[0.3, -0.9, 0.4]], dtype=F64)
    mask = torch.ones(1, 3, dtype=F64)
    assert m2po_keep(log_weights, mask, 0.04).tolist() == [[True, False, False]]
    old = torch.zeros_like(mask)
    weights, kept, _ = mismatch_weights(
        old, old - log_weights, mask, RLConfig(name="t", mismatch="m2po", mismatch_cap=5.0)
    )
    assert weights.tolist() == [pytest.approx([math.exp(0.3), 0.0, 0.0])]
    assert kept.tolist() == [[1.0, 0.0, 0.0]]


def test_m2po_and_the_behaviour_cap_leave_out_different_tokens_and_count_them_differently():
    # l = (2.0, 0.1, 0.1, 0.1): M2PO leaves 2.0 out of the mask (4, then 0.01 < 0.04), 3 kept: weight e^0.1;
    # with the cap at 1.05 (< e^0.1) the three are masked too, but AReaL counts them: the loss is 0
    log_weights = torch.tensor([[2.0, 0.1, 0.1, 0.1]], dtype=F64)
    mask = torch.ones(1, 4, dtype=F64)
    old = torch.zeros_like(mask)
    weights, kept, _ = mismatch_weights(
        old, old - log_weights, mask, RLConfig(name="t", mismatch="m2po", mismatch_cap=5.0)
    )
    assert weights.tolist() == [pytest.approx([0.0] + [math.exp(0.1)] * 3)]
    assert kept.tolist() == [[0.0, 1.0, 1.0, 1.0]]
    # and the loss (ratio 1, A = 1) is AReaL's: -(3 e^0.1) / 3 kept tokens
    logprobs = old.clone().requires_grad_()
    loss, _ = _ours(resolve_algorithm("m2po"), logprobs, old, old - log_weights, torch.ones_like(mask), mask)
    assert loss.item() == pytest.approx(-math.exp(0.1))
    theirs = _areal_loss(old, old, old - log_weights, torch.ones_like(mask), mask, m2_threshold=0.04)
    assert theirs.item() == pytest.approx(-math.exp(0.1))


# --- against AReaL's formula --------------------------------------------------------------------------


@pytest.mark.parametrize("preset", ["decoupled_ppo", "m2po"])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("spread", [0.05, 1.0])
def test_loss_and_gradient_are_areals(preset, seed, spread):
    # spread 0.05: few tokens past the cap or the second moment; 1.0: many past both
    (ours, our_grad, metrics), (theirs, their_grad) = _both(preset, *_random(seed, spread=spread))
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-12, abs=1e-12)
    assert torch.allclose(our_grad, their_grad, rtol=1e-10, atol=1e-14)
    if preset == "m2po" and spread == 1.0:
        assert 0 < metrics["train/m2po_frac"].item() < 1


@pytest.mark.parametrize("preset", ["decoupled_ppo", "m2po"])
def test_nan_padding_changes_nothing(preset):
    (ours, our_grad, _), (theirs, their_grad) = _both(preset, *_random(7, spread=0.5), nan_padding=True)
    assert math.isfinite(ours.item()) and torch.all(torch.isfinite(our_grad))
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-12)
    assert torch.allclose(our_grad, their_grad, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("preset", ["decoupled_ppo", "m2po"])
@pytest.mark.parametrize("log_weight", [20.0, -20.0, 50.0, -50.0])
def test_extreme_behaviour_log_ratios(preset, log_weight):
    # one token per row 20 or 50 nats off the sampler's: past the cap (+) it is masked, far below (-)
    # it weighs ~0; M2PO leaves it out either way. The harness clamps the log-ratio at +-20 and AReaL
    # does not: at -50 decoupled_ppo weighs the token e^-20 where AReaL weighs it e^-50, a difference
    # of under e^-20 |A| per token; everywhere else the two are the same to rounding
    proximal, logprobs, behaviour, advantages, mask = _random(3, spread=0.05)
    behaviour[:, 0] = proximal[:, 0] - log_weight
    (ours, our_grad, _), (theirs, their_grad) = _both(preset, proximal, logprobs, behaviour, advantages, mask)
    assert math.isfinite(ours.item()) and torch.all(torch.isfinite(our_grad))
    clamped = (preset, log_weight) == ("decoupled_ppo", -50.0)
    bound = 3 * math.exp(-20.0) * advantages.abs().max().item() if clamped else 0
    assert abs(ours.item() - theirs.item()) <= bound + 1e-14
    assert torch.allclose(our_grad, their_grad, rtol=1e-10, atol=bound + 1e-14)
    assert our_grad[:, 0].abs().max().item() < 1e-8  # the stale token gives (nearly) nothing
    if preset == "m2po":
        assert not our_grad[:, 0].any()  # M2PO left it out


@pytest.mark.parametrize("preset", ["decoupled_ppo", "m2po"])
def test_extreme_current_log_ratios_stay_finite(preset):
    # the current policy 20 and 100 nats from the proximal one. The harness clamps the log-ratio at
    # +-20 before exp, AReaL does not: at +20 the clip holds the term either way; at -100 a positive
    # advantage's term is -A r with r = e^-20 here, e^-100 in AReaL: under e^-20 |A| w / n apart
    proximal, logprobs, behaviour, advantages, mask = _random(5, spread=0.05)
    logprobs[0, :2] = proximal[0, :2] + torch.tensor([20.0, -100.0], dtype=F64)
    (ours, our_grad, _), (theirs, _) = _both(preset, proximal, logprobs, behaviour, advantages, mask)
    assert math.isfinite(ours.item()) and torch.all(torch.isfinite(our_grad))
    assert advantages[0, 0] > 0  # so the -100 token's term is the unclipped one
    bound = math.exp(-20.0) * advantages[0, 0].item() * 5.0 * 2
    assert 0 < abs(ours.item() - theirs.item()) <= bound


def test_m2po_on_a_batch_of_padding_only_is_zero():
    mask = torch.zeros(2, 3, dtype=F64)
    old = torch.full_like(mask, math.nan)
    weights, _, metrics = mismatch_weights(old, old, mask, RLConfig(name="t", mismatch="m2po"))
    assert weights.tolist() == [[0.0] * 3] * 2
    assert all(v.item() == 0.0 for v in metrics.values())
    assert not m2po_keep(torch.zeros_like(mask), mask, 0.04).any()


def test_m2po_one_token_is_kept_whatever_its_second_moment():
    # one token with l = 1.5 (second moment 2.25 >= 0.04): all but one of one is none left out;
    # its behaviour weight e^1.5 = 4.48 is under the cap 5
    mask = torch.ones(1, 1, dtype=F64)
    old = torch.zeros_like(mask)
    weights, _, metrics = mismatch_weights(old, old - 1.5, mask, RLConfig(name="t", mismatch="m2po", mismatch_cap=5.0))
    assert weights.item() == pytest.approx(math.exp(1.5))
    assert metrics["m2po_frac"].item() == 0.0 and metrics["m2po_m2_kept"].item() == pytest.approx(2.25)


# --- AReaL's sequence-level rejection sampling on the ratio --------------------------------------------


def _areal_sequence_ratio(proximal, behaviour, loss_mask, upper, lower, action):
    """``apply_rejection_sampling``'s 2D padded branch at ``level='sequence'``, ``metric='ratio'``,
    ``agg='mean'`` (areal/utils/functional/functional.py@4aef98d lines 228-426): the loss mask and
    the behaviour weights it returns (``lower`` None: no lower bound; clamp mode: 0)."""
    log_ratio = proximal.detach() - behaviour.detach()
    log_ratio = torch.where(torch.isfinite(log_ratio), log_ratio, 0.0)
    masked_agg = torch.where(loss_mask.bool(), log_ratio, 0.0)
    valid_count = loss_mask.sum(dim=-1, keepdim=True).clamp(min=1)
    seq_log_mean = masked_agg.sum(dim=-1, keepdim=True) / valid_count
    behave_imp_weight = torch.exp(seq_log_mean).expand_as(log_ratio)
    seq_metric = torch.exp(masked_agg.sum(dim=-1, keepdim=True) / valid_count)
    in_seq = (seq_metric <= upper) if lower is None else (seq_metric >= lower) & (seq_metric <= upper)
    if action == "mask":
        updated_mask = loss_mask.bool() & in_seq.expand_as(loss_mask)
    else:
        floor = 0.0 if lower is None else lower
        behave_imp_weight = torch.where(
            (~in_seq).expand_as(loss_mask), behave_imp_weight.clamp(min=floor, max=upper), behave_imp_weight
        )
        updated_mask = loss_mask.bool()
    return updated_mask, torch.where(updated_mask, behave_imp_weight, 0.0)


def _areal_sequence_loss(logprobs, proximal, behaviour, advantages, loss_mask, upper, lower, action, eps_clip=0.2):
    """``ppo_actor_loss_fn`` (functional.py@4aef98d lines 429-560) with that rejection sampling."""
    loss_mask_count = loss_mask.bool().count_nonzero() or 1
    loss_mask, behave_imp_weight = _areal_sequence_ratio(proximal, behaviour, loss_mask, upper, lower, action)
    ratio = torch.where(loss_mask, torch.exp(logprobs - proximal), 0)
    clipped_ratio = torch.clamp(ratio, 1.0 - eps_clip, 1.0 + eps_clip)
    pg_loss = torch.max(-advantages * ratio, -advantages * clipped_ratio) * behave_imp_weight
    return torch.where(loss_mask, pg_loss, 0).sum() / loss_mask_count


@pytest.mark.parametrize(
    "kind, kw, expected",
    [
        # log(pi_old / mu) = (ln 3, ln 0.5, ln 1.2): geometric mean 1.8^(1/3) = 1.2164 on every token
        ("sequence_geomean_mask", {"mismatch_cap": 2.0}, [1.8 ** (1 / 3)] * 3),
        ("sequence_geomean_mask", {"mismatch_cap": 1.2}, [0.0] * 3),  # the whole row masked
        ("sequence_geomean_mask", {"mismatch_cap": 3.0, "mismatch_floor": 1.25}, [0.0] * 3),
        ("sequence_geomean_truncate", {"mismatch_cap": 1.2}, [1.2] * 3),
        ("sequence_geomean_truncate", {"mismatch_cap": 3.0, "mismatch_floor": 1.25}, [1.25] * 3),
    ],
)
def test_sequence_geomean_by_hand(kind, kw, expected):
    old = torch.tensor([[-1.0, -2.0, -0.5, math.nan]], dtype=F64)  # NaN padding
    sampler = old - torch.tensor([[math.log(3.0), math.log(0.5), math.log(1.2), 0.0]], dtype=F64)
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]], dtype=F64)
    weights, _, metrics = mismatch_weights(old, sampler, mask, RLConfig(name="t", mismatch=kind, **kw))
    assert weights.tolist() == [pytest.approx(expected + [0.0])]
    assert metrics["mismatch_frac"].item() == (0.0 if expected[0] == pytest.approx(1.8 ** (1 / 3)) else 1.0)


@pytest.mark.parametrize("action", ["mask", "clamp"])
@pytest.mark.parametrize("floor", [0.0, 0.8])
@pytest.mark.parametrize("seed", range(3))
def test_sequence_geomean_loss_and_gradient_are_areals(action, floor, seed):
    proximal, logprobs, behaviour, advantages, mask = _random(seed, spread=0.4)
    kind = "sequence_geomean_mask" if action == "mask" else "sequence_geomean_truncate"
    cfg = resolve_algorithm("decoupled_ppo", {"mismatch": kind, "mismatch_cap": 1.1, "mismatch_floor": floor})
    pad = mask == 0
    mine = logprobs.masked_fill(pad, math.nan).requires_grad_()
    nan = math.nan
    ours, _ = _ours(cfg, mine, proximal.masked_fill(pad, nan), behaviour.masked_fill(pad, nan), advantages, mask)
    (our_grad,) = torch.autograd.grad(ours, mine)
    theirs_in = logprobs.clone().requires_grad_()
    lower = floor if floor else None
    theirs = _areal_sequence_loss(theirs_in, proximal, behaviour, advantages, mask, 1.1, lower, action)
    (their_grad,) = torch.autograd.grad(theirs, theirs_in)
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-12, abs=1e-14)
    assert torch.allclose(our_grad, their_grad, rtol=1e-10, atol=1e-14)


def test_the_random_rows_fall_on_both_sides_of_the_bounds():
    # so the comparison above sees rows kept and rows masked (or clamped), above the cap and below the floor
    kept = []
    for seed in range(3):
        proximal, _, behaviour, _, mask = _random(seed, spread=0.4)
        kept += [_areal_sequence_ratio(proximal, behaviour, mask, 1.1, lower, "mask")[0].sum() for lower in (None, 0.8)]
    assert kept == [9, 6, 10, 7, 1, 0]  # of 10 tokens: seed 1 without a floor keeps all, seed 2 with one none


@pytest.mark.parametrize("kind", ["sequence_geomean_mask", "sequence_geomean_truncate"])
@pytest.mark.parametrize("log_weight", [20.0, -20.0, 60.0, -60.0])
def test_sequence_geomean_extremes(kind, log_weight):
    # every token of the one-token row and of the 3-token row at log(pi_old / mu) = +-20, +-60; the
    # all-padding row holds NaN. The row's mean log-weight is clamped to +-20 (AReaL: not): a weight
    # of e^20 is over any cap (masked, or truncated to C), e^-20 is ~0; all finite
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]], dtype=F64)
    old = torch.where(mask.bool(), -1.0, math.nan).to(F64)
    weights, _, metrics = mismatch_weights(old, old - log_weight, mask, RLConfig(name="t", mismatch=kind))
    assert torch.all(torch.isfinite(weights)) and all(math.isfinite(v.item()) for v in metrics.values())
    assert weights[2].tolist() == [0.0] * 3
    on = weights[mask.bool()]
    if log_weight > 0:
        assert on.tolist() == ([2.0] * 4 if kind.endswith("truncate") else [0.0] * 4)
    else:
        assert on.tolist() == pytest.approx([math.exp(-20.0)] * 4)


def test_the_parts_listing_says_they_read_the_samplers_log_probs():
    rows = {(r["slot"], r["name"]): r for r in describe_parts()}
    for name in ("m2po", "sequence_geomean_mask", "sequence_geomean_truncate", "token_mask"):
        assert rows["mismatch", name]["inputs"] == ["sampler log-probs", "recomputed old log-probs"]
    assert rows["mismatch", "m2po"]["reads"] == ["m2_threshold", "mismatch_cap", "mismatch_floor"]
    assert rows["mismatch", "none"]["inputs"] == [] and rows["policy_loss", "clipped"]["inputs"] == []


def test_the_parts_listing_names_the_sampler_and_teacher_inputs_of_the_other_new_slots():
    rows = {(r["slot"], r["name"]): r for r in describe_parts()}
    assert rows["off_policy_mask", "opsm"]["inputs"] == ["sampler log-probs"]
    assert rows["distill", "loss"]["inputs"] == ["the teacher's log-probs on the sampled tokens, from its own pass"]
    assert rows["distill", "advantage"]["inputs"] == rows["distill", "loss"]["inputs"]
    assert rows["distill", "none"]["inputs"] == [] and rows["off_policy_mask", "none"]["inputs"] == []
