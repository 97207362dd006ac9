"""Every CSV the harness writes from outside text (`harness decide`'s and `harness report`'s
results.csv, `harness results --csv`, `harness tidy`) writes a text cell a spreadsheet would run as
a formula with a leading single quote (OWASP), and its numbers as numbers: -0.05 stays -0.05
(issue 37, item 8). `harness decide` reads a quoted cell of `harness tidy` back as it was."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pandas as pd
from cli_main import run_main
from stored_study import write_study

from harness.engine.spec import PromptScores, TrialResult
from harness.study.expand import expand
from harness.study.load import load_study
from harness.tracking import records
from harness.tracking.mlflow_layout import history_csv, prompt_scores_csv_gz
from harness.tracking.tidy_results import read_table

FORMULA_ARMS = ['=HYPERLINK("http://x","y")', "@SUM(1)", "-2+3"]


def cells(path: Path) -> list[dict[str, str]]:
    """The CSV's rows as the raw text of each cell."""
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_decide_quotes_formula_arm_names_and_keeps_negative_values_numbers(monkeypatch, capsys):
    values = ["-0.05", "-0.04", "-0.03", "-0.021", "-0.032", "-0.043"]
    arms = ["grpo", *FORMULA_ARMS]
    rows = [{"arm": arm, "seed": seed, "value": values[i + seed]} for i, arm in enumerate(arms) for seed in range(3)]
    pd.DataFrame(rows).to_csv("t.csv", index=False)
    code, out, err = run_main(monkeypatch, capsys, "decide", "t.csv", "--control", "grpo", "--out", "judged")
    assert code == 0, err
    written = cells(Path("judged/results.csv"))
    assert {row["arm"] for row in written} == {"grpo", *("'" + arm for arm in FORMULA_ARMS)}
    assert {row["eval/accuracy"] for row in written if row["arm"] == "grpo"} == {"-0.05", "-0.04", "-0.03"}
    assert all(float(row["eval/accuracy"]) < 0 for row in written)
    assert f"{FORMULA_ARMS[0]} vs grpo:" in out  # the verdicts name the arm as given


def test_tidy_quotes_a_dataset_s_prompt_ids_and_decide_reads_them_back_as_given(monkeypatch, capsys):
    study = load_study(write_study())
    ids = ["=p0", "-p1", "@p2", "p3"]
    for i, spec in enumerate(expand(study)):
        greedy = [float((i + j) % 2) for j in range(len(ids))]
        zeros = [0.0] * len(ids)
        scores = PromptScores(step=2, prompt_ids=ids, greedy=greedy, sampled_mean=greedy, sampled_var=zeros, samples=1)
        final = {"eval/accuracy": sum(greedy) / 4, "eval/mean_reward": -0.05, "tokens/total": 100.0}
        result = TrialResult(trial_id=spec.trial_id, final=final, wall_time_s=2.0, prompts=[scores])
        records.write_record(Path("runs") / study.name, records.make_record(spec, result, finished_at=1.8e9 + i))
    code, _, err = run_main(monkeypatch, capsys, "tidy", "small", "--out", "t.csv")
    assert code == 0, err
    assert {row["prompt_id"] for row in cells(Path("t.csv"))} == {"'=p0", "'-p1", "'@p2", "p3"}
    table, _ = read_table("t.csv")
    assert set(table["prompt_id"]) == set(ids)


def failing_study() -> None:
    """``small``: a completed record of every trial with a negative reward, and one failed trial
    whose error and warning (a program's text) look like formulas."""
    study = load_study(write_study())
    for i, spec in enumerate(expand(study)):
        final = {"eval/accuracy": 0.4, "eval/mean_reward": -0.05, "tokens/total": 100.0, "time/total_s": 2.0}
        failed = i == 0
        result = TrialResult(
            trial_id=spec.trial_id,
            status="failed" if failed else "completed",
            error="=cmd|' /C calc'!A0" if failed else None,
            final={} if failed else final,
            wall_time_s=2.0,
            warnings=["@SUM(1)"] if failed else [],
        )
        records.write_record(Path("runs") / study.name, records.make_record(spec, result, finished_at=1.8e9 + i))


def check_quoted(path: Path) -> None:
    written = cells(path)
    failed = [row for row in written if row["status"] == "failed"]
    assert [(row["error"], row["warnings"]) for row in failed] == [("'=cmd|' /C calc'!A0", "'@SUM(1)")]
    assert {row["eval/mean_reward"] for row in written if row["status"] == "completed"} == {"-0.05"}


def test_results_csv_quotes_a_program_s_text_and_keeps_numbers(monkeypatch, capsys):
    failing_study()
    code, _, err = run_main(monkeypatch, capsys, "results", "small", "--csv", "trials.csv")
    assert code in (0, 1), err
    check_quoted(Path("trials.csv"))


def test_report_results_csv_quotes_a_program_s_text_and_keeps_numbers(monkeypatch, capsys):
    failing_study()
    code, _, err = run_main(monkeypatch, capsys, "report", "small", "--out", "rep")
    assert code in (0, 1), err
    check_quoted(Path("rep/results.csv"))


def test_the_mlflow_artifacts_quote_a_program_s_metric_names_and_a_dataset_s_prompt_ids():
    study = load_study(write_study())
    spec = expand(study)[0]
    scores = PromptScores(step=2, prompt_ids=["=p0", "p1"], greedy=[1.0, 0.0], sampled_mean=[1.0, 0.0],
                          sampled_var=[0.0, 0.0], samples=1)  # fmt: skip
    history = [{"step": 0, "=cmd": -0.05}, {"step": 1, "=cmd": 0.5}]
    result = TrialResult(trial_id=spec.trial_id, final={"eval/accuracy": 0.5}, history=history, prompts=[scores])
    record = records.make_record(spec, result, finished_at=1.8e9)
    assert history_csv(record).splitlines() == ["step,'=cmd", "0,-0.05", "1,0.5"]
    rows = gzip.decompress(prompt_scores_csv_gz(record, "test")).decode().splitlines()
    assert "2,'=p0,eval/accuracy,1.0" in rows and "2,p1,eval/accuracy,0.0" in rows
