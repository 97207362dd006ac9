"""The sampler-trainer mismatch as every step measures it (``mismatch/*``), and what the
corrections do with it: they change the loss where the sampler's log-probs differ from the
trainer's (a synthetic sampler perturbed by hand here; a real vLLM server in
tests/engine/vllm_backend/test_vllm_trials.py) and are exact no-ops where they agree."""

import math

import pytest
import torch

from harness.algorithms.aggregation import make_aggregator
from harness.algorithms.config import RLConfig
from harness.algorithms.mismatch import mismatch_measure
from harness.algorithms.objective import UpdateBatch, update_loss
from harness.algorithms.parts import MISMATCH
from harness.algorithms.presets import resolve_algorithm

#: pi / mu on four tokens of two rows (the third column of row 2 is padding with garbage)
RATIOS = [[2.0, 0.5, 1.0], [1.25, 1.2]]  # the rows' products: 1 and 1.5
TRAINER = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -0.7, 40.0]], dtype=torch.float64)
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], dtype=torch.float64)
SAMPLER = TRAINER - torch.tensor(
    [[math.log(r) for r in RATIOS[0]], [math.log(r) for r in RATIOS[1]] + [-90.0]], dtype=torch.float64
)


def test_the_measure_by_hand():
    got = {k: v.item() for k, v in mismatch_measure(TRAINER, SAMPLER, MASK).items()}
    ratios = [r for row in RATIOS for r in row]  # 2, 0.5, 1, 1.25, 1.2
    logs = [abs(math.log(r)) for r in ratios]
    assert got["mismatch/abs_logp_mean"] == pytest.approx(sum(logs) / 5)
    assert got["mismatch/abs_logp_max"] == pytest.approx(math.log(2.0))  # |ln 2| = |ln 0.5|, padding left out
    # k3 of KL(mu || pi) from tokens drawn from mu: the mean of r - 1 - ln r
    assert got["mismatch/kl_k3"] == pytest.approx(sum(r - 1 - math.log(r) for r in ratios) / 5)
    # quantiles of the sorted ratios 0.5, 1, 1.2, 1.25, 2 (linear interpolation, as torch.quantile)
    assert got["mismatch/ratio_p50"] == pytest.approx(1.2)
    assert got["mismatch/ratio_p05"] == pytest.approx(0.5 + 0.2 * (1.0 - 0.5))
    assert got["mismatch/ratio_p95"] == pytest.approx(1.25 + 0.8 * (2.0 - 1.25))


def test_equal_log_probs_measure_zero_and_no_tokens_measure_zero():
    same = {k: v.item() for k, v in mismatch_measure(TRAINER, TRAINER.clone(), MASK).items()}
    assert same["mismatch/abs_logp_mean"] == same["mismatch/abs_logp_max"] == same["mismatch/kl_k3"] == 0.0
    assert same["mismatch/ratio_p05"] == same["mismatch/ratio_p50"] == same["mismatch/ratio_p95"] == 1.0
    empty = {k: v.item() for k, v in mismatch_measure(TRAINER, SAMPLER, torch.zeros_like(MASK)).items()}
    assert empty["mismatch/abs_logp_max"] == 0.0 and empty["mismatch/ratio_p50"] == 1.0


def _loss(cfg: RLConfig, sampler: torch.Tensor) -> float:
    """The update loss of one minibatch whose old log-probs are ``TRAINER`` (the current policy,
    moved a little by an earlier update) and whose sampler log-probs are ``sampler``."""
    current = TRAINER + torch.tensor([[0.1, -0.05, 0.02], [-0.1, 0.03, 0.0]], dtype=torch.float64)
    batch = UpdateBatch(
        logprobs=current,
        old_logprobs=TRAINER,
        ref_logprobs=TRAINER,
        advantages=torch.tensor([[1.0] * 3, [-0.5] * 3], dtype=torch.float64),
        mask=MASK,
        entropy=torch.zeros_like(MASK),
        sampler_logprobs=sampler,
    )
    return update_loss(batch, cfg, make_aggregator(cfg, 3))[0].item()


#: TIS, MIS and IcePop (MIS with a band [floor, 5], as IcePop's [0.5, 5]), per token and per sequence
CORRECTIONS = [
    {"mismatch": "token_truncate", "mismatch_cap": 1.2},
    {"mismatch": "sequence_truncate", "mismatch_cap": 1.2},
    {"mismatch": "token_mask", "mismatch_cap": 1.2},
    {"mismatch": "token_mask", "mismatch_cap": 5.0, "mismatch_floor": 0.6},
    {"mismatch": "sequence_mask", "mismatch_cap": 1.2},
    # issue 35: verl's rollout correction (batch-normalised token TIS; K3 and geometric-mean rejection),
    # OpenRLHF's two-sided tis and seq-mask-tis at its [0.5, 5] defaults
    {"mismatch": "rollout_corr", "rollout_is": "token", "mismatch_cap": 1.2, "rollout_is_batch_normalize": True},
    {"mismatch": "rollout_corr", "rollout_is": "none", "rollout_rs": "seq_mean_k3", "rollout_rs_threshold": 0.1},
    {"mismatch": "rollout_corr", "rollout_rs": "seq_mean_k1", "rollout_rs_threshold": 1.001},
    {"mismatch": "token_truncate", "mismatch_cap": 5.0, "mismatch_floor": 0.6},
    {"mismatch": "seq_mask_tis", "mismatch_cap": 5.0, "mismatch_floor": 0.5},
    # issue 35: AReaL's objectives for asynchronous training
    {"mismatch": "m2po", "mismatch_cap": 5.0},
    {"mismatch": "sequence_geomean_mask", "mismatch_cap": 1.2},
    {"mismatch": "sequence_geomean_truncate", "mismatch_cap": 1.2},
]


@pytest.mark.parametrize("correction", CORRECTIONS, ids=lambda c: "-".join(map(str, c.values())))
def test_a_correction_changes_the_loss_where_the_sampler_differs_and_is_a_no_op_where_it_agrees(correction):
    cfg = resolve_algorithm("grpo", correction)
    plain = resolve_algorithm("grpo")
    assert _loss(cfg, SAMPLER) != pytest.approx(_loss(plain, SAMPLER), abs=1e-6)
    # the hf sampler in fp32: its log-probs agree with the trainer's to ~5e-7 per token
    rounding = TRAINER + 5e-7 * torch.tensor([[1.0, -1.0, 1.0], [-1.0, 1.0, 0.0]], dtype=torch.float64)
    assert _loss(cfg, rounding) == pytest.approx(_loss(plain, rounding), abs=1e-6)
    assert _loss(cfg, TRAINER.clone()) == _loss(plain, TRAINER.clone())


def test_every_correction_is_covered():
    assert {c["mismatch"] for c in CORRECTIONS} == set(MISMATCH.names()) - {"none"}
