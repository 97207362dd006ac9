"""The compute axis: the FLOPs estimate on hand-worked numbers, and a real trial's history, whose
every row carries the compute spent so far."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from harness.engine.compute import STEP_FLOPS, ComputeTotals, ModelSize, StepTokens, model_size, step_flops
from harness.engine.spec import COMPUTE_METRICS
from harness.engine.trial import run_trial, start_policy


class TinyLM(nn.Module):
    """An embedding of 10 x 4 (40), a body of 4 x 4 + 4 (20) and a head of 4 x 10 (40, or the
    embedding's own weight when tied)."""

    def __init__(self, tied: bool = False):
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.body = nn.Linear(4, 4)
        self.head = nn.Linear(4, 10, bias=False)
        if tied:
            self.head.weight = self.embed.weight

    def get_input_embeddings(self):
        return self.embed

    def get_output_embeddings(self):
        return self.head


def test_the_matmul_parameters_leave_out_the_lookup_table_and_count_the_head():
    assert model_size(TinyLM()) == ModelSize(matmul=60, trainable=60)  # 100 - the 40 of the lookup
    assert model_size(TinyLM(tied=True)) == ModelSize(matmul=60, trainable=60)  # the shared weight is the head
    assert model_size(TinyLM(), head=False).matmul == 20  # a critic's trunk: the body only
    assert model_size(TinyLM(tied=True), head=False).matmul == 20
    lora_like = TinyLM()
    lora_like.requires_grad_(False)
    lora_like.body.bias.requires_grad_(True)  # 4 trained parameters, as an adapter's few
    assert model_size(lora_like, checkpointed=True) == ModelSize(matmul=60, trainable=4, checkpointed=True)


def test_an_update_token_costs_a_forward_a_backward_and_the_trained_weights_gradients():
    assert ModelSize(60, 60).update_flops == 360  # 6 N: full fine-tuning
    assert ModelSize(60, 4).update_flops == 4 * 60 + 2 * 4  # LoRA-like: ~4 N
    assert ModelSize(60, 60, checkpointed=True).update_flops == 480  # the forward again: 8 N


def test_a_steps_flops_add_up_its_passes():
    policy = ModelSize(60, 60)
    # 10 sampled tokens and 20 no-grad tokens at 2 N, 30 update tokens at 6 N
    assert step_flops(StepTokens(sampled=10, forward=20, updated=30), policy) == 2 * 60 * 30 + 360 * 30 == 14_400
    critic = ModelSize(20, 20)  # its own trunk: 5 no-grad tokens at 2 N_c, 7 update tokens at 6 N_c
    tokens = StepTokens(sampled=10, forward=20, updated=30, critic_forward=5, critic_updated=7)
    assert step_flops(tokens, policy, critic) == 14_400 + 2 * 20 * 5 + 120 * 7 == 15_440
    counted = StepTokens(sampled=torch.tensor(10.0, dtype=torch.float64), updated=torch.tensor(3.0))
    assert float(step_flops(counted, policy)) == 2 * 60 * 10 + 360 * 3


def test_the_totals_add_each_steps_compute_and_take_its_flops_out_of_its_metrics():
    totals = ComputeTotals()
    assert totals.totals == dict.fromkeys(COMPUTE_METRICS, 0.0)
    step = {STEP_FLOPS: 100.0, "tokens/generated": 8.0, "tokens/trained": 6.0, "time/step_s": 0.5}
    assert totals.add(dict(step)) == {
        "compute/flops": 100.0,
        "compute/generated_tokens": 8.0,
        "compute/trained_tokens": 6.0,
        "compute/wall_s": 0.5,
    }
    taken = dict(step)
    assert totals.add(taken)["compute/flops"] == 200.0 and STEP_FLOPS not in taken


def _columns(result, name: str) -> list[float]:
    return [row[name] for row in result.history]


def test_every_history_row_of_a_trial_carries_the_compute_spent_so_far(make_spec):
    result = run_trial(make_spec("grpo", train={"steps": 4, "eval_every": 2}))
    history = result.history
    assert history[0]["step"] == 0 and all(history[0][m] == 0.0 for m in COMPUTE_METRICS)
    for metric in COMPUTE_METRICS:
        values = _columns(result, metric)
        assert all(b >= a for a, b in zip(values, values[1:])), metric
    flops = _columns(result, "compute/flops")
    assert all(b > a for a, b in zip(flops, flops[1:]))
    eval_rows = [row for row in history if "eval/accuracy" in row]
    assert [row["step"] for row in eval_rows] == [0, 2, 4]
    assert all(set(COMPUTE_METRICS) <= set(row) for row in eval_rows)
    steps = history[1:]
    assert _columns(result, "compute/generated_tokens")[1:] == pytest.approx(
        torch.tensor([r["tokens/generated"] for r in steps]).cumsum(0).tolist()
    )
    assert history[-1]["compute/trained_tokens"] == sum(r["tokens/trained"] for r in steps)
    assert history[-1]["compute/wall_s"] == pytest.approx(sum(r["time/step_s"] for r in steps))
    assert all(STEP_FLOPS not in row for row in history)


def test_the_flops_count_the_passes_each_arm_runs(make_spec):
    """On the same seed the first step samples the same rollout, so the arms' first-step FLOPs
    differ only by their passes: GRPO samples (2 N), runs the reference (2 N) and one update
    (6 N) over the same tokens C, 10 N C; two epochs update twice, 16 N C; recomputing the old
    log-probs adds a pass, 12 N C; a critic with its own trunk (N_c = N - head) adds its old
    values and its update, 8 N_c C."""

    def first_step(name: str = "grpo", **overrides) -> float:
        return run_trial(make_spec(name, overrides=overrides, train={"steps": 1})).history[1]["compute/flops"]

    grpo = first_step()
    assert first_step(epochs=2) / grpo == pytest.approx(16 / 10)
    assert first_step(old_logprobs="recompute") / grpo == pytest.approx(12 / 10)
    _, lm, _, _ = start_policy(make_spec("grpo"))
    n, trunk = model_size(lm.model).matmul, model_size(lm.model, head=False).matmul
    with_critic = first_step("ppo", critic="value_model") / grpo
    ppo = first_step("ppo") / grpo  # a value head on the policy's trunk, no recompute: one more policy pass
    assert ppo == pytest.approx(12 / 10)
    assert with_critic == pytest.approx((10 * n + 8 * trunk) / (10 * n))


def test_a_dpo_trial_fills_the_compute_axis_from_its_own_passes(make_spec):
    """DPO samples its groups (2 N a token), runs the reference over its pairs (2 N) and updates
    on them (6 N a token per epoch): at least the sampling's FLOPs each step, and the trained
    tokens are its pairs' completion tokens."""
    result = run_trial(make_spec("dpo", train={"steps": 2}))
    _, lm, _, _ = start_policy(make_spec("dpo"))
    n = model_size(lm.model).matmul
    steps = result.history[1:]
    assert result.history[-1]["compute/trained_tokens"] == sum(r["tokens/trained"] for r in steps)
    flops = [b["compute/flops"] - a["compute/flops"] for a, b in zip(result.history, steps)]
    assert all(f >= 2 * n * r["tokens/generated"] for f, r in zip(flops, steps))
