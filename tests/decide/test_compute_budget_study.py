"""A small study run end to end with the builtin trainer whose verdicts read each trial's curve
at a FLOPs budget: the report's header says so, and the values it compares are each trial's
held-out score interpolated at the budget from its history."""

from __future__ import annotations

import io

import numpy as np
import pytest
import yaml

from harness.decide.analysis import analyze
from harness.decide.comparisons import arm_scores
from harness.decide.rules import ReadOptions
from harness.report.markdown import render_markdown
from harness.runner.options import RunOptions
from harness.runner.run import run_study
from harness.tracking.results import load_results

pytestmark = pytest.mark.slow
METRIC = "eval/mean_reward"

STUDY = {
    "name": "cm",
    "control": "grpo",
    "seeds": 2,
    "min_effect": 0.1,
    "primary_metric": "eval/mean_reward",  # partial credit: a tiny model's scores vary
    "checks": {"seeds": False},
    "task": {"name": "addition", "max_digits": 2, "n_train": 300, "n_eval": 24, "reward": "partial_match"},
    "model": {"name": "tiny", "tiny": {"hidden_size": 32, "layers": 1, "heads": 2, "intermediate_size": 64}},
    "warmstart": {"steps": 20, "batch_size": 16, "lr": 3e-3},
    "train": {"steps": 4, "prompts_per_step": 4, "max_new_tokens": 4, "eval_every": 1, "eval_samples": 2},
    "arms": [
        {"name": "grpo", "algorithm": "grpo"},
        {"name": "grpo_2ep", "algorithm": "grpo", "set": {"epochs": 2}},
    ],
}


def _write(path, data) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_a_studys_verdicts_read_each_trial_at_a_flops_budget(tmp_path):
    path = tmp_path / "cm.yaml"
    _write(path, {**STUDY, "output_dir": str(tmp_path / "cm")})
    summary = run_study(path, RunOptions(workers=1, tracking=False, stream=io.StringIO(), gpus=[]))
    assert summary.exit_code == 0
    curves = load_results(path).curves
    flops = curves[curves["metric"] == "compute/flops"]
    budget = 0.6 * float(flops.groupby("trial_id")["value"].max().min())  # every trial reaches it
    point = {"point": "budget", "axis": "compute/flops", "budget": budget}
    _write(path, {**STUDY, "output_dir": str(tmp_path / "cm"), "primary_at": point})
    results = load_results(path)
    assert results.meta.primary_at == point

    for arm in ("grpo", "grpo_2ep"):
        expected = {}
        for _, mine in results.curves[results.curves["arm"] == arm].groupby("trial_id"):
            curve = mine[mine["metric"] == METRIC].set_index("step")["value"].sort_index()
            axis = mine[mine["metric"] == "compute/flops"].set_index("step")["value"].loc[curve.index]
            assert axis.is_monotonic_increasing and len(curve) == 5  # steps 0..4
            seed = int(mine["seed"].iloc[0])
            expected[seed] = np.interp(budget, axis.to_numpy(), curve.to_numpy())
        scores = arm_scores(results, arm, METRIC)
        assert scores.values.to_dict() == pytest.approx(expected)
        assert scores.table is not None and scores.table.mean(axis=1).to_numpy() == pytest.approx(
            scores.values.to_numpy()
        )

    analysis = analyze(results, ReadOptions(n_permutations=200), curve_metrics=[])
    line = analysis.header["primary_at"]
    assert line.startswith(f"{METRIC} at ") and line.endswith(" FLOPs (interpolated between evaluations)")
    assert f"- **Primary comparison:** {line}" in render_markdown(analysis)
    [verdict] = analysis.verdicts.to_dict(orient="records")
    grpo = arm_scores(results, "grpo", METRIC).values
    assert verdict["mean_control"] == pytest.approx(grpo.mean())
    assert verdict["test"] == "seed_prompt" and np.isfinite(verdict["ci_low"])
    assert not any("budget" in note for note in analysis.notes)  # every trial reached it: none left out
    assert len(set(grpo)) > 1  # the values compared are not all alike
