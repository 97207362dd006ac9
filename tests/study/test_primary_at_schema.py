"""The ``primary_at:`` and ``scaling:`` sections: where the primary comparison reads each trial,
and the fitted curves' settings; their defaults, their errors and the results meta that carries them."""

import pytest

from harness.errors import ConfigError
from harness.study.load import parse_study
from harness.study.sections import PRIMARY_AXES
from harness.tracking.results import load_results


def study(tmp_path=None, **extra):
    data = {
        "name": "cm",
        "control": "grpo",
        "seeds": 2,
        "arms": [{"name": "grpo", "algorithm": "grpo"}, {"name": "rloo", "algorithm": "rloo"}],
        **extra,
    }
    if tmp_path is not None:
        data["output_dir"] = str(tmp_path / "cm")
    return data


def test_the_defaults_read_the_final_evaluation_and_fit_when_there_are_enough_points():
    s = parse_study(study())
    assert s.primary_at.model_dump() == {"point": "final", "axis": "compute/flops", "budget": None}
    assert s.scaling.model_dump() == {"fit": "auto", "efficiency_margin": 1.25}
    assert s.primary_at.describe("eval/accuracy") == "eval/accuracy at the final evaluation"


def test_a_budget_reads_in_the_axiss_units():
    s = parse_study(study(primary_at={"point": "budget", "axis": "compute/flops", "budget": 2e9}))
    assert s.primary_at.describe("eval/accuracy") == "eval/accuracy at 2.0e9 FLOPs (interpolated between evaluations)"
    s = parse_study(study(primary_at={"point": "auc", "axis": "step", "budget": 30}))
    assert s.primary_at.describe("eval/mean_reward") == (
        "eval/mean_reward averaged over 0 to 30 steps (area under the curve / budget)"
    )
    assert set(PRIMARY_AXES) == {
        "compute/flops",
        "compute/generated_tokens",
        "compute/trained_tokens",
        "compute/wall_s",
        "step",
    }


@pytest.mark.parametrize(
    "section, message",
    [
        ({"point": "budget"}, "primary_at.budget: required with point: budget, in FLOPs"),
        ({"point": "auc", "axis": "step"}, "primary_at.budget: required with point: auc, in steps"),
        ({"point": "final", "budget": 10}, "primary_at.budget: not allowed with point: final"),
        ({"point": "budget", "budget": 0}, "primary_at.budget"),
        ({"point": "budget", "budget": -5}, "primary_at.budget"),
        ({"point": "budget", "budget": 5, "axis": "tokens/total"}, "primary_at.axis"),
        ({"point": "halfway"}, "primary_at.point"),
        ({"point": "budget", "budget": 5, "at": 3}, "primary_at.at"),
    ],
)
def test_a_bad_primary_at_is_one_line_naming_the_field(section, message):
    with pytest.raises(ConfigError, match=message) as err:
        parse_study(study(primary_at=section))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "section, message",
    [
        ({"fit": "maybe"}, "scaling.fit"),
        ({"efficiency_margin": 1.0}, "scaling.efficiency_margin"),
        ({"efficiency_margin": 0.8}, "scaling.efficiency_margin"),
        ({"margin": 2}, "scaling.margin"),
    ],
)
def test_a_bad_scaling_section_is_one_line_naming_the_field(section, message):
    with pytest.raises(ConfigError, match=message) as err:
        parse_study(study(scaling=section))
    assert "\n" not in str(err.value)


def test_the_results_meta_carries_both_sections_with_their_defaults(tmp_path):
    meta = load_results(parse_study(study(tmp_path))).meta
    assert meta.primary_at == {"point": "final", "axis": "compute/flops", "budget": None}
    assert meta.scaling == {"fit": "auto", "efficiency_margin": 1.25}
    chosen = parse_study(
        study(
            tmp_path,
            primary_at={"point": "auc", "axis": "compute/generated_tokens", "budget": 5e4},
            scaling={"fit": "off", "efficiency_margin": 1.5},
        )
    )
    meta = load_results(chosen).meta
    assert meta.primary_at == {"point": "auc", "axis": "compute/generated_tokens", "budget": 5e4}
    assert meta.scaling == {"fit": "off", "efficiency_margin": 1.5}
