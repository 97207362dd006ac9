"""The judge loads what a program wrote as it was trained: a peft adapter on its named base, and
the periodic checkpoints the study's curve asks for (multiples of train.eval_every)."""

from __future__ import annotations

import pytest
from trainer_helpers import SAVE_START

from harness.trainers.dispatch import run_trial

pytestmark = pytest.mark.slow


def test_a_peft_adapter_is_judged_on_its_base(program_spec, script):
    body = (
        SAVE_START
        + """
from peft import LoraConfig, get_peft_model
adapted = get_peft_model(model, LoraConfig(r=2, lora_alpha=4, target_modules="all-linear"))
adapted.save_pretrained(trial["checkpoint_dir"])
assert json.loads(Path(trial["checkpoint_dir"], "adapter_config.json").read_text())["base_model_name_or_path"]
"""
    )
    result = run_trial(program_spec(script(body)))
    assert [p.step for p in result.prompts] == [0, 2]
    # a fresh adapter (B = 0) changes nothing: the judge scores the start model's greedy answers again
    assert result.prompts[1].greedy == result.prompts[0].greedy


def test_the_curve_reads_the_periodic_checkpoints_at_multiples_of_eval_every(program_spec, script):
    body = (
        SAVE_START
        + """
for step in (1, 2, 3):
    model.save_pretrained(Path(trial["checkpoints_dir"]) / f"step-{step}")
model.save_pretrained(trial["checkpoint_dir"])
"""
    )
    spec = program_spec(script(body), train={"steps": 4, "eval_every": 2})
    result = run_trial(spec)
    assert sorted({p.step for p in result.prompts}) == [0, 2, 4]  # step-1 and step-3 are not curve points
    assert [row["step"] for row in result.history] == [0, 2, 4]
    assert "eval/accuracy" in result.final and result.final["eval/accuracy_start"] == result.history[0]["eval/accuracy"]
