"""The ``eval_subset:`` section: carried by every trial's spec (one subset for the study), its
errors one line each, and a study without it keeping its trial ids."""

import re

import pytest

from harness.errors import ConfigError
from harness.study.expand import expand
from harness.study.load import parse_study


def study(**extra):
    return {
        "name": "sub",
        "control": "grpo",
        "seeds": 2,
        "task": {"n_eval": 40},
        "arms": [{"name": "grpo", "algorithm": "grpo"}, {"name": "rloo", "algorithm": "rloo"}],
        **extra,
    }


def test_every_trial_carries_the_same_subset_settings_and_its_own_id():
    plain = expand(parse_study(study()))
    specs = expand(parse_study(study(eval_subset={"size": 0.25, "strata": 2, "seed": 7})))
    assert len(specs) == 4
    for spec in specs:
        assert spec.eval_subset.model_dump() == {"size": 0.25, "strata": 2, "by": "start_difficulty", "seed": 7}
    assert all(s.eval_subset.count(40) == 10 for s in specs)
    assert [s.trial_id for s in plain] != [s.trial_id for s in specs]  # the subset changes what a trial measures
    assert all("eval_subset" not in s.model_dump() for s in plain)


@pytest.mark.parametrize(
    "section, says",
    [
        ({"size": 50}, "a subset of 50 of the 40 held-out prompts"),
        ({"size": 0.1, "strata": 4}, "at least 2 per stratum (8)"),
        ({"size": 0.5, "by": "length"}, "eval_subset.by"),
        ({"strata": 2}, "eval_subset: required field missing: size"),
        ({"size": 1.5}, "eval_subset.size"),
    ],
)
def test_a_subset_that_cannot_be_read_is_one_line_naming_it(section, says):
    with pytest.raises(ConfigError, match=re.escape(says)) as err:
        expand(parse_study(study(eval_subset=section)))
    assert len(str(err.value).strip().splitlines()) == 1
