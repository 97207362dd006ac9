"""Loading a study (``harness validate``, ``plan``, ``run``) refuses a TRL arm whose parts TRL lacks,
naming the arm, before any work."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.errors import ConfigError
from harness.study.load import load_study

BASE = Path(__file__).resolve().parents[2] / "studies" / "common" / "base_testbed.yaml"


def _study(tmp_path, arm: dict) -> Path:
    path = tmp_path / "study.yaml"
    doc = {
        "name": "trl_arms",
        "include": str(BASE),
        "control": "builtin",
        "seeds": 2,
        "min_effect": 0.05,
        "arms": [{"name": "builtin", "algorithm": "grpo"}, {"name": "trl", "trainer": "trl", **arm}],
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_trl_arm_with_a_part_trl_lacks_fails_validation_naming_the_arm(tmp_path):
    with pytest.raises(ConfigError, match=r"arms\[1\] \(trl\): kl_estimator 'k2': TRL's KL in the loss is k3"):
        load_study(_study(tmp_path, {"algorithm": "grpo", "set": {"kl_estimator": "k2"}}))


@pytest.mark.slow
def test_a_trl_arm_whose_parts_all_map_loads(tmp_path):
    study = load_study(_study(tmp_path, {"algorithm": "dr_grpo"}))
    assert study.arm_trainer(study.arm("trl")).kind == "trl"
