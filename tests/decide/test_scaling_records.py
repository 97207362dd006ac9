"""The fitted compute curves from trial records as a study folder holds them: each record's
history (one row per evaluation, step 0 the start) becomes the curves frame that the fit reads,
with ``compute/generated_tokens`` as the axis (the compute metrics of every history row read the same way)."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from scaling_fakes import R0, TOKENS_PER_STEP

from harness.algorithms.config import RLConfig
from harness.decide.analysis import analyze
from harness.decide.rules import ReadOptions
from harness.engine.spec import TrainConfig, TrialResult, TrialSpec
from harness.report import write_analysis
from harness.stats import saturating_curve
from harness.tracking.records import make_record, write_record
from harness.tracking.results import load_results

T0 = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
CEILING = {"grpo": 0.70, "wide": 0.85}


def write_study(folder):
    for arm, eps in (("grpo", 0.2), ("wide", 0.3)):
        for seed in range(3):
            spec = TrialSpec(
                study="fitted",
                arm=arm,
                seed=seed,
                train=TrainConfig(steps=10, eval_every=1),
                algorithm=RLConfig(name="grpo", eps_high=eps),
            )
            ceiling = CEILING[arm] + 0.01 * (seed - 1)
            history = [
                {
                    "step": step,
                    "eval/accuracy": float(saturating_curve(step * TOKENS_PER_STEP, R0, ceiling, 1.5, 3000.0)),
                    "compute/generated_tokens": step * TOKENS_PER_STEP,
                }
                for step in range(11)
            ]
            result = TrialResult(
                trial_id=spec.trial_id,
                status="completed",
                final={"eval/accuracy": history[-1]["eval/accuracy"]},
                history=history,
                wall_time_s=1.0,
            )
            record = make_record(spec, result, attempt=1, phase="compare", started_at=T0, finished_at=T0, device="cpu")
            write_record(folder, record)
    return folder


def test_a_study_folder_reports_its_fitted_ceilings(tmp_path):
    results = load_results(write_study(tmp_path / "fitted"))
    # a folder of records alone: the study's keys are set as its study file would set them
    results.meta = replace(
        results.meta,
        primary_metric="eval/accuracy",
        control="grpo",
        comparisons=[("wide", "grpo")],
        min_effect=0.05,
        primary_at={"point": "final", "axis": "compute/generated_tokens", "budget": None},
    )
    analysis = analyze(results, ReadOptions(n_permutations=200))
    params = analysis.scaling.parameters.set_index("condition")
    assert abs(params.loc["grpo", "A"] - 0.70) < 1e-4
    assert abs(params.loc["wide", "A"] - 0.85) < 1e-4 and abs(params.loc["wide", "C_mid"] - 3000) < 1
    verdict = analysis.scaling.verdicts.set_index("condition").loc["wide"]
    assert (verdict["ceiling_verdict"], verdict["efficiency_verdict"]) == ("better", "equally efficient")
    write_analysis(analysis, tmp_path / "report")
    assert "Ceilings and efficiency (fitted compute curves)" in (tmp_path / "report" / "summary.md").read_text()
