"""One row per sample: per-prompt means, variances and counts, pass@k and pass^k, computed by the
harness from a table's sampled answers (hand-worked numbers; the estimators' own references are in
tests/stats/test_pass_at_k.py), and the one-line refusals."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from harness.errors import ConfigError
from harness.tracking.tidy_results import JudgeSettings, read_table, results_from_table

SETTINGS = JudgeSettings(control="base")


def answers(correct: dict[tuple[str, int, str], list[int]]) -> pd.DataFrame:
    """Per-sample rows from {(arm, seed, prompt): [0/1 per answer]}."""
    rows = [
        {"arm": arm, "seed": seed, "prompt_id": prompt, "sample": i, "value": float(v)}
        for (arm, seed, prompt), values in correct.items()
        for i, v in enumerate(values)
    ]
    return pd.DataFrame(rows)


TABLE = answers(
    {
        ("base", 0, "q0"): [1, 1, 0, 0],
        ("base", 0, "q1"): [0, 0, 0, 1],
        ("new", 0, "q0"): [1, 1, 1, 0],
        ("new", 0, "q1"): [0, 1, 0, 1],
    }
)


def prompt_rows(res, metric: str) -> pd.Series:
    p = res.prompts
    rows = p[p["metric"] == metric]
    return rows.set_index(["arm", "prompt_id"])["value"]


def test_each_prompt_s_answers_become_its_mean_variance_and_count():
    res = results_from_table(TABLE, SETTINGS)
    means = prompt_rows(res, "eval/accuracy")
    assert means[("base", "q0")] == pytest.approx(0.5) and means[("new", "q0")] == pytest.approx(0.75)
    var = prompt_rows(res, "eval/accuracy.sample_var")
    assert var[("base", "q0")] == pytest.approx(1 / 3)  # var([1, 1, 0, 0], ddof=1)
    assert var[("new", "q0")] == pytest.approx(0.25)  # var([1, 1, 1, 0], ddof=1)
    assert set(prompt_rows(res, "eval/accuracy.samples")) == {4.0}
    trials = res.trials.set_index("trial_id")
    assert trials.loc["base-s0", "eval/accuracy"] == pytest.approx((0.5 + 0.25) / 2)
    assert res.meta.input_notes[0] == "Read 4 samples per prompt (4 prompt rows, one per run and prompt)."


def test_pass_at_k_and_pass_hat_k_are_the_unbiased_estimators_per_prompt():
    # n = 4, c = 2: pass@2 = 1 - C(2,2)/C(4,2) = 5/6, pass^2 = C(2,2)/C(4,2) = 1/6;
    # c = 1: pass@2 = 1 - C(3,2)/C(4,2) = 1/2, pass^2 = 0; c = 3: pass@2 = 1, pass^2 = C(3,2)/C(4,2) = 1/2
    at = results_from_table(TABLE, SETTINGS.model_copy(update={"metric": "eval/pass@2"}))
    got = prompt_rows(at, "eval/pass@2")
    assert got[("base", "q0")] == pytest.approx(5 / 6) and got[("base", "q1")] == pytest.approx(0.5)
    assert got[("new", "q0")] == pytest.approx(1.0) and got[("new", "q1")] == pytest.approx(5 / 6)
    assert at.trials.set_index("trial_id").loc["base-s0", "eval/pass@2"] == pytest.approx((5 / 6 + 0.5) / 2)
    # pass@k's k rows go by the sampled mean's name, as a study's evaluation stores them
    assert set(prompt_rows(at, "eval/mean_reward.samples")) == {4.0}
    assert not len(prompt_rows(at, "eval/pass@2.sample_var"))
    hat = prompt_rows(results_from_table(TABLE, SETTINGS.model_copy(update={"metric": "eval/pass^2"})), "eval/pass^2")
    assert hat[("base", "q0")] == pytest.approx(1 / 6) and hat[("base", "q1")] == 0.0
    assert hat[("new", "q0")] == pytest.approx(0.5)
    one = prompt_rows(results_from_table(TABLE, SETTINGS.model_copy(update={"metric": "eval/pass@1"})), "eval/pass@1")
    assert one[("new", "q1")] == pytest.approx(0.5)  # pass@1 is c / n


def test_benchmark_pass_at_k_is_namespaced_with_its_counts():
    table = pd.concat([TABLE.assign(benchmark="gsm8k"), TABLE.assign(benchmark="aime")], ignore_index=True)
    res = results_from_table(table, SETTINGS.model_copy(update={"metric": "eval/pass@2"}))
    assert [b.metric for b in res.meta.benchmarks] == ["eval/gsm8k/pass@2", "eval/aime/pass@2"]
    assert prompt_rows(res, "eval/aime/pass@2")[("base", "q0")] == pytest.approx(5 / 6)
    assert set(prompt_rows(res, "eval/aime/pass@2.samples")) == {4.0}


def test_repeated_rows_are_samples_only_when_said(tmp_path):
    plain = TABLE.drop(columns="sample")
    with pytest.raises(ConfigError, match=r"duplicates .*or --repeats-are-samples\)"):
        results_from_table(plain, SETTINGS)
    res = results_from_table(plain, SETTINGS.model_copy(update={"repeats_are_samples": True}))
    assert prompt_rows(res, "eval/accuracy")[("base", "q0")] == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("table", "metric", "match"),
    [
        (TABLE.assign(value=TABLE["value"] * 0.5), "eval/pass@2", "eval/pass@2 needs 0/1 scores .* a value is 0.5"),
        (TABLE, "eval/pass@5", r"needs at least 5 samples of every prompt, but arm base, seed 0, prompt_id q0 has 4"),
        (TABLE[TABLE["sample"] == 0].drop(columns="sample"), "eval/pass@2", "give one row per sample"),
        (TABLE.assign(samples=4, sample_var=0.1), "eval/accuracy", "not both"),
        (TABLE.assign(sample=-1), "eval/accuracy", "line 2: sample must be >= 0"),
    ],
)
def test_per_sample_refusals_are_one_line(table, metric, match):
    with pytest.raises(ConfigError, match=match) as err:
        results_from_table(table, SETTINGS.model_copy(update={"metric": metric}), where="t.csv")
    assert "\n" not in str(err.value)


def test_a_jsonl_table_reads_as_the_csv_and_names_its_lines(tmp_path):
    path = tmp_path / "t.jsonl"
    lines = [json.dumps(row) for row in TABLE.to_dict(orient="records")]
    path.write_text("\n".join(lines[:3]) + "\n\n" + "\n".join(lines[3:]) + "\n")
    table, unit = read_table(path)
    res = results_from_table(table, SETTINGS, where=str(path), unit=unit)
    assert prompt_rows(res, "eval/accuracy")[("new", "q0")] == pytest.approx(0.75)
    broken = table.astype({"value": object})
    broken.loc[5, "value"] = "x"
    with pytest.raises(ConfigError, match=rf"{path} line 7: value 'x' is not a finite number"):
        results_from_table(broken, SETTINGS, where=str(path), unit=unit)  # line 4 is blank
    path.write_text(lines[0] + "\n{not json\n")
    with pytest.raises(ConfigError, match=rf"{path} line 2: not valid JSON"):
        read_table(path)
    path.write_text("[1, 2]\n")
    with pytest.raises(ConfigError, match=rf"{path} line 1: not a JSON object"):
        read_table(path)


def test_own_column_names_and_a_table_without_seeds():
    own = TABLE.drop(columns="seed").rename(columns={"arm": "model", "value": "correct"})
    res = results_from_table(own, SETTINGS.model_copy(update={"columns": {"arm": "model", "value": "correct"}}))
    assert list(res.trials["trial_id"]) == ["base-s0", "new-s0"]
    with pytest.raises(ConfigError, match=r"no column 'score' \(--column value=score\); columns there: model"):
        results_from_table(own, SETTINGS.model_copy(update={"columns": {"arm": "model", "value": "score"}}))
    with pytest.raises(ConfigError, match="'model' is not a tidy column"):
        results_from_table(own, SETTINGS.model_copy(update={"columns": {"model": "arm"}}))
    with pytest.raises(ConfigError, match="has a column 'value' already"):
        results_from_table(TABLE.assign(score=1.0), SETTINGS.model_copy(update={"columns": {"value": "score"}}))
    assert np.isfinite(res.trials["eval/accuracy"]).all()
