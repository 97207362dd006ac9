"""Every way a step can run trains on tool-calling episodes: a whole trial (warm start on the
demonstrated calls, RL or DPO steps on episodes, held-out evaluation of episodes) with the tool
metrics logged.

A step differs between presets only in what its parts read besides the batch (the critic, the
sampler's log-probs, a teacher, the policy's token probabilities: ``parts.part_inputs``) and in
its kind (RL or DPO); the loss each part computes on the episode's tokens is checked for every
preset, tool tokens masked, in ``test_tool_token_mask.py``. So one whole trial per step path
covers every preset's episodes without a trial per preset.
"""

from __future__ import annotations

import math

import pytest

from harness.algorithms import PRESETS
from harness.algorithms.parts import part_inputs, slots_of
from harness.algorithms.presets import resolve_algorithm
from harness.engine.trial import run_trial

TOOL_METRICS = [
    "tools/calls_per_episode",
    "tools/valid_call_rate",
    "tools/error_rate",
    "tools/turns",
    "tools/hit_turn_limit",
    "train/reward_answer",
    "train/reward_format",
    "tokens/policy",
    "tokens/tool",
]


def step_path(preset: str) -> tuple[str, tuple[str, ...]]:
    """What a preset's step runs: its kind and what its parts read besides the batch."""
    cfg = resolve_algorithm(preset)
    return cfg.kind, tuple(sorted({what for slot in slots_of(cfg) for what in part_inputs(slot, getattr(cfg, slot))}))


#: step path -> the first preset (in the registry's order) whose step runs it
STEP_PATHS: dict[tuple[str, tuple[str, ...]], str] = {}
for _preset in PRESETS:
    STEP_PATHS.setdefault(step_path(_preset), _preset)


def test_the_step_paths_cover_the_critic_dpo_sampler_teacher_and_token_probability_steps():
    inputs = {what for _kind, whats in STEP_PATHS for what in whats}
    assert {kind for kind, _ in STEP_PATHS} == {"rl", "dpo"}
    for needed in ("critic", "sampler log-probs", "teacher", "token log-probs"):
        assert any(needed in what for what in inputs), needed


@pytest.mark.slow
@pytest.mark.parametrize("preset", sorted(STEP_PATHS.values()))
def test_every_step_path_trains_on_tool_calling_episodes(make_tool_spec, preset):
    spec = make_tool_spec(preset)
    result = run_trial(spec)
    step = result.history[1]
    for name in TOOL_METRICS:
        assert name in step and math.isfinite(step[name]), name
    assert step["tools/calls_per_episode"] > 0 and step["tokens/tool"] > 0  # the warm start taught the call
    assert step["tokens/generated"] == step["tokens/policy"]  # what the policy wrote, not the tools
    assert math.isfinite(result.final["eval/accuracy"])
    assert result.prompts[-1].prompt_ids and len(result.prompts[-1].greedy) == spec.task.n_eval


@pytest.mark.slow
def test_the_unmasked_ablation_trains_on_the_tools_tokens_too(make_tool_spec):
    specs = (make_tool_spec("grpo", {"mask_tool_tokens": masked}) for masked in (True, False))
    masked, unmasked = (run_trial(spec).history[1] for spec in specs)
    # the same seed and warm start: the same first episodes; only what the loss reads differs
    assert (masked["tokens/policy"], masked["tokens/tool"]) == (unmasked["tokens/policy"], unmasked["tokens/tool"])
    assert masked["tokens/tool"] > 0
    assert masked["train/completion_len"] == unmasked["train/completion_len"]  # the policy's own tokens
    assert unmasked["tokens/trained"] > masked["tokens/trained"]
