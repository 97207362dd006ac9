"""One training run per arm, honestly: an eval-only verdict over the prompts when per-prompt scores
exist, ``untested`` (never ``inconclusive``) when nothing can be tested, in the verdict table, the
report text, the noise-by-source section and the MLflow tags."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from scipy import special
from scipy import stats as sps

from harness.decide.analysis import analyze
from harness.decide.rules import ReadOptions
from harness.report import verdict_tags
from harness.report.figures import forest_plot
from harness.report.markdown import render_markdown
from harness.tracking.tidy_results import JudgeSettings, results_from_table

SETTINGS = JudgeSettings(control="base", min_effect=0.05)


def table(seeds: dict[str, int], prompts: int = 120, lift: dict[str, float] | None = None, k: int = 1) -> pd.DataFrame:
    """0/1 (k = 1) or mean-of-k scores of each arm's runs on shared prompts of varied difficulty."""
    rng = np.random.default_rng(4)
    lift = lift or {"new": 0.25}
    z = rng.normal(0, 1.5, prompts)
    rows = []
    for arm, n in seeds.items():
        for seed in range(n):
            q = special.expit(z + lift.get(arm, 0.0) * 4)
            draws = rng.random((prompts, k)) < q[:, None]
            for p in range(prompts):
                row = {"arm": arm, "seed": seed, "prompt_id": f"q{p}", "value": draws[p].mean()}
                if k > 1:
                    row.update(samples=k, sample_var=float(draws[p].var(ddof=1)))
                rows.append(row)
    return pd.DataFrame(rows)


def verdicts(frame: pd.DataFrame, settings: JudgeSettings = SETTINGS):
    analysis = analyze(results_from_table(frame, settings), ReadOptions(n_permutations=100))
    return analysis, analysis.verdicts.set_index("condition")


def test_one_run_per_arm_gets_an_eval_only_verdict_read_from_the_paired_t_over_prompts():
    """Scores that are not 0/1 (means of 2 samples); 0/1 scores: tests/decide/test_eval_only_binary.py."""
    frame = table({"base": 1, "new": 1, "same": 1}, lift={"new": 0.25, "same": 0.0}, k=2)
    analysis, v = verdicts(frame)
    assert v.loc["new", "verdict"] == "better (eval-only)" and v.loc["new", "test"] == "eval_only"
    assert v.loc["same", "verdict"] in ("inconclusive (eval-only)", "equivalent (eval-only)")
    a = frame[frame.arm == "new"]["value"].to_numpy()
    c = frame[frame.arm == "base"]["value"].to_numpy()
    ref = sps.ttest_rel(a, c).confidence_interval(1 - 0.05 / 2)  # Bonferroni over the 2 comparisons
    assert (v.loc["new", "ci_low"], v.loc["new", "ci_high"]) == pytest.approx((ref.low, ref.high))
    assert v.loc["new", "ci_level"] == pytest.approx(0.975)
    reason = v.loc["new", "reason"]
    assert "new has 1 seed and base has 1 seed" in reason and "eval-only comparison on the 120 prompts" in reason
    assert "conditional on these checkpoints" in reason and "training seed's noise is unknown" in reason
    assert v["seeds_needed_effect"].isna().all() and v["seeds_needed_null"].isna().all()
    assert not analysis.notes  # every comparison was tested


def test_a_side_with_several_runs_is_compared_on_its_mean_per_prompt():
    frame = table({"base": 1, "new": 3})
    _, v = verdicts(frame)
    per_prompt = frame[frame.arm == "new"].groupby("prompt_id", sort=False)["value"].mean().to_numpy()
    base = frame[frame.arm == "base"]["value"].to_numpy()
    assert v.loc["new", "verdict"].endswith("(eval-only)")
    assert v.loc["new", "diff"] == pytest.approx(np.mean(per_prompt - base))
    assert (v.loc["new", "n"], v.loc["new", "n_control"]) == (3, 1)


def test_without_per_prompt_scores_or_common_prompts_it_is_untested_with_its_reason():
    runs = pd.DataFrame({"arm": ["base", "new", "new"], "seed": [0, 0, 1], "value": [0.4, 0.5, 0.6]})
    analysis, v = verdicts(runs)
    assert v.loc["new", "verdict"] == "untested" and np.isnan(v.loc["new", "ci_low"])
    assert "Cannot be tested: base has 1 seed" in v.loc["new", "reason"]
    assert "no per-prompt scores for every trial of both sides" in v.loc["new", "reason"]
    assert "1 comparison(s) could not be tested" in analysis.notes[0]
    text = render_markdown(analysis)
    assert "untested" in text and "Untested: the comparison cannot be tested at all" in text
    assert "inconclusive" not in v["verdict"].tolist()
    res = results_from_table(table({"base": 1, "new": 1}), SETTINGS)
    apart = res.prompts.copy()
    apart.loc[apart.arm == "new", "prompt_id"] = "n" + apart.loc[apart.arm == "new", "prompt_id"]
    v = analyze(dataclasses.replace(res, prompt_source=lambda: apart), ReadOptions(n_permutations=100)).verdicts
    assert v.loc[0, "verdict"] == "untested" and "0 prompts scored by both sides" in v.loc[0, "reason"]


