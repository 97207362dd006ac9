"""Tidy tables (CSV, Parquet) as Results: the frames a study has, and one
line naming the row for every kind of bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.decide.analysis import analyze
from harness.decide.rules import ReadOptions
from harness.errors import ConfigError
from harness.tracking.tidy_results import (
    TASK_SET,
    JudgeSettings,
    load_tidy,
    read_table,
    results_from_table,
    settings_from,
    tidy_frame,
)

SETTINGS = JudgeSettings(control="base", min_effect=0.05)


def per_prompt(arms=("base", "new"), seeds=(0, 1, 2), prompts=6, benchmarks=(None,), lift=0.2) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for bench in benchmarks:
        for arm in arms:
            for seed in seeds:
                for p in range(prompts):
                    value = float(rng.random() < 0.4 + (lift if arm != "base" else 0.0))
                    rows.append({"benchmark": bench, "arm": arm, "seed": seed, "prompt_id": f"q{p}", "value": value})
    frame = pd.DataFrame(rows)
    return frame.drop(columns="benchmark") if benchmarks == (None,) else frame


def write(frame: pd.DataFrame, path) -> str:
    frame.to_csv(path, index=False)
    return str(path)


# ----------------------------------------------------------------------------- the frames


def test_per_prompt_rows_become_a_study_s_frames():
    table = per_prompt()
    res = results_from_table(table, SETTINGS)
    t = res.trials.set_index("trial_id")
    assert list(res.trials["trial_id"]) == [f"{a}-s{s}" for a in ("base", "new") for s in (0, 1, 2)]
    assert set(res.trials["status"]) == {"completed"} and res.trials["seed"].dtype == "int64"
    # each run's final value is the mean of its prompts, as an evaluation reports it
    want = table[(table.arm == "new") & (table.seed == 1)]["value"].mean()
    assert t.loc["new-s1", "eval/accuracy"] == pytest.approx(want)
    p = res.prompts
    assert list(p.columns) == ["trial_id", "arm", "seed", "step", "prompt_id", "metric", "value"]
    assert len(p) == len(table) and set(p["metric"]) == {"eval/accuracy"} and set(p["step"]) == {0}
    m = res.meta
    assert m.control == "base" and m.conditions == ["base", "new"] and m.comparisons == [("new", "base")]
    assert m.primary_metric == "eval/accuracy" and m.min_effect == 0.05 and m.seed_matched
    assert m.benchmarks == [] and m.seeds == [0, 1, 2]
    assert res.curves.empty


def test_per_run_rows_and_the_control_first():
    table = pd.DataFrame({"arm": ["new", "new", "base", "base"], "seed": [0, 1, 0, 1], "value": [0.5, 0.6, 0.4, 0.45]})
    res = results_from_table(table, SETTINGS)
    assert res.meta.conditions == ["base", "new"] and res.prompts.empty
    assert res.trials.set_index("trial_id").loc["new-s1", "eval/accuracy"] == 0.6
    verdicts = analyze(res, ReadOptions(n_permutations=100)).verdicts
    assert verdicts.loc[0, "test"] == "paired_t"


def test_several_benchmarks_are_namespaced_and_listed_in_meta():
    table = per_prompt(benchmarks=("gsm8k", "math500"))
    settings = JudgeSettings(control="base", min_effect=0.05, benchmark_min_effect={"math500": 0.1})
    res = results_from_table(table, settings)
    assert {"eval/gsm8k/accuracy", "eval/math500/accuracy"} <= set(res.trials.columns)
    assert res.meta.to_dict()["benchmarks"] == [
        {"name": "gsm8k", "metric": "eval/gsm8k/accuracy", "min_effect": 0.05},
        {"name": "math500", "metric": "eval/math500/accuracy", "min_effect": 0.1},
    ]
    assert res.meta.primary_metric == "eval/gsm8k/accuracy"
    assert set(res.prompts["metric"]) == {"eval/gsm8k/accuracy", "eval/math500/accuracy"}
    one = results_from_table(per_prompt(benchmarks=("gsm8k",)), SETTINGS)
    assert one.meta.primary_metric == "eval/accuracy" and one.meta.benchmarks == []


def test_a_study_task_set_beside_benchmarks_is_the_primary_and_no_benchmark():
    task = per_prompt().assign(benchmark=TASK_SET)
    table = pd.concat([task, per_prompt(benchmarks=("gsm8k",))], ignore_index=True)
    res = results_from_table(table, SETTINGS)
    assert res.meta.primary_metric == "eval/accuracy" and res.meta.min_effect == 0.05
    assert res.meta.to_dict()["benchmarks"] == [{"name": "gsm8k", "metric": "eval/gsm8k/accuracy", "min_effect": 0.05}]
    assert {"eval/accuracy", "eval/gsm8k/accuracy"} <= set(res.trials.columns)
    named = results_from_table(table, JudgeSettings(control="base", metric="eval/gsm8k/accuracy"))
    assert named.meta.primary_metric == "eval/gsm8k/accuracy" and len(named.meta.benchmarks) == 1
    assert "eval/accuracy" in named.trials.columns  # the (task) rows keep the plain name
    back = tidy_frame(res)
    pd.testing.assert_frame_equal(back[table.columns.tolist()], table)
    only = results_from_table(task, SETTINGS)  # (task) alone: a plain single-metric table
    assert only.meta.benchmarks == [] and only.meta.primary_metric == "eval/accuracy"


def test_sampled_scores_carry_their_sample_variance():
    table = per_prompt(seeds=(0,)).assign(samples=4, sample_var=0.25)
    res = results_from_table(table, SETTINGS)
    metrics = set(res.prompts["metric"])
    assert metrics == {"eval/accuracy", "eval/accuracy.sample_var", "eval/accuracy.samples"}
    back = tidy_frame(res)
    assert list(back.columns) == ["arm", "seed", "prompt_id", "value", "samples", "sample_var"]
    assert (back["samples"] == 4).all() and (back["sample_var"] == 0.25).all()
    pd.testing.assert_frame_equal(
        back[["arm", "seed", "prompt_id", "value"]], table[["arm", "seed", "prompt_id", "value"]]
    )


def test_tidy_frame_round_trips_benchmarks_and_parquet(tmp_path):
    table = per_prompt(benchmarks=("gsm8k", "math500"))
    res = results_from_table(table, SETTINGS)
    back = tidy_frame(res)
    pd.testing.assert_frame_equal(back[table.columns.tolist()], table)
    table.to_parquet(tmp_path / "t.parquet", index=False)
    again = load_tidy(tmp_path / "t.parquet", SETTINGS)
    pd.testing.assert_frame_equal(again.trials, res.trials.assign())


def test_an_arm_named_like_a_missing_value_is_read_as_its_name(tmp_path):
    table = per_prompt(arms=("base", "null", "NA"))
    res = load_tidy(write(table, tmp_path / "t.csv"), SETTINGS)
    assert res.meta.conditions == ["base", "null", "NA"]


# ----------------------------------------------------------------------------- bad input, one line each


def _fails(tmp_path, frame: pd.DataFrame, match: str, settings: JudgeSettings = SETTINGS):
    path = write(frame, tmp_path / "t.csv")
    with pytest.raises(ConfigError, match=match) as err:
        load_tidy(path, settings)
    assert "\n" not in str(err.value) and str(err.value).startswith(path)
    return str(err.value)


def test_missing_columns(tmp_path):
    _fails(tmp_path, per_prompt().drop(columns=["arm", "value"]), "missing columns arm, value; a tidy table has arm")


@pytest.mark.parametrize(
    ("column", "value", "match"),
    [
        ("arm", "", "line 5: empty arm"),
        ("seed", "1.5", "line 5: seed '?1.5'? is not an integer"),
        ("seed", "x", "line 5: seed 'x' is not a finite number"),
        ("value", "nan", "line 5: value '?nan'? is not a finite number"),
        ("value", "inf", "line 5: value '?inf'? is not a finite number"),
        ("value", "", "line 5: value '' is not a finite number"),
        ("prompt_id", "", "line 5: empty prompt_id"),
    ],
)
def test_a_bad_cell_names_its_line(tmp_path, column, value, match):
    table = per_prompt().astype({column: object})
    table.loc[3, column] = value
    _fails(tmp_path, table, match)


def test_duplicated_rows_name_both_lines(tmp_path):
    table = per_prompt()
    table = pd.concat([table, table.iloc[[7]]], ignore_index=True)
    line = _fails(tmp_path, table, "duplicates line 9")
    assert f"line {len(table) + 1}:" in line and "one row per arm, seed, prompt_id" in line
    runs = pd.DataFrame({"arm": ["base", "base", "new"], "seed": [0, 0, 0], "value": [0.1, 0.2, 0.3]})
    _fails(tmp_path, runs, r"line 3: duplicates line 2 \(arm base, seed 0\); one row per arm, seed$")


def test_the_control_absent_and_an_arm_with_no_rows(tmp_path):
    _fails(
        tmp_path, per_prompt(), "the control 'grpo' has no rows; arms there: base, new", JudgeSettings(control="grpo")
    )
    listed = JudgeSettings(control="base", arms=["base", "new", "extra"])
    _fails(tmp_path, per_prompt(), "arm 'extra' has no rows; arms there: base, new", listed)
    _fails(
        tmp_path,
        per_prompt(),
        "arm 'new' has rows but is not one of the arms given",
        JudgeSettings(control="base", arms=["base"]),
    )


def test_prompts_some_run_lacks_are_left_out_of_every_run_and_said(tmp_path):
    table = per_prompt()
    table = table.drop(index=table[(table.arm == "new") & (table.seed == 2) & (table.prompt_id == "q4")].index)
    res = results_from_table(table, SETTINGS)
    assert set(res.prompts["prompt_id"]) == {"q0", "q1", "q2", "q3", "q5"}
    common = table[(table.arm == "base") & (table.seed == 0) & (table.prompt_id != "q4")]["value"].mean()
    assert res.trials.set_index("trial_id").loc["base-s0", "eval/accuracy"] == pytest.approx(common)
    (note,) = res.meta.input_notes
    assert note.startswith("1 of 6 prompts are not scored in every run (arm new, seed 2 lacks 'q4')")
    assert "compared on the 5 prompts all runs have" in note
    bench = per_prompt(benchmarks=("gsm8k", "aime"))
    bench = bench.drop(
        index=bench[(bench.arm == "base") & (bench.benchmark == "aime") & (bench.prompt_id == "q0")].index
    )
    (note,) = results_from_table(bench, SETTINGS).meta.input_notes
    assert note.startswith("1 of 6 prompts of benchmark aime are not scored in every run")
    alone = per_prompt(prompts=2)
    alone = alone[
        ~((alone.arm == "new") & (alone.prompt_id == "q0")) & ~((alone.arm == "base") & (alone.prompt_id == "q1"))
    ]
    _fails(tmp_path, alone, "no prompt is scored in every run; nothing to compare")
    runs = per_prompt(benchmarks=("gsm8k", "aime"))
    runs = runs.drop(index=runs[(runs.arm == "new") & (runs.seed == 0) & (runs.benchmark == "aime")].index)
    _fails(tmp_path, runs, "arm new, seed 0 has no rows for benchmark aime; every run needs every benchmark")


def test_bad_benchmark_names_and_lonely_sample_columns(tmp_path):
    table = per_prompt(benchmarks=("gsm8k", "aime"))
    table.loc[2, "benchmark"] = "MATH-500"
    _fails(tmp_path, table, "line 4: benchmark 'MATH-500' is not a valid name")
    table.loc[2, "benchmark"] = "overall"
    _fails(tmp_path, table, "line 4: benchmark 'overall' is reserved for the overall verdict")
    _fails(tmp_path, per_prompt().assign(samples=4), "samples and sample_var come together")
    _fails(tmp_path, per_prompt().assign(samples=0, sample_var=0.1), "line 2: samples must be >= 1")


def test_unreadable_files(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        read_table(tmp_path / "absent.csv")
    with pytest.raises(ConfigError, match=r"not a \.csv, \.parquet, \.jsonl file"):
        read_table(tmp_path / "t.json")
    (tmp_path / "t.parquet").write_text("not parquet")
    with pytest.raises(ConfigError, match=r"t.parquet: cannot read it as parquet \(") as err:
        read_table(tmp_path / "t.parquet")
    assert "\n" not in str(err.value)
    (tmp_path / "e.csv").write_text("")
    with pytest.raises(ConfigError, match="e.csv: cannot read it as csv"):
        read_table(tmp_path / "e.csv")
    (tmp_path / "h.csv").write_text("arm,seed,value\n")
    with pytest.raises(ConfigError, match="h.csv: no rows"):
        load_tidy(tmp_path / "h.csv", SETTINGS)


def test_settings_are_strict_and_one_line():
    with pytest.raises(ConfigError, match="judge.yaml: .*contorl") as err:
        settings_from({"control": "a", "contorl": "b"}, "judge.yaml")
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="min_effect"):
        settings_from({"control": "a", "min_effect": -1}, "judge.yaml")
    with pytest.raises(ConfigError, match="direction"):
        settings_from({"control": "a", "direction": "up"}, "judge.yaml")
