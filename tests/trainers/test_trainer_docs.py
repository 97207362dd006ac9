"""The README's trainer examples are valid arms: their templates name real trial-file fields, and
filled in they carry the arm's own numbers into verl's and OpenRLHF's keys."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from harness.engine.trial_file import fill, trial_document
from harness.study.expand import condition_spec
from harness.study.load import parse_study

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "## Any trainer: TRL, verl, OpenRLHF or your own script"


def readme_example() -> dict:
    text = README.read_text(encoding="utf-8").split(SECTION, 1)[1]
    block = re.search(r"```yaml\n(.*?)```", text, re.S)
    return yaml.safe_load(block[1])


def filled_command(study, arm: str) -> list[str]:
    spec = condition_spec(study, arm, 0)
    document = trial_document(spec, Path("/trial"), "/start", [])
    return [fill(part, document) for part in spec.trainer.command]


def test_the_readme_arms_validate_and_map_the_arms_numbers():
    study = parse_study({"name": "readme", "seeds": 2, **readme_example()})
    assert {arm.name: study.arm_trainer(arm).kind for arm in study.arms} == {
        "grpo": "builtin",
        "plain_loop": "command",
        "verl_grpo": "command",
        "openrlhf_grpo": "command",
    }
    verl = filled_command(study, "verl_grpo")
    grpo = condition_spec(study, "grpo", 0).algorithm
    assert f"actor_rollout_ref.actor.clip_ratio_high={grpo.eps_high}" in verl
    assert f"actor_rollout_ref.rollout.n={grpo.group_size}" in verl
    assert "actor_rollout_ref.model.path=/start" in verl
    openrlhf = filled_command(study, "openrlhf_grpo")
    assert openrlhf[openrlhf.index("--n_samples_per_prompt") + 1] == str(grpo.group_size)
    assert openrlhf[openrlhf.index("--save_path") + 1] == "/trial/checkpoint"
