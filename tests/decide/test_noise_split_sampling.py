"""The noise-by-source split of a sampled evaluation: k = 1 keeps its sampling variance as one
combined component, k > 1 splits it without the cap, greedy has none."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from harness import stats
from harness.decide.comparisons import ArmScores, arm_scores
from harness.decide.noise import COMPONENT_NOTES, noise_split


def _scores(rng, k, sampled, sample_var=None):
    out = {}
    v = rng.normal(0, 0.5, 30)
    for arm in ("a", "b"):
        table = pd.DataFrame(
            rng.normal(0, 0.3, (4, 1)) + v + rng.normal(0, 0.8 / np.sqrt(k), (4, 30)),
            index=range(4),
            columns=[f"p{i}" for i in range(30)],
        )
        out[arm] = ArmScores(
            values=table.mean(axis=1), failed=0, table=table, sample_var=sample_var, samples=k, sampled=sampled
        )
    return out


def _split(scores):
    return noise_split("eval/mean_reward", scores, level=0.95, effect=None, margin=None, power=0.8)


def test_k_one_sampled_keeps_its_sampling_variance_as_a_combined_component():
    split = _split(_scores(np.random.default_rng(0), 1, sampled=True))
    sources = list(split.components["source"])
    assert stats.COMBINED in sources and "eval sampling" not in sources and "seed x prompt" not in sources
    budget = split.budget.set_index("option")
    assert "2x eval samples (at best)" in budget.index
    assert budget.loc["2x eval samples (at best)", "se_diff"] < budget.loc["as run", "se_diff"]
    assert budget.loc["2x eval samples (at best)", "samples"] == 2
    note = split.components.set_index("source").loc[stats.COMBINED, "note"]
    assert note == COMPONENT_NOTES[stats.COMBINED] and "cannot tell" in note


def test_k_four_splits_and_greedy_has_no_sampling_row():
    split = _split(_scores(np.random.default_rng(1), 4, sampled=True, sample_var=0.64))
    comps = split.components.set_index("source")
    assert comps.loc["eval sampling", "variance"] == pytest.approx(0.64 / 4)  # not capped at the residual
    assert "std@k" in comps.loc["eval sampling", "note"] and "run-to-run" in comps.loc["seed", "note"]
    assert "prompt-to-prompt" in comps.loc["prompt", "note"]
    assert "2x eval samples" in set(split.budget["option"])
    greedy = _split(_scores(np.random.default_rng(1), 1, sampled=False))
    assert greedy.components.set_index("source").loc["eval sampling", "variance"] == 0.0
    assert not any("eval samples" in o for o in greedy.budget["option"])


def test_pass_at_k_scores_are_read_as_sampled_with_the_sampled_mean_k():
    rng = np.random.default_rng(4)
    trials, rows = [], []
    for seed in range(3):
        tid = f"g-s{seed}"
        values = rng.integers(0, 5, 6) / 4
        trials.append({"trial_id": tid, "arm": "g", "seed": seed, "status": "completed", "eval/pass@2": values.mean()})
        for p, v in enumerate(values):
            rows.append((tid, 5, f"p{p}", "eval/pass@2", float(v)))
            rows.append((tid, 5, f"p{p}", "eval/mean_reward.samples", 4.0))
    results = SimpleNamespace(
        trials=pd.DataFrame(trials),
        prompts=pd.DataFrame(rows, columns=["trial_id", "step", "prompt_id", "metric", "value"]),
        meta={},
    )
    scores = arm_scores(results, "g", "eval/pass@2")
    assert scores.table is not None and scores.sampled and scores.samples == 4 and scores.sample_var is None
    split = noise_split("eval/pass@2", {"g": scores}, level=0.95, effect=None, margin=None, power=0.8)
    assert stats.COMBINED in set(split.components["source"])
    assert split.budget.set_index("option").loc["2x eval samples (at best)", "samples"] == 8
