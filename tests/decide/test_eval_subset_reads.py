"""A comparison read at an evaluation of the eval subset: each trial's value is the subset's
stratified mean, and the interval carries the subset's sampling variance (Cochran 5.10); at the
final evaluation (every prompt) nothing changes. Hand-made frames, expected values by hand."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from harness.decide.comparisons import compare_values
from harness.decide.compute_budget import at_point
from harness.decide.scaling import prompt_tables, seed_curves
from harness.tracking.prompt_scores import STRATUM_METRIC, STRATUM_SIZE_METRIC

METRIC = "eval/accuracy"
PROMPTS = [f"p{i}" for i in range(8)]
STRATA = [0, 0, 0, 0, 1, 1, 1, 1]  # two strata of 4 held-out prompts
SUBSET = ["p0", "p2", "p4", "p5", "p7"]  # 2 of stratum 0, 3 of stratum 1: not proportional
RNG = np.random.default_rng(3)
#: (arm, seed) -> per-prompt scores at steps 0 (all), 1 (the subset's prompts scored) and 2 (all)
SCORES = {
    (arm, seed): RNG.uniform(0, 1, (3, 8)) + (0.2 if arm == "arm" else 0.0)
    for arm in ("ctl", "arm")
    for seed in range(3)
}


@dataclass
class Results:
    trials: pd.DataFrame
    curves: pd.DataFrame
    meta: dict
    prompts: pd.DataFrame


def make_results(point: dict, subset_of: dict | None = None) -> Results:
    trials, curves, prompts = [], [], []
    for (arm, seed), scores in SCORES.items():
        trial_id = f"{arm}-s{seed}"
        trials.append({"trial_id": trial_id, "arm": arm, "seed": seed, "status": "completed", METRIC: scores[2].mean()})
        for step in range(3):
            scored = (subset_of or {}).get((arm, seed), SUBSET) if step == 1 else PROMPTS
            curves.append((trial_id, arm, seed, step, METRIC, 9.9))  # the curve's value: never read at a subset
            for p in scored:
                i = PROMPTS.index(p)
                for metric, value in ((METRIC, scores[step, i]), (STRATUM_METRIC, STRATA[i]), (STRATUM_SIZE_METRIC, 4)):
                    prompts.append((trial_id, arm, seed, step, p, metric, float(value)))
    meta = {
        "primary_metric": METRIC,
        "direction": "maximize",
        "control": "ctl",
        "conditions": ["ctl", "arm"],
        "comparisons": [("arm", "ctl")],
        "seed_matched": True,
        "metric_ranges": {METRIC: (0.0, 1.0)},
        "primary_at": point,
    }
    columns = ["trial_id", "arm", "seed", "step", "metric", "value"]
    return Results(
        pd.DataFrame(trials),
        pd.DataFrame(curves, columns=columns),
        meta,
        pd.DataFrame(prompts, columns=["trial_id", "arm", "seed", "step", "prompt_id", "metric", "value"]),
    )


def stratified(values: np.ndarray) -> float:
    """The stratified mean of ``values`` (one per SUBSET prompt): 0.5 x stratum 0's mean + 0.5 x stratum 1's."""
    return 0.5 * values[:2].mean() + 0.5 * values[2:].mean()


def subset_values(step: float, arm: str, seed: int) -> np.ndarray:
    rows = SCORES[(arm, seed)][:, [PROMPTS.index(p) for p in SUBSET]]
    low = int(math.floor(step))
    return rows[low] + (step - low) * (rows[min(low + 1, 2)] - rows[low])


@pytest.mark.parametrize("budget", [1.0, 1.5])
def test_a_point_at_or_next_to_a_subset_evaluation_is_the_subsets_stratified_mean(budget):
    view = at_point(make_results({"point": "budget", "axis": "step", "budget": budget}), METRIC)
    values = dict(zip(view.trials["trial_id"], view.trials[METRIC]))
    for arm, seed in SCORES:
        assert values[f"{arm}-s{seed}"] == pytest.approx(stratified(subset_values(budget, arm, seed)))
    assert set(view.prompts["prompt_id"]) == set(SUBSET)


def test_the_interval_at_a_subset_point_carries_the_subsets_variance():
    pair = compare_values(
        make_results({"point": "budget", "axis": "step", "budget": 1.0}), "arm", "ctl", METRIC, test="paired_t"
    )
    per_seed = np.array(
        [stratified(subset_values(1, "arm", s)) - stratified(subset_values(1, "ctl", s)) for s in range(3)]
    )
    d = np.mean([subset_values(1, "arm", s) - subset_values(1, "ctl", s) for s in range(3)], axis=0)
    # Cochran 5.10: W_h = 1/2, f = 2/4 and 3/4
    v = 0.25 * (1 - 2 / 4) * d[:2].var(ddof=1) / 2 + 0.25 * (1 - 3 / 4) * d[2:].var(ddof=1) / 3
    se_seeds = per_seed.std(ddof=1) / math.sqrt(3)
    assert pair.difference.diff == pytest.approx(per_seed.mean())
    assert pair.difference.diff == pytest.approx(stratified(d))
    assert pair.difference.se == pytest.approx(math.sqrt(se_seeds**2 + v))
    s0, s1 = d[:2].var(ddof=1), d[2:].var(ddof=1)  # Satterthwaite: g_h = N_h (N_h - n_h) / n_h = 4, 4/3
    n_e = (4 * s0 + 4 / 3 * s1) ** 2 / (16 * s0**2 / 1 + 16 / 9 * s1**2 / 2)
    assert pair.difference.df == pytest.approx((se_seeds**2 + v) ** 2 / (se_seeds**4 / 2 + v**2 / n_e))
    assert any("eval subset (5 of the 8 held-out prompts in 2 strata)" in note for note in pair.notes)
    assert pair.difference.plan.variance(3) == pytest.approx(se_seeds**2 + v)  # more seeds leave v
    assert pair.difference.plan.variance(1e9) == pytest.approx(v)
    seed_prompt = compare_values(make_results({"point": "budget", "axis": "step", "budget": 1.0}), "arm", "ctl", METRIC)
    assert seed_prompt.difference.test == "seed_prompt" and seed_prompt.difference.diff == pytest.approx(stratified(d))


def test_the_final_evaluation_reads_every_prompt_unchanged():
    pair = compare_values(
        make_results({"point": "final", "axis": "step", "budget": None}), "arm", "ctl", METRIC, test="paired_t"
    )
    per_seed = np.array([SCORES[("arm", s)][2].mean() - SCORES[("ctl", s)][2].mean() for s in range(3)])
    assert pair.difference.se == pytest.approx(per_seed.std(ddof=1) / math.sqrt(3))
    assert not any("eval subset" in note for note in pair.notes)


def test_trials_read_on_different_subsets_are_not_tested():
    other = {("arm", 1): ["p1", "p2", "p4", "p5", "p7"]}
    pair = compare_values(make_results({"point": "budget", "axis": "step", "budget": 1.0}, other), "arm", "ctl", METRIC)
    assert not pair.difference.testable
    assert "eval subset" in pair.difference.reason and "final evaluation" in pair.difference.reason


def test_a_scaling_fit_reads_every_evaluation_on_the_subsets_prompts():
    results = make_results({"point": "final", "axis": "step", "budget": None})
    curves = seed_curves(results, "arm", METRIC, "step")
    tables, ids = prompt_tables(results, curves, METRIC)
    assert ids == sorted(SUBSET) and [t.shape for t in tables] == [(3, 5)] * 3
    columns = [PROMPTS.index(p) for p in ids]
    assert tables[0] == pytest.approx(SCORES[("arm", curves[0].seed)][:, columns])
