"""The ``benchmarks:`` key: strict, one line naming the field; trials carry it; the study's metas list it."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.study.expand import expand
from harness.study.load import check_task, parse_study
from harness.study.plan import trial_tokens

BASE = {
    "name": "b",
    "seeds": 2,
    "control": "grpo",
    "task": {"name": "addition", "max_digits": 2, "n_train": 300, "n_eval": 24},
    "arms": [{"name": "grpo", "algorithm": "grpo"}, {"name": "rloo", "algorithm": "rloo"}],
}
ADD3 = {"name": "add_3digit", "task": {"name": "addition", "min_digits": 3, "max_digits": 3, "n_eval": 16}}


def study(*benchmarks, **extra):
    return parse_study({**BASE, **extra, "benchmarks": list(benchmarks)})


@pytest.mark.parametrize(
    "benchmarks, says",
    [
        (
            [ADD3, {**ADD3, "task": {"name": "sorting"}}],
            r"^benchmarks\[1\]\.name: duplicate benchmark name 'add_3digit' \(also benchmarks\[0\]\)$",
        ),
        ([{**ADD3, "name": "Add3"}], r"^benchmarks\[0\]\.name: benchmark name .Add3. must match \[a-z\]\[a-z0-9_\]\*"),
        ([{**ADD3, "name": "add/3"}], r"must match"),
        ([{**ADD3, "name": "overall"}], r"^benchmarks\[0\]\.name: benchmark name 'overall' is reserved"),
        ([{**ADD3, "task": {"name": "algebra"}}], r"^benchmarks\[0\]\.task\.name: unknown task 'algebra'; valid: "),
        ([{**ADD3, "metric": "pass_at_1"}], r"^benchmarks\[0\]\.metric: Input should be .accuracy. or .mean_reward."),
        ([{**ADD3, "min_effect": 0}], r"^benchmarks\[0\]\.min_effect: Input should be greater than 0"),
        (
            [{**ADD3, "task": {"name": "addition", "tools": ["calculator"]}}],
            r"^benchmarks\[0\]\.task\.tools: unknown key; valid: name, reasoning_gym, n_train",
        ),
        ([{"name": "x"}], r"^benchmarks\[0\]: required field missing: task$"),
        ([{**ADD3, "size": 3}], r"^benchmarks\[0\]\.size: unknown key; valid: name, task, metric, min_effect$"),
    ],
)
def test_bad_benchmarks_are_one_line_naming_the_field(benchmarks, says):
    with pytest.raises(ConfigError, match=says) as err:
        study(*benchmarks)
    assert "\n" not in str(err.value)


def test_validate_builds_each_benchmark_and_checks_the_testbed_can_read_it():
    assert check_task(study(ADD3)) == (300, 24)
    sorting = {"name": "sorted", "task": {"name": "sorting", "n_eval": 8}}
    with pytest.raises(ConfigError, match=r"^benchmarks: sorted: task sorted: the tokenizer of model 'tiny' cannot"):
        check_task(study(sorting))
    with pytest.raises(ConfigError, match=r"^benchmarks: big: .*only 100 distinct prompts exist"):
        check_task(study({"name": "big", "task": {"name": "addition", "max_digits": 1, "n_eval": 200}}))


def test_every_trial_carries_the_benchmarks_and_a_study_without_them_is_unchanged():
    specs = expand(study(ADD3))
    assert all([b.name for b in s.benchmarks] == ["add_3digit"] for s in specs)
    plain = expand(parse_study(BASE))
    assert all(not s.benchmarks for s in plain)
    assert {s.trial_id for s in plain}.isdisjoint({s.trial_id for s in specs})
    assert study(ADD3).benchmarks[0].primary_metric("eval/accuracy") == "eval/add_3digit/accuracy"
    assert study(ADD3).benchmarks[0].primary_metric("eval/mean_reward") == "eval/add_3digit/mean_reward"
    assert study({**ADD3, "metric": "accuracy"}).benchmarks[0].primary_metric("eval/mean_reward").endswith("/accuracy")


def test_the_plan_counts_each_benchmarks_evaluation_tokens():
    with_bench, plain = expand(study(ADD3))[0], expand(parse_study(BASE))[0]
    t = plain.train
    evals = t.steps // t.eval_every + 1
    assert trial_tokens(with_bench) - trial_tokens(plain) == evals * 16 * t.eval_samples * t.max_new_tokens