def test_untested_and_eval_only_verdicts_reach_mlflow_with_their_notes():
    analysis, _ = verdicts(table({"base": 1, "new": 1}))
    tags = verdict_tags(analysis)
    assert tags["verdict.new"] == "better (eval-only)"
    assert "conditional on these checkpoints" in tags["verdict_note.new"]
    runs = pd.DataFrame({"arm": ["base", "new"], "seed": [0, 0], "value": [0.4, 0.5]})
    analysis, _ = verdicts(runs)
    tags = verdict_tags(analysis)
    assert tags["verdict.new"] == "untested" and tags["verdict_note.new"].startswith("Cannot be tested")
    seed_level, _ = verdicts(table({"base": 3, "new": 3}))
    assert set(verdict_tags(seed_level)) == {"verdict.new"}  # a seed-level verdict needs no note


def test_the_report_says_what_eval_only_means_and_draws_it_apart():
    analysis, _ = verdicts(table({"base": 1, "new": 1}))
    text = render_markdown(analysis)
    assert "better (eval-only)" in text
    assert "'(eval-only)': a side has one training run" in text and "conditional on these checkpoints" in text
    (trace,) = [t for t in forest_plot(analysis).data if t.name == "better (eval-only)"]
    assert list(trace.marker.symbol) == ["diamond"]
    seed_level, _ = verdicts(table({"base": 3, "new": 3}))
    assert "(eval-only)" not in render_markdown(seed_level)  # the caption only says it when it applies


def test_noise_by_source_shows_what_one_run_can_split():
    analysis, _ = verdicts(table({"base": 1, "new": 1, "other": 1}, k=4, lift={"new": 0.25, "other": 0.1}))
    comps = analysis.components.set_index("source")
    assert list(comps.index) == ["seed", "prompt", "arm x prompt", "eval sampling"]
    assert np.isnan(comps.loc["seed", "variance"]) and comps.loc["seed", "note"].startswith("unknown: one training run")
    assert comps.loc["prompt", "variance"] > 0 and comps.loc["eval sampling", "variance"] > 0
    assert comps.loc[["prompt", "arm x prompt", "eval sampling"], "share"].sum() == pytest.approx(1.0)
    line = analysis.header["noise_line"]
    assert "from one training run per arm (the training seed's part is unknown" in line and "eval sampling sd" in line
    budget = analysis.budget.set_index("option")
    assert list(budget.index) == ["as run", "2x eval prompts", "2x eval samples"]
    assert budget.loc["2x eval prompts", "se_diff"] == pytest.approx(budget.loc["as run", "se_diff"] / np.sqrt(2))
    assert budget.loc["2x eval samples", "se_diff"] < budget.loc["as run", "se_diff"]
    text = render_markdown(analysis)
    assert "unknown: one training run per arm" in text
    assert "as far as one training run per arm allows" in text and "more seeds: unknown" in text
    seed_level, _ = verdicts(table({"base": 3, "new": 3}))
    assert "as far as one training run" not in render_markdown(seed_level)


def test_seed_level_comparisons_are_unchanged_beside_an_eval_only_one():
    frame = table({"base": 3, "new": 3, "single": 1}, lift={"new": 0.25, "single": 0.25})
    _, v = verdicts(frame)
    assert v.loc["new", "verdict"] == "better" and v.loc["new", "test"] == "seed_prompt_binary"
    # the control's per-prompt mean over its 3 runs is not 0/1: the t over prompts
    assert v.loc["single", "verdict"] == "better (eval-only)" and v.loc["single", "test"] == "eval_only"
    assert np.allclose(v["ci_level"], 1 - 0.05 / 2)  # both in the family of 2


def test_one_run_per_arm_on_benchmarks_gets_eval_only_benchmark_and_overall_verdicts():
    parts = [
        table({"base": 1, "new": 1}, prompts=n, lift={"new": lift}).assign(benchmark=name)
        for name, n, lift in (("(task)", 80, 0.25), ("gsm", 120, 0.3), ("aime", 30, 0.0))
    ]
    analysis, v = verdicts(pd.concat(parts, ignore_index=True))
    b = analysis.benchmarks
    assert v.loc["new", "test"] == "eval_only_binary" and list(b.verdicts["test"]) == ["eval_only_binary"] * 2
    assert b.verdicts["verdict"].str.endswith("(eval-only)").all()
    (overall,) = b.overall.to_dict(orient="records")
    assert overall["test"] == "eval_only_benchmarks_mean" and overall["verdict"].endswith("(eval-only)")
    assert overall["diff"] == pytest.approx(b.verdicts["diff"].mean())
    assert "Mean of 2 eval-only benchmark differences" in overall["reason"]
    assert "conditional on these checkpoints" in overall["reason"]
    text = render_markdown(analysis)
    overall_table = text[text.index("## Overall verdicts across benchmarks") : text.index("## Verdicts by benchmark")]
    assert "The mean of the benchmarks' eval-only differences, each over its own prompts" in overall_table
    assert "each seed's scores averaged" not in text  # the multi-seed method, not used here
