"""calibration: aa and placebo: random_reward add conditions built from the control."""

import pytest

from harness.decide.sequential.pools import look_specs
from harness.errors import ConfigError
from harness.study.design import earlier_design
from harness.study.expand import (
    calibration_comparisons,
    comparisons,
    expand,
)
from harness.study.load import parse_study
from harness.study.sections import AA_SEED_OFFSET


def study(**extra):
    return parse_study(
        {
            "name": "cal",
            "control": "grpo",
            "seeds": 3,
            "arms": [{"name": "grpo", "algorithm": "grpo"}, {"name": "dr", "algorithm": "dr_grpo"}],
            **extra,
        }
    )


def test_the_aa_copy_is_the_control_on_disjoint_seeds():
    s = study(calibration="aa")
    assert s.conditions() == ["grpo", "dr", "grpo-aa"]
    specs = {(t.arm, t.seed): t for t in expand(s)}
    aa = [seed for arm, seed in specs if arm == "grpo-aa"]
    assert aa == [AA_SEED_OFFSET + k for k in range(3)]
    control, copy = specs[("grpo", 0)], specs[("grpo-aa", AA_SEED_OFFSET)]
    assert copy.algorithm == control.algorithm and copy.train == control.train
    assert comparisons(s) == [("dr", "grpo")]  # the family is unchanged
    assert calibration_comparisons(s) == [("grpo-aa", "grpo", "aa")]
    assert all(earlier_design(s, t) is None for t in expand(s))


def test_the_placebo_is_compared_with_every_arm_of_its_cell():
    s = study(placebo="random_reward", grid={"train.max_new_tokens": [6, 8]})
    names = s.conditions()
    assert "grpo-placebo[train.max_new_tokens=6]" in names
    pairs = calibration_comparisons(s)
    assert ("dr[train.max_new_tokens=8]", "grpo-placebo[train.max_new_tokens=8]", "placebo") in pairs
    assert ("grpo[train.max_new_tokens=6]", "grpo-placebo[train.max_new_tokens=6]", "placebo") in pairs
    assert len(pairs) == 4
    assert all(c[0].startswith("dr") for c in comparisons(s))


def test_a_calibration_name_taken_by_an_arm_is_refused():
    with pytest.raises(ConfigError, match="adds the condition 'grpo-aa', which is already an arm"):
        parse_study(
            {
                "name": "x",
                "control": "grpo",
                "seeds": 3,
                "calibration": "aa",
                "arms": [{"name": "grpo", "algorithm": "grpo"}, {"name": "grpo-aa", "algorithm": "rloo"}],
            }
        )


def test_calibration_with_tuning_is_refused():
    tuning = {"n_trials": 2, "seeds": [100], "search_space": {"lr": {"low": 1e-4, "high": 1e-3}}}
    with pytest.raises(ConfigError, match="calibration: cannot be combined with tuning"):
        study(calibration="aa", tuning=tuning)


def test_a_sequential_aa_copy_takes_the_same_positions_of_its_own_seeds():
    s = study(seeds=6, calibration="aa", sequential={"looks": [3, 6]})
    assert [(t.arm, t.seed) for t in look_specs(s, 1, ["grpo", "grpo-aa"])] == [
        ("grpo", 3),
        ("grpo-aa", AA_SEED_OFFSET + 3),
        ("grpo", 4),
        ("grpo-aa", AA_SEED_OFFSET + 4),
        ("grpo", 5),
        ("grpo-aa", AA_SEED_OFFSET + 5),
    ]
