"""One run per arm on 0/1 per-prompt scores: the eval-only verdict reads McNemar's exact test and
Newcombe's interval of the prompts' 2 x 2 table, not the t over prompts, which is too narrow when
few prompts change (the AIME case: 30 questions, 4 or 5 flipping one way)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from statsmodels.stats.contingency_tables import mcnemar

from harness.decide.analysis import analyze
from harness.decide.comparisons import ArmScores, compare_scores, verdict_rows
from harness.decide.rules import DecisionRules, ReadOptions
from harness.stats import PairedCounts
from harness.tracking.tidy_results import JudgeSettings, load_tidy


def scores(both: int, arm_only: int, control_only: int, neither: int) -> tuple[np.ndarray, np.ndarray]:
    """The arm's and the control's 0/1 scores on the prompts of a paired 2 x 2 table."""
    arm = np.repeat([1.0, 1.0, 0.0, 0.0], [both, arm_only, control_only, neither])
    control = np.repeat([1.0, 0.0, 1.0, 0.0], [both, arm_only, control_only, neither])
    return arm, control


def one_run(values: np.ndarray) -> ArmScores:
    table = pd.DataFrame([values], index=[0], columns=[f"q{i}" for i in range(len(values))])
    return ArmScores(values=pd.Series([values.mean()], index=[0]), failed=0, table=table)


def judged(arm: np.ndarray, control: np.ndarray, min_effect: float = 0.1):
    pair = compare_scores(one_run(arm), one_run(control), "rl", "base", "eval/accuracy", seed_matched=True)
    rules = DecisionRules(
        metric="eval/accuracy",
        direction="maximize",
        control="base",
        alpha=0.05,
        correction="bonferroni",
        power=0.8,
        min_effect=min_effect,
        failures="drop",
        test="auto",
    )
    rows, _ = verdict_rows([pair], rules, planning_effect=min_effect)
    return pair, rows.iloc[0]


@pytest.mark.parametrize(("flips", "t_p", "exact_p"), [(4, 0.043, 0.125), (5, 0.023, 0.0625)])
def test_aime_few_flips_one_way_are_not_better(flips, t_p, exact_p):
    arm, control = scores(8, flips, 0, 22 - flips)  # AIME: 30 questions
    assert sps.ttest_rel(arm, control).pvalue == pytest.approx(t_p, abs=0.001)  # what the t would say
    pair, row = judged(arm, control)
    assert row["test"] == "eval_only_binary" and pair.difference.n_prompts == 30
    assert row["p_value"] == pytest.approx(exact_p) == pytest.approx(mcnemar([[8, flips], [0, 22 - flips]]).pvalue)
    assert row["verdict"] == "inconclusive (eval-only)" and row["ci_low"] <= 0 < row["ci_high"]
    assert row["diff"] == pytest.approx(flips / 30)
    assert "McNemar's exact test and Newcombe's interval" in row["reason"]
    assert "conditional on these checkpoints" in row["reason"]


@pytest.mark.parametrize(
    "table",
    [(8, 2, 0, 20), (8, 6, 1, 15), (3, 1, 4, 22), (10, 7, 0, 23), (150, 60, 28, 437), (0, 0, 0, 40), (20, 3, 3, 14)],
)
def test_the_p_value_agrees_with_statsmodels_mcnemar_and_the_interval_is_newcombe_s(table):
    """The p-value is McNemar's exact one (statsmodels) wherever the exact test is the stricter,
    never below it, and the interval is ``PairedCounts``' at the verdict's level."""
    pair, row = judged(*scores(*table))
    exact = mcnemar([[table[0], table[1]], [table[2], table[3]]], exact=True).pvalue
    counts = PairedCounts(*map(float, table))
    assert pair.difference.binary == counts
    assert row["p_value"] == pytest.approx(counts.p_value()) and row["p_value"] >= exact - 1e-12
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(counts.interval(0.95))
    if table[1] + table[2] <= 10:  # few discordant prompts: the exact test is the binding one
        assert row["p_value"] == pytest.approx(exact)


def test_many_flips_still_decide():
    """OlympiadBench-like: 675 questions, 88 changed, 60 of them to the arm: McNemar p ~ 0.004."""
    arm, control = scores(150, 60, 28, 437)
    _, row = judged(arm, control, min_effect=0.02)
    exact = mcnemar([[150, 60], [28, 437]], exact=True).pvalue
    assert exact < 0.005 and row["verdict"] == "better (eval-only)" and row["p_value"] < 0.01
    assert row["ci_low"] > 0 and row["diff"] == pytest.approx(32 / 675)


def test_no_prompt_changed_is_tested_by_the_binary_interval():
    """Identical 0/1 scores: the t interval has no width, Newcombe's has one; a margin it fits in
    gives an eval-only equivalence instead of untested."""
    arm, control = scores(15, 0, 0, 15)
    _, row = judged(arm, control, min_effect=0.1)
    assert row["verdict"] == "equivalent (eval-only)" and row["p_value"] == 1.0
    assert -0.1 < row["ci_low"] < 0 < row["ci_high"] < 0.1


def test_a_judged_csv_of_one_run_per_arm_reads_the_exact_test(tmp_path):
    """Through a tidy CSV and the full analysis: 0/1 rows of one run per arm take the binary
    test; an arm with several runs (per-prompt means not 0/1) keeps the t over prompts."""
    rows = []
    base = scores(8, 0, 0, 22)[1]
    flipped = scores(8, 4, 0, 18)[0]
    for arm, runs in (("base", [base]), ("rl", [flipped]), ("many", [flipped, base, flipped])):
        for seed, values in enumerate(runs):
            rows += [{"arm": arm, "seed": seed, "prompt_id": f"q{i}", "value": v} for i, v in enumerate(values)]
    path = tmp_path / "aime.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    results = load_tidy(path, JudgeSettings(control="base", min_effect=0.1, correction="none"))
    v = analyze(results, ReadOptions(n_permutations=100)).verdicts.set_index("condition")
    assert v.loc["rl", "test"] == "eval_only_binary" and v.loc["rl", "verdict"] == "inconclusive (eval-only)"
    assert v.loc["rl", "p_value"] == pytest.approx(mcnemar([[8, 4], [0, 18]]).pvalue)
    assert v.loc["many", "test"] == "eval_only" and v.loc["many", "verdict"].endswith("(eval-only)")
