"""A study with benchmarks: ``harness report`` tags the study's MLflow parent run with each
benchmark's verdicts (``verdict.<benchmark>.<condition>``) and the overall ones
(``verdict.overall.<condition>``) beside the primary ``verdict.<condition>``, with the notes of
eval-only verdicts (untested ones get theirs the same way: tests/decide/test_eval_only.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.decide.analysis import analyze
from harness.decide.rules import ReadOptions
from harness.report import MIRRORED_FILES, mirror_report, verdict_tags
from harness.tracking.mlflow_mirror import Tracker
from harness.tracking.tidy_results import TASK_SET, JudgeSettings, results_from_table

SETTINGS = JudgeSettings(name="benched", control="base", min_effect=0.05)


def table() -> pd.DataFrame:
    """0/1 scores on the task's own set and two benchmarks: ``up`` (3 runs) clearly better than
    ``base`` (3 runs) everywhere, ``single`` with one run."""
    rng = np.random.default_rng(5)
    rows = []
    for bench, prompts in ((TASK_SET, 60), ("gsm", 50), ("aime", 30)):
        q = rng.uniform(0.1, 0.6, prompts)
        for arm, runs, lift in (("base", 3, 0.0), ("up", 3, 0.35), ("single", 1, 0.0)):
            for seed in range(runs):
                solved = rng.random(prompts) < q + lift
                rows += [
                    {"benchmark": bench, "arm": arm, "seed": seed, "prompt_id": f"q{p}", "value": float(s)}
                    for p, s in enumerate(solved)
                ]
    return pd.DataFrame(rows)


def test_benchmark_and_overall_verdicts_are_tagged_with_their_notes():
    analysis = analyze(results_from_table(table(), SETTINGS), ReadOptions(n_permutations=100))
    tags = verdict_tags(analysis)
    b = analysis.benchmarks
    for name in ("gsm", "aime"):
        rows = b.verdicts[b.verdicts["benchmark"] == name].set_index("condition")
        assert tags[f"verdict.{name}.up"] == rows.loc["up", "verdict"]
        assert tags[f"verdict.{name}.single"] == rows.loc["single", "verdict"]
        assert rows.loc["single", "verdict"].endswith("(eval-only)")
        assert "conditional on these checkpoints" in tags[f"verdict_note.{name}.single"]
        assert f"verdict_note.{name}.up" not in tags  # a seed-level verdict needs no note
    overall = b.overall.set_index("condition")
    assert tags["verdict.overall.up"] == overall.loc["up", "verdict"] == "better"
    assert tags["verdict.overall.single"] == overall.loc["single", "verdict"]  # one run: eval-only as well
    assert overall.loc["single", "verdict"].endswith("(eval-only)")
    assert "conditional on these checkpoints" in tags["verdict_note.overall.single"]
    assert tags["verdict.up"] == "better" and tags["verdict.single"].endswith("(eval-only)")
    assert tags["verdict.gsm.up"] == "better"
    assert len([k for k in tags if k.startswith("verdict.")]) == 2 * 4  # primary, 2 benchmarks, overall


@pytest.mark.slow
def test_they_land_on_the_study_s_parent_run(tmp_path):
    analysis = analyze(results_from_table(table(), SETTINGS), ReadOptions(n_permutations=100))
    study_dir = tmp_path / "study"
    study_dir.mkdir()
    tracker = Tracker(None, study_dir, analysis.header["study"])
    assert tracker.prepare()
    report = tmp_path / "rep"
    report.mkdir()
    for name in MIRRORED_FILES:
        (report / name).write_text(name)
    line = mirror_report(analysis, report, study_dir)
    assert line.startswith("MLflow: report attached to the study's parent run"), line
    got = tracker.client.get_run(tracker.parent_run_id()).data.tags
    assert {k: v for k, v in got.items() if k.startswith("verdict")} == verdict_tags(analysis)
    assert got["verdict.gsm.up"] == "better" and got["verdict.overall.single"].endswith("(eval-only)")
