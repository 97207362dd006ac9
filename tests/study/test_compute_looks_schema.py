"""The ``compute_looks:`` section of a study: its checks, one clear line each, and the looks the
results meta resolves it to (where each look reads, and the catch-up allowance)."""

import pytest

from harness.errors import ConfigError
from harness.study.load import parse_study, study_warnings
from harness.study.sections import PrimaryAt
from harness.tracking.results import _compute_looks_meta, _section_fields


def study(**extra):
    return {
        "name": "cl",
        "control": "grpo",
        "min_effect": 0.05,
        "seeds": 4,
        "arms": [{"name": "grpo", "algorithm": "grpo"}, {"name": "dr", "algorithm": "dr_grpo"}],
        **extra,
    }


def test_a_valid_section_keeps_its_fields_and_defaults():
    looks = parse_study(study(compute_looks={"at": [0.25, 0.5, 1.0]})).compute_looks
    assert (looks.at, looks.spending, looks.against) == ([0.25, 0.5, 1.0], "obrien_fleming", "control")
    assert looks.catch_up is None  # the meta reads the study's min_effect


@pytest.mark.parametrize(
    "section, message",
    [
        ({"at": [1.0]}, "needs a look before the budget"),
        ({"at": [0.5, 0.25, 1.0]}, "rise strictly"),
        ({"at": [0.0, 1.0]}, "in \\(0, 1\\]"),
        ({"at": [0.5, 1.5]}, "in \\(0, 1\\]"),
        ({"at": [0.25, 0.5]}, "the last look is the budget"),
        ({"at": [0.5, 1.0], "catch_up": -0.1}, "catch_up"),
        ({"at": [0.5, 1.0], "spending": "haybittle"}, "compute_looks.spending"),
        ({"at": [0.5, 1.0], "against": "worst"}, "compute_looks.against"),
        ({"at": [0.5, 1.0], "every": 2}, "compute_looks.every"),
    ],
)
def test_a_bad_section_is_one_clear_error(section, message):
    with pytest.raises(ConfigError, match=message) as err:
        parse_study(study(compute_looks=section))
    assert "compute_looks" in str(err.value) and "\n" not in str(err.value)


def test_not_with_seed_looks_yet():
    with pytest.raises(ConfigError, match="not both yet"):
        parse_study(study(seeds=8, compute_looks={"at": [0.5, 1.0]}, sequential={"looks": [4, 8]}))


def test_catch_up_is_required_without_a_min_effect():
    with pytest.raises(ConfigError, match="catch_up: required when the study has no min_effect"):
        parse_study(study(min_effect=None, compute_looks={"at": [0.5, 1.0]}))
    assert parse_study(study(min_effect=None, compute_looks={"at": [0.5, 1.0], "catch_up": 0})).compute_looks


def test_a_forecast_predicts_a_value_at_the_budget_not_an_area():
    auc = {"point": "auc", "axis": "compute/flops", "budget": 2e9}
    with pytest.raises(ConfigError, match="compute_looks.forecast: a forecast predicts the value at the budget"):
        parse_study(study(primary_at=auc, compute_looks={"at": [0.5, 1.0], "forecast": True}))
    at_budget = {**auc, "point": "budget"}
    s = parse_study(study(primary_at=at_budget, compute_looks={"at": [0.5, 1.0], "forecast": True}))
    meta = _compute_looks_meta(s.compute_looks, _section_fields(s.primary_at, PrimaryAt), s.train, s.min_effect)
    assert s.compute_looks.forecast and meta.forecast
    assert not parse_study(study(compute_looks={"at": [0.5, 1.0]})).compute_looks.forecast  # off by default


def test_validate_warns_of_looks_too_early_to_forecast_on_the_step_axis():
    looks = {"at": [0.25, 0.5, 1.0], "forecast": True}
    sparse = study_warnings(parse_study(study(train={"steps": 40, "eval_every": 10}, compute_looks=looks)))
    assert sparse == [
        "compute_looks.forecast: grpo, dr forecast nothing at look 1 (step 10): 0 evaluation(s) past the start up "
        "to the out-of-sample check's split (5, 0.5 of the look at 10); a forecast needs 3; evaluate more often "
        "(train.eval_every)"
    ]
    # every 4 steps: the look at step 10 (split 5) has 1; the one at step 20 (split 10) has 4, 8 and 10
    assert (
        "look 1 (step 10): 1 evaluation(s)"
        in study_warnings(parse_study(study(train={"steps": 40, "eval_every": 4}, compute_looks=looks)))[0]
    )
    assert not study_warnings(parse_study(study(train={"steps": 40, "eval_every": 1}, compute_looks=looks)))
    assert not study_warnings(parse_study(study(train={"steps": 40, "eval_every": 10}, compute_looks={"at": [0.5, 1]})))


def test_looks_on_steps_need_one_step_budget():
    arms = [{"name": "grpo", "algorithm": "grpo"}, {"name": "dr", "algorithm": "dr_grpo", "train": {"steps": 30}}]
    with pytest.raises(ConfigError, match="fractions of train.steps, which dr changes"):
        parse_study(study(arms=arms, compute_looks={"at": [0.5, 1.0]}))
    budget = {"point": "budget", "axis": "compute/flops", "budget": 1e9}
    assert parse_study(study(arms=arms, primary_at=budget, compute_looks={"at": [0.5, 1.0]})).compute_looks


def test_the_meta_resolves_where_each_look_reads():
    s = parse_study(study(train={"steps": 40}, compute_looks={"at": [0.25, 0.5, 1.0]}))
    final = _compute_looks_meta(s.compute_looks, _section_fields(s.primary_at, PrimaryAt), s.train, s.min_effect)
    assert (final.axis, final.budget, final.point, final.catch_up) == ("step", 40.0, "budget", 0.05)
    assert final.points == [10.0, 20.0, 40.0]
    auc = {"point": "auc", "axis": "compute/flops", "budget": 2e9}
    s = parse_study(study(primary_at=auc, compute_looks={"at": [0.5, 1.0], "catch_up": 0.02, "against": "best"}))
    meta = _compute_looks_meta(s.compute_looks, _section_fields(s.primary_at, PrimaryAt), s.train, s.min_effect)
    assert (meta.axis, meta.point, meta.points, meta.catch_up, meta.against) == (
        "compute/flops",
        "auc",
        [1e9, 2e9],
        0.02,
        "best",
    )
    raw = {"at": [0.5, 1.0]}  # the raw YAML of a study file that no longer loads reads the same
    assert _compute_looks_meta(raw, {"point": "final"}, {"steps": 10}, 0.05).points == [5.0, 10.0]
