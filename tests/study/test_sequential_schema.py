"""The ``sequential:`` section of a study: its look schedule, its checks, and each look's trials."""

import pytest

from harness import stats
from harness.decide.sequential.pools import look_seeds, look_specs
from harness.errors import ConfigError
from harness.study.expand import expand
from harness.study.load import parse_study
from harness.study.sections import SPENDING_FUNCTIONS


def study(**extra):
    return {
        "name": "seq",
        "control": "grpo",
        "min_effect": 0.05,
        "seeds": 12,
        "arms": [{"name": "grpo", "algorithm": "grpo"}, {"name": "dr", "algorithm": "dr_grpo"}],
        **extra,
    }


def test_looks_and_batch_give_the_schedule():
    assert parse_study(study(sequential={"looks": [3, 5, 8, 12]})).sequential.schedule() == [3, 5, 8, 12]
    assert parse_study(study(sequential={"batch": 4, "max_seeds": 10})).sequential.schedule() == [4, 8, 10]
    assert parse_study(study(sequential={"batch": 4, "max_seeds": 12})).sequential.spending == "obrien_fleming"


@pytest.mark.parametrize(
    "section, message",
    [
        ({}, "give either looks"),
        ({"batch": 3}, "give either looks"),
        ({"looks": [3, 5], "batch": 2, "max_seeds": 6}, "not both"),
        ({"looks": [5, 3]}, "rise strictly"),
        ({"looks": [1, 3]}, "at least 2 seeds"),
        ({"looks": [3, 5], "spending": "haybittle"}, "sequential.spending"),
        ({"looks": [3, 5], "alpha": 0.1}, "sequential.alpha"),
    ],
)
def test_a_bad_schedule_is_one_clear_error(section, message):
    with pytest.raises(ConfigError, match=message) as err:
        parse_study(study(sequential=section))
    assert "sequential" in str(err.value)


def test_the_seed_pool_must_cover_the_last_look():
    with pytest.raises(ConfigError, match="lists 12 seeds but the last sequential look needs 20"):
        parse_study(study(sequential={"looks": [3, 20]}))


def test_tuning_and_sequential_are_refused_together():
    tuning = {"n_trials": 2, "seeds": [100], "search_space": {"lr": {"low": 1e-4, "high": 1e-3}}}
    with pytest.raises(ConfigError, match="cannot be combined with tuning"):
        parse_study(study(sequential={"looks": [3, 5]}, tuning=tuning))


def test_the_schema_names_the_spending_functions_stats_computes():
    assert set(SPENDING_FUNCTIONS) == set(stats.SPENDING)


def test_each_look_takes_the_pools_next_seeds_in_order():
    s = parse_study(study(seeds=[7, 3, 9, 1, 4, 8], sequential={"looks": [2, 4, 6]}))
    assert [look_seeds(s, k) for k in range(3)] == [[7, 3], [9, 1], [4, 8]]
    specs = look_specs(s, 1, ["dr"])
    assert [(t.arm, t.seed) for t in specs] == [("dr", 9), ("dr", 1)]
    full = {t.trial_id for t in expand(s)}
    assert {t.trial_id for k in range(3) for t in look_specs(s, k, ["grpo", "dr"])} == full
    with pytest.raises(ConfigError, match="looks 0..2; got look 3"):
        look_seeds(s, 3)
