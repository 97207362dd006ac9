"""What ``harness decide`` says about a table with two benchmarks, at one seed per arm (eval-only)
and at several: the console's lines (the overall verdicts first, naming their test, then every
benchmark's), one interval level per report table stated in its caption, the noise tables per
benchmark, the overall verdicts' wording following the method used, and no zero-width interval
from one seed."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_main import run_main
from scipy import special

from harness.decide.analysis import analyze
from harness.decide.rules import ReadOptions
from harness.report import console_lines
from harness.report.cells import fmt_level
from harness.report.markdown import render_markdown
from harness.report.tables import sections
from harness.tracking.tidy_results import JudgeSettings, results_from_table

BENCHMARKS = {"gsm": 30, "math": 24}  # name -> prompts
LIFT = {"base": 0.0, "new": 1.0, "same": 0.0}


def tidy(seeds: dict[str, int]) -> pd.DataFrame:
    """0/1 scores of each arm's runs on each benchmark's prompts (varied difficulty)."""
    rng = np.random.default_rng(1)
    rows = []
    for bench, n in BENCHMARKS.items():
        difficulty = rng.normal(0, 1.5, n)
        for arm, lift in LIFT.items():
            for seed in range(seeds.get(arm, 0)):
                q = special.expit(difficulty + lift + rng.normal(0, 0.2))
                scores = (rng.random(n) < q).astype(float)
                rows += [
                    {"arm": arm, "seed": seed, "benchmark": bench, "prompt_id": f"q{j}", "value": scores[j]}
                    for j in range(n)
                ]
    return pd.DataFrame(rows)


def analysis_of(frame: pd.DataFrame, metric: str = "eval/accuracy"):
    settings = JudgeSettings(control="base", min_effect=0.05, metric=metric)
    return analyze(results_from_table(frame, settings), ReadOptions(n_permutations=100))


@pytest.fixture(scope="module")
def one_seed():
    return analysis_of(tidy({"base": 1, "new": 1, "same": 1}))


@pytest.fixture(scope="module")
def four_seeds():
    return analysis_of(tidy({"base": 4, "new": 4, "same": 4}))


def by_title(analysis) -> dict:
    return {s.title: s for s in sections(analysis, include_trials=False)}


# ----------------------------------------------------------------------------- the console


@pytest.mark.parametrize("which", ["one_seed", "four_seeds"])
def test_the_console_says_the_overall_verdicts_first_naming_the_test_then_every_benchmark_s(request, which):
    analysis = request.getfixturevalue(which)
    b = analysis.benchmarks
    lines = console_lines(analysis)
    pairs = ("new vs base", "same vs base")
    where = [line.split(": ")[0] for line in lines]
    level = fmt_level(b.level)
    primary = fmt_level(analysis.header["ci_level"])
    overall = [
        f"overall (mean over 2 benchmarks, test {r.test}, {fmt_level(r.ci_level)} interval "
        f"[{r.ci_low:.4g}, {r.ci_high:.4g}])"
        for r in b.overall.itertuples()
    ]
    assert where == [
        *overall,
        *[f"primary eval/gsm/accuracy ({primary} interval)"] * 2,
        *[f"gsm ({level} interval)"] * 2,
        *[f"math ({level} interval)"] * 2,
    ]
    assert [re.search(r"(\w+ vs base)", line)[1] for line in lines] == list(pairs) * 4
    expected = [*b.overall["verdict"], *analysis.verdicts["verdict"], *b.verdicts["verdict"]]
    assert [line.split(" vs base: ")[1].rsplit(" (difference", 1)[0] for line in lines] == expected
    method = "eval_only_benchmarks_mean" if which == "one_seed" else "benchmarks_mean"
    assert all(f"test {method}," in line for line in lines[:2])


def test_harness_decide_prints_those_lines(monkeypatch, capsys):
    """The command's printing (the report's writing is tested apart: here it is skipped)."""
    import harness.report

    monkeypatch.setattr(harness.report, "write_analysis", lambda _analysis, out: Path(out) / "index.html")
    tidy({"base": 1, "new": 1, "same": 1}).to_csv("t.csv", index=False)
    code, out, err = run_main(monkeypatch, capsys, "decide", "t.csv", "--control", "base", "--min-effect", "0.05")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("wrote reports/judged/index.html")
    assert lines[1].startswith("overall (mean over 2 benchmarks, test eval_only_benchmarks_mean, 97.5% interval")
    assert [line.split(" (")[0] for line in lines[5:]] == ["gsm"] * 2 + ["math"] * 2
    assert len(lines) == 1 + 2 * 4


# ----------------------------------------------------------------------------- levels


def _levels(section) -> set[str]:
    return set(section.table["level"]) if "level" in section.table else set()


@pytest.mark.parametrize("which", ["one_seed", "four_seeds"])
def test_each_table_has_one_level_stated_in_its_own_caption(request, which):
    analysis = request.getfixturevalue(which)
    b = analysis.benchmarks
    tables = by_title(analysis)
    text = render_markdown(analysis)
    assert "intervals at" not in text.split("## Verdicts", 1)[0]  # the header claims no one level for all
    for section in tables.values():
        levels = _levels(section)
        assert len(levels) <= 1, (section.title, levels)
        if levels:
            assert levels.pop() in section.caption, section.title
    overall = tables["Overall verdicts across benchmarks"]
    assert _levels(overall) == {fmt_level(b.overall_level)}
    by_benchmark = tables["Verdicts by benchmark"]
    assert list(by_benchmark.table["benchmark"]) == ["gsm", "math"]  # the overall row, at its own level, apart
    assert f"Intervals at {fmt_level(b.level)}" in by_benchmark.caption
    assert set(b.verdicts["ci_level"]) == {b.level} and b.level != b.overall_level
    assert f"Intervals at {fmt_level(b.overall_level)}" in overall.caption
    assert "Intervals at 95%: stratified bootstrap" in tables["Aggregates across benchmarks"].caption
    assert "at 95%" in tables["Condition means"].caption


# ----------------------------------------------------------------------------- noise per benchmark


@pytest.mark.parametrize(("which", "seeds"), [("one_seed", 1), ("four_seeds", 4)])
def test_noise_and_budget_tables_per_benchmark_are_each_benchmark_s_own(request, which, seeds):
    analysis = request.getfixturevalue(which)
    frame = tidy({"base": seeds, "new": seeds, "same": seeds})
    tables = by_title(analysis)
    for title in ("Noise by source", "What more budget buys", "Noise floor"):
        assert "The primary metric's (eval/gsm/accuracy) only" in tables[title].caption
    # math's tables are the ones its own analysis gives when it is the primary metric
    as_primary = by_title(analysis_of(frame, metric="eval/math/accuracy"))
    for title, of_math in (
        ("Noise by source, by benchmark", "Noise by source"),
        ("What more budget buys, by benchmark", "What more budget buys"),
        ("Noise floor by benchmark", "Noise floor"),
    ):
        table = tables[title].table
        assert list(dict.fromkeys(table["benchmark"])) == ["gsm", "math"], title
        math = table[table["benchmark"] == "math"].drop(columns="benchmark").reset_index(drop=True)
        own = as_primary[of_math].table.drop(columns=["seeds to decide"], errors="ignore")
        pd.testing.assert_frame_equal(math.drop(columns=["seeds to decide"], errors="ignore"), own, check_dtype=False)
    gsm = tables["Noise by source, by benchmark"].table
    gsm = gsm[gsm["benchmark"] == "gsm"].drop(columns="benchmark").reset_index(drop=True)
    pd.testing.assert_frame_equal(gsm, tables["Noise by source"].table)  # gsm is the primary here


# ----------------------------------------------------------------------------- the overall method


ONE_RUN = "The mean of the benchmarks' eval-only differences, each over its own prompts"
SEEDS = "each seed's scores averaged over the benchmarks, then the paired t over seeds"


def test_the_overall_wording_is_the_eval_only_method_at_one_seed_per_arm(one_seed):
    caption = by_title(one_seed)["Overall verdicts across benchmarks"].caption
    assert set(one_seed.benchmarks.overall["test"]) == {"eval_only_benchmarks_mean"}
    assert ONE_RUN in caption and "conditional on these checkpoints" in caption
    assert "each seed's scores averaged" not in render_markdown(one_seed)


def test_the_overall_wording_is_the_seed_method_at_several_seeds(four_seeds):
    caption = by_title(four_seeds)["Overall verdicts across benchmarks"].caption
    assert set(four_seeds.benchmarks.overall["test"]) == {"benchmarks_mean"}
    assert SEEDS[0].upper() + SEEDS[1:] in caption and "eval-only" not in caption


def test_mixed_methods_each_name_their_comparisons():
    analysis = analysis_of(tidy({"base": 3, "new": 1, "same": 3}))
    assert list(analysis.benchmarks.overall["test"]) == ["eval_only_benchmarks_mean", "benchmarks_mean"]
    caption = by_title(analysis)["Overall verdicts across benchmarks"].caption
    assert f"new vs base: {ONE_RUN[0].lower() + ONE_RUN[1:]}" in caption
    assert f"same vs base: {SEEDS.replace('paired t', 'Welch t')}" in caption  # new's one seed: not seed-matched


# ----------------------------------------------------------------------------- aggregates at one seed


def test_iqm_and_probability_of_improvement_from_one_seed_print_no_interval(one_seed, four_seeds):
    a = one_seed.benchmarks.aggregates
    assert a[["iqm_low", "iqm_high"]].isna().all().all() and a["iqm"].notna().all()
    shown = by_title(one_seed)["Aggregates across benchmarks"].table
    cells = [*shown["IQM"], *shown["control IQM"], *shown["P(improvement)"]]
    assert not any("[" in c for c in cells), cells  # no "0.7067 [0.7067, 0.7067]"
    assert all(c.endswith("(no interval: 1 seed)") for c in [*shown["IQM"], *shown["control IQM"]]), cells
    assert all(c.endswith("(no interval: 1 seed on a side)") for c in shown["P(improvement)"]), cells
    shown = by_title(four_seeds)["Aggregates across benchmarks"].table
    for cell in [*shown["IQM"], *shown["P(improvement)"]]:
        low, high = (float(x) for x in re.search(r"\[(.+), (.+)\]", cell).groups())
        assert low < high, cell


def test_performance_profiles_from_one_seed_draw_no_band(one_seed, four_seeds):
    from harness.report.figures import performance_profile_plot

    assert one_seed.benchmarks.profiles[["low", "high"]].isna().all().all()
    bands = [t for t in performance_profile_plot(one_seed).data if t.fill == "toself"]
    assert bands == [] and all("(one seed: no band)" in t.name for t in performance_profile_plot(one_seed).data)
    assert len([t for t in performance_profile_plot(four_seeds).data if t.fill == "toself"]) == 3
