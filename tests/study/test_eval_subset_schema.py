"""The ``eval_subset:`` section: carried by every trial's spec (one subset for the study), its
errors one line each, and a study without it keeping its trial ids."""

import re

import pytest

from harness.errors import ConfigError
from harness.study.expand import expand
from harness.study.load import parse_study
from harness.study.plan import evaluated_prompts, evaluations, trial_tokens


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


def test_the_plan_prices_the_subsets_evaluations():
    data = study(train={"steps": 60, "eval_every": 10, "eval_samples": 2, "max_new_tokens": 4})
    [plain, *_] = expand(parse_study(data))
    [subset, *_] = expand(parse_study({**data, "eval_subset": {"size": 10}}))
    assert evaluations(plain) == 7 and evaluated_prompts(plain) == 7 * 40
    # the start and the last score all 40, the 5 evaluations between them the subset's 10
    assert evaluated_prompts(subset) == 2 * 40 + 5 * 10
    assert trial_tokens(plain) - trial_tokens(subset) == 5 * 30 * 2 * 4
