"""The TRL adapter's compute axis on hand-worked numbers: TRL's passes counted as the builtin
trainer counts its own (``harness.engine.compute``), the trunk over every prompt and completion
token, the LM head at the completion tokens, its logits kept for the backward pass."""

from __future__ import annotations

import json

from harness.engine.compute import ModelSize
from harness.trainers.trl_adapter import HarnessMetrics, TokenFlops, token_flops

#: a trunk of 20 and a head of 40 matmul parameters, all trained
SIZE = ModelSize(trunk=20, head=40, trunk_trainable=20, head_trainable=40)


def test_a_tokens_flops_count_sampling_the_no_grad_passes_and_the_updates():
    # one no-grad pass, one epoch: a context token 2 x 20 (sampling) + 2 x 20 (no-grad) + 6 x 20
    # (update); a completion token 2 x 40 + 2 x 40 + (2 + 2 + 2) x 40, TRL keeping its logits
    assert token_flops(SIZE, no_grad_passes=1, epochs=1) == TokenFlops(context=200.0, completion=400.0)
    # no no-grad pass, two epochs: 2 x 20 + 2 x 120; 2 x 40 + 2 x 240
    assert token_flops(SIZE, no_grad_passes=0, epochs=2) == TokenFlops(context=280.0, completion=560.0)


def test_each_line_carries_the_flops_of_the_tokens_sampled_so_far(tmp_path):
    metrics = HarnessMetrics(
        tmp_path / "metrics.jsonl", updates_per_step=2, rows_per_step=4, epochs=1, flops=TokenFlops(200.0, 400.0)
    )
    # TRL's num_tokens: prompt and completion tokens of every row so far; 4 rows of mean length 2
    first = metrics.line(2, {"reward": 0.5, "num_tokens": 30.0, "completions/mean_length": 2.0})
    assert first["step"] == 1 and first["compute/generated_tokens"] == 8.0
    assert first["compute/flops"] == 30 * 200 + 8 * 400 == 9_200
    second = metrics.line(4, {"reward": 0.5, "num_tokens": 64.0, "completions/mean_length": 3.0})
    assert second["compute/flops"] == 64 * 200 + (8 + 12) * 400
    metrics.write(second)
    assert json.loads((tmp_path / "metrics.jsonl").read_text())["compute/flops"] == 20_800
