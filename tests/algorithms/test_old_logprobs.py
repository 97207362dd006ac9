"""Where the old log-probs come from: a part of its own, resolved from the policy's weight dtypes."""

import pytest
import torch

from harness.algorithms.old_logprobs import recomputes_old_logprobs
from harness.algorithms.parts import OLD_LOGPROBS, SLOTS
from harness.algorithms.presets import PRESETS, resolve_algorithm
from harness.algorithms.probe import probe
from harness.algorithms.probe_result import UNPROBED
from harness.errors import ConfigError

FP32, BF16, FP16 = torch.float32, torch.bfloat16, torch.float16


@pytest.mark.parametrize(
    "source, dtypes, recomputes",
    [
        ("sampler", {FP32}, False),
        ("sampler", {BF16}, False),
        ("recompute", {FP32}, True),
        ("recompute", {BF16}, True),
        ("auto", {FP32}, False),
        ("auto", {BF16}, True),
        ("auto", {FP16}, True),
        ("auto", {BF16, FP32}, True),  # a bf16 base with fp32 LoRA adapters
    ],
)
def test_each_source_recomputes_by_hand(source, dtypes, recomputes):
    cfg = resolve_algorithm("grpo", {"old_logprobs": source})
    assert recomputes_old_logprobs(cfg, dtypes) is recomputes


def test_it_is_a_slot_of_every_rl_preset_defaulting_to_auto_and_not_of_dpo():
    assert SLOTS["old_logprobs"] is OLD_LOGPROBS
    assert OLD_LOGPROBS.names() == ["sampler", "recompute", "auto"]
    # prime_rl's trust region and KL are against the sampler's log-probs, as prime-rl's, in any precision
    sources = {n: p.config.old_logprobs for n, p in PRESETS.items() if p.config.kind == "rl"}
    assert sources.pop("prime_rl") == "sampler"
    assert set(sources.values()) == {"auto"}
    with pytest.raises(ConfigError, match="unknown old log-probs source 'trainer'; valid: auto, recompute"):
        resolve_algorithm("grpo", {"old_logprobs": "trainer"})
    with pytest.raises(ConfigError, match="'old_logprobs' belongs to RL algorithms"):
        resolve_algorithm("dpo", {"old_logprobs": "recompute"})


def test_the_probe_cannot_see_it_so_arms_differing_there_are_never_called_the_same():
    # the source changes the data the loss is fed, not the loss: same on the probe's fixed batch
    sampler, recompute = (resolve_algorithm("grpo", {"old_logprobs": s}) for s in ("sampler", "recompute"))
    assert probe(sampler, 8).same_as(probe(recompute, 8))
    assert "old_logprobs" in UNPROBED


@pytest.mark.parametrize("kind", ["token_truncate", "sequence_truncate", "token_mask", "sequence_mask"])
def test_a_mismatch_correction_makes_the_step_recompute_whatever_the_precision(kind):
    cfg = resolve_algorithm("grpo", {"mismatch": kind})
    assert recomputes_old_logprobs(cfg, {FP32}) is True
    assert recomputes_old_logprobs(resolve_algorithm("grpo", {"mismatch": "none"}), {FP32}) is False


def test_a_correction_with_the_samplers_own_log_probs_is_refused():
    with pytest.raises(
        ConfigError,
        match="mismatch 'token_truncate' weighs the trainer's old log-probs against "
        "the sampler's, but old_logprobs=sampler makes them the same",
    ):
        resolve_algorithm("grpo", {"mismatch": "token_truncate", "old_logprobs": "sampler"})
    with pytest.raises(ConfigError, match="mismatch_floor 3.0 is not below mismatch_cap 2.0"):
        resolve_algorithm("grpo", {"mismatch": "token_mask", "mismatch_floor": 3.0})
    with pytest.raises(ConfigError, match="mismatch_cap is read by none .*read only with mismatch=token_truncate"):
        resolve_algorithm("grpo", {"mismatch_cap": 3.0})
