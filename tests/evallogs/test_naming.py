"""Run names to arms and seeds: the --runs pattern, its default, and the refusals."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.errors import ConfigError
from harness.evallogs.naming import RunNames, tidy_rows
from harness.evallogs.rows import LogRows, benchmark_name


def rows(runs: list[str]) -> LogRows:
    frame = pd.DataFrame(
        [
            {"run": run, "benchmark": "add", "prompt_id": "q0", "sample": 0, "value": 1.0, "where": f"f:{i + 1}"}
            for i, run in enumerate(runs)
        ]
    )
    return LogRows(frame=frame, tool="tool 1.0", score="acc")


def test_the_default_arm_is_the_name_s_last_part_and_one_seed():
    out = tidy_rows(rows(["/ckpt/grpo/", "org/ppo"]), RunNames.parse(None))
    assert list(zip(out["arm"], out["seed"])) == [("grpo", 0), ("ppo", 0)]
    assert list(out.columns) == ["arm", "seed", "benchmark", "prompt_id", "sample", "value", "where"]


def test_a_pattern_names_arm_and_seed():
    names = RunNames.parse(r"/(?P<arm>[a-z_]+)-s(?P<seed>\d+)/")
    out = tidy_rows(rows(["/ckpt/grpo-s1/step_9", "/ckpt/grpo-s2/step_9", "/ckpt/dr_grpo-s1/x"]), names)
    assert list(zip(out["arm"], out["seed"])) == [("grpo", 1), ("grpo", 2), ("dr_grpo", 1)]


@pytest.mark.parametrize(
    ("pattern", "runs", "match"),
    [
        ("(", ["a"], r"--runs '\(': not a valid regular expression"),
        ("(?P<model>.*)", ["a"], r"name the arm with a group \(\?P<arm>"),
        ("(?P<arm>x+)", ["a"], "run 'a' does not match --runs"),
        (r"(?P<arm>[a-z]+)(?P<seed>.)", ["ab"], "the seed group of --runs matched 'b', not a whole number"),
        (r"(?P<arm>[a-z]+)", ["base-1", "base-2"], "runs 'base-1' and 'base-2' both name arm base, seed 0"),
    ],
)
def test_bad_patterns_and_mixed_runs_are_one_line(pattern, runs, match):
    with pytest.raises(ConfigError, match=match) as err:
        tidy_rows(rows(runs), RunNames.parse(pattern))
    assert "\n" not in str(err.value)


def test_two_models_with_one_last_part_are_refused_without_a_pattern():
    with pytest.raises(ConfigError, match="both name arm final"):
        tidy_rows(rows(["/a/final", "/b/final"]), RunNames.parse(None))


@pytest.mark.parametrize(
    ("task", "name"),
    [("gsm8k", "gsm8k"), ("leaderboard|arc:challenge|25", "leaderboard_arc_challenge_25"), ("2wiki", "t_2wiki")],
)
def test_task_names_become_benchmark_names(task, name):
    assert benchmark_name(task) == name
