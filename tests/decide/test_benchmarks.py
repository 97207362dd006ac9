"""Per-benchmark and overall verdicts on hand-made frames: the family over arms x benchmarks, the
overall difference and its interval checked by hand, rliable's aggregates per arm."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pytest
from rules_under import under
from scipy import stats as sps

from harness import stats
from harness.decide.analysis import analyze
from harness.decide.benchmarks import analyze_benchmarks
from harness.decide.rules import ReadOptions

SEEDS = (0, 1, 2)
#: per condition, per benchmark, per seed: the final score
FINAL = {
    "ctrl": {"math": [0.50, 0.55, 0.52], "code": [0.30, 0.28, 0.33]},
    "up": {"math": [0.60, 0.66, 0.61], "code": [0.31, 0.30, 0.35]},
    "same": {"math": [0.51, 0.54, 0.53], "code": [0.29, 0.30, 0.32]},
}
BENCHMARKS = [
    {"name": "math", "metric": "eval/math/accuracy", "min_effect": 0.02},
    {"name": "code", "metric": "eval/code/accuracy", "min_effect": None},
]


@dataclass
class Frames:
    trials: pd.DataFrame
    curves: pd.DataFrame
    meta: dict = field(default_factory=dict)
    prompts: pd.DataFrame | None = None


def make(final=FINAL, *, prompts: int = 0, seed: int = 3) -> Frames:
    """Trials with each benchmark's final metric; with ``prompts``, 0/1 per-prompt scores whose
    means are those metrics (the metric then is recomputed from them)."""
    rng = np.random.default_rng(seed)
    trials, rows = [], []
    for cond, by_bench in final.items():
        for i, s in enumerate(SEEDS):
            row = {"trial_id": f"{cond}-s{s}", "arm": cond, "seed": s, "status": "completed", "error": None}
            row["eval/accuracy"] = by_bench["math"][i]
            for name, values in by_bench.items():
                metric = f"eval/{name}/accuracy"
                if prompts:
                    scores = (rng.random(prompts) < values[i]).astype(float)
                    row[metric] = scores.mean()
                    rows += [(row["trial_id"], cond, s, 5, f"{name}{p}", metric, v) for p, v in enumerate(scores)]
                else:
                    row[metric] = values[i]
            trials.append(row)
    meta = {
        "study": "bench",
        "primary_metric": "eval/accuracy",
        "direction": "maximize",
        "control": "ctrl",
        "conditions": list(final),
        "comparisons": [("up", "ctrl"), ("same", "ctrl")],
        "seeds": list(SEEDS),
        "seed_matched": True,
        "min_effect": 0.05,
        "metric_ranges": {"eval/accuracy": (0.0, 1.0)},
        "benchmarks": BENCHMARKS,
    }
    frame = pd.DataFrame(rows, columns=["trial_id", "arm", "seed", "step", "prompt_id", "metric", "value"])
    return Frames(
        pd.DataFrame(trials),
        pd.DataFrame(columns=["trial_id", "arm", "seed", "step", "metric", "value"]),
        meta,
        frame if prompts else None,
    )


def _table(frames: Frames, cond: str, metric: str) -> np.ndarray:
    t = frames.trials[frames.trials["arm"] == cond].sort_values("seed")
    return t[metric].to_numpy(float)


def test_one_verdict_per_arm_per_benchmark_in_one_family_over_arms_and_benchmarks():
    frames = make()
    out = analyze_benchmarks(*under(frames, min_effect=0.05))
    v = out.verdicts
    assert len(v) == 4 and out.family_size == 4
    assert list(v["benchmark"]) == ["math", "math", "code", "code"]
    assert np.allclose(v["ci_level"], 1 - 0.05 / 4) and out.level == pytest.approx(1 - 0.05 / 4)
    # each row is the paired t over seeds at the family's level, by hand
    for _, r in v.iterrows():
        d = _table(frames, r["condition"], f"eval/{r['benchmark']}/accuracy") - _table(
            frames, "ctrl", f"eval/{r['benchmark']}/accuracy"
        )
        half = sps.t.ppf(1 - 0.05 / 8, 2) * d.std(ddof=1) / np.sqrt(3)
        assert r["diff"] == pytest.approx(d.mean()) and r["test"] == "paired_t"
        assert (r["ci_low"], r["ci_high"]) == pytest.approx((d.mean() - half, d.mean() + half))
    # the benchmark's own min_effect, else the study's
    assert list(v["min_effect"]) == [0.02, 0.02, 0.05, 0.05]
    up_math = v[(v["condition"] == "up") & (v["benchmark"] == "math")].iloc[0]
    assert up_math["verdict"] == "better"


def test_the_overall_verdict_is_the_mean_of_benchmark_differences_with_the_per_seed_paired_interval():
    frames = make()
    out = analyze_benchmarks(*under(frames, min_effect=0.05))
    o = out.overall
    assert list(o["condition"]) == ["up", "same"] and (o["metric"] == "mean over benchmarks").all()
    assert out.overall_level == pytest.approx(1 - 0.05 / 2)  # a family of the two arms, as the primary verdicts
    for _, r in o.iterrows():
        per_seed = np.mean(
            [_table(frames, r["condition"], b["metric"]) - _table(frames, "ctrl", b["metric"]) for b in BENCHMARKS],
            axis=0,
        )
        by_benchmark = out.verdicts[out.verdicts["condition"] == r["condition"]]["diff"]
        assert r["diff"] == pytest.approx(by_benchmark.mean()) == pytest.approx(per_seed.mean())
        half = sps.t.ppf(1 - 0.05 / 4, 2) * per_seed.std(ddof=1) / np.sqrt(3)
        assert (r["ci_low"], r["ci_high"]) == pytest.approx((per_seed.mean() - half, per_seed.mean() + half))
    # by hand for "up": per-seed means of (0.10, 0.01), (0.11, 0.02), (0.09, 0.02)
    up = o[o["condition"] == "up"].iloc[0]
    assert up["diff"] == pytest.approx(np.mean([0.055, 0.065, 0.055]))


def test_with_per_prompt_scores_each_benchmarks_arm_x_prompt_term_widens_the_overall_interval():
    frames = make(prompts=40)
    out = analyze_benchmarks(*under(frames, min_effect=0.05))
    assert set(out.verdicts["test"]) == {"seed_prompt_binary"}  # 0/1 scores: its t part is the seed x prompt one
    up = out.overall[out.overall["condition"] == "up"].iloc[0]
    terms, counts = [], []
    for b in BENCHMARKS:
        arm = frames.prompts[(frames.prompts["arm"] == "up") & (frames.prompts["metric"] == b["metric"])]
        ctrl = frames.prompts[(frames.prompts["arm"] == "ctrl") & (frames.prompts["metric"] == b["metric"])]
        table = lambda f: f.pivot_table(index="seed", columns="prompt_id", values="value").to_numpy()  # noqa: E731
        d = stats.seed_prompt_difference(table(arm), table(ctrl), paired=True)
        terms.append(max(0.0, d.se**2 - d.se_trial_means**2))
        counts.append(40)
    arm = np.column_stack([_table(frames, "up", b["metric"]) for b in BENCHMARKS])
    ctrl = np.column_stack([_table(frames, "ctrl", b["metric"]) for b in BENCHMARKS])
    expected = stats.benchmarks_difference(arm, ctrl, paired=True, prompt_terms=terms, n_prompts=counts)
    half = sps.t.ppf(1 - 0.05 / 4, expected.df) * expected.se
    assert (up["ci_low"], up["ci_high"]) == pytest.approx((expected.diff - half, expected.diff + half))
    assert up["test"] == ("benchmarks_mean")


def test_aggregates_are_rliables_on_each_conditions_seeds_x_benchmarks_scores():
    frames = make()
    out = analyze_benchmarks(*under(frames, min_effect=0.05))
    a = out.aggregates.set_index("condition")
    up = np.column_stack([_table(frames, "up", b["metric"]) for b in BENCHMARKS])
    ctrl = np.column_stack([_table(frames, "ctrl", b["metric"]) for b in BENCHMARKS])
    assert a.loc["up", "iqm"] == pytest.approx(stats.iqm(up))
    assert a.loc["up", "prob_improvement"] == pytest.approx(stats.probability_of_improvement(up, ctrl))
    assert np.isnan(a.loc["ctrl", "prob_improvement"])  # the control is not compared with itself
    assert a.loc["up", "iqm_low"] <= a.loc["up", "iqm"] <= a.loc["up", "iqm_high"]
    profile = out.profiles[out.profiles["condition"] == "up"]
    np.testing.assert_allclose(profile["fraction"], stats.performance_profile(up, profile["tau"].to_numpy()))


def test_a_study_without_benchmarks_has_none_and_analyze_carries_them():
    frames = make()
    plain = Frames(frames.trials, frames.curves, {k: v for k, v in frames.meta.items() if k != "benchmarks"})
    assert (
        analyze_benchmarks(*under(plain)) is None and analyze(plain, ReadOptions(n_permutations=100)).benchmarks is None
    )
    analysis = analyze(frames, ReadOptions(n_permutations=100))
    assert len(analysis.benchmarks.verdicts) == 4 and len(analysis.verdicts) == 2  # the primary table stays
