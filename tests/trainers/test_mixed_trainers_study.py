"""A study mixing the builtin trainer, the TRL adapter and a command arm (docs/trainers/plain_loop.py)
runs end to end through the real runner: every arm's trials complete, judged alike, the programs'
metrics reach the curves and the trial's MLflow run, and the study reports and decides."""

from __future__ import annotations

import io

import mlflow
import pytest
import yaml
from trainer_helpers import PLAIN_LOOP

from harness.decide.analysis import analyze
from harness.decide.rules import ReadOptions
from harness.report.markdown import render_markdown
from harness.runner.options import RunOptions
from harness.runner.run import run_study
from harness.tracking.mlflow_mirror import default_tracking_uri
from harness.tracking.results import load_results

pytestmark = pytest.mark.slow
SEEDS = 2


def test_a_study_with_builtin_trl_and_command_arms_runs_reports_and_decides(tmp_path):
    out = tmp_path / "mixed"
    plain_loop = {"kind": "command", "command": ["{python}", str(PLAIN_LOOP), "{trial_file}"]}
    study = {
        "name": "mixed",
        "output_dir": str(out),
        "control": "builtin",
        "seeds": SEEDS,
        "min_effect": 0.1,
        "primary_metric": "eval/mean_reward",
        "checks": {"seeds": False},
        "task": {"name": "addition", "max_digits": 1, "n_train": 60, "n_eval": 12, "reward": "partial_match"},
        "model": {"name": "tiny", "tiny": {"hidden_size": 32, "layers": 1, "heads": 2, "intermediate_size": 64}},
        "warmstart": {"steps": 20, "batch_size": 16, "lr": 3e-3},
        "train": {"steps": 2, "prompts_per_step": 2, "max_new_tokens": 3, "eval_every": 1, "eval_samples": 2},
        "arms": [
            {"name": "builtin", "algorithm": "grpo", "set": {"group_size": 2}},
            {"name": "plain", "algorithm": "grpo", "set": {"group_size": 2}, "trainer": plain_loop},
            {"name": "trl", "algorithm": "grpo", "set": {"group_size": 2}, "trainer": "trl"},
        ],
    }
    path = tmp_path / "mixed.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    stream = io.StringIO()
    summary = run_study(path, RunOptions(workers=1, tracking=True, stream=stream, gpus=[]))
    assert summary.exit_code == 0, stream.getvalue()

    results = load_results(path)
    trials = results.trials
    assert sorted(trials["arm"]) == ["builtin"] * SEEDS + ["plain"] * SEEDS + ["trl"] * SEEDS
    assert set(trials["status"]) == {"completed"}
    plain = results.curves[results.curves["arm"] == "plain"]
    programs = results.curves[results.curves["arm"].isin(["plain", "trl"])]
    for _, curve in programs.groupby("trial_id"):
        reward = curve[curve["metric"] == "train/reward_mean"]
        accuracy = curve[curve["metric"] == "eval/accuracy"]
        assert sorted(reward["step"]) == [1, 2]  # the program's own metrics, by step
        assert sorted(accuracy["step"]) == [0, 1, 2]  # the judge: the start, step-1 and the final checkpoint

    trial_id = plain["trial_id"].iloc[0]
    mlflow.set_tracking_uri(default_tracking_uri(out))
    [run] = mlflow.search_runs(
        search_all_experiments=True, filter_string=f"tags.trial_id = '{trial_id}'", output_format="list"
    )
    assert len(mlflow.MlflowClient().get_metric_history(run.info.run_id, "train/reward_mean")) == 2

    analysis = analyze(results, ReadOptions(n_permutations=100), curve_metrics=[])
    verdicts = {row["condition"]: row for row in analysis.verdicts.to_dict(orient="records")}
    assert sorted(verdicts) == ["plain", "trl"]
    assert {row["test"] for row in verdicts.values()} == {"seed_prompt"}
    report = render_markdown(analysis)
    assert "| trainer.kind |" in report and "trl" in report


def test_a_failing_program_is_a_failed_trial_with_its_reason_and_nothing_complete(tmp_path):
    program = tmp_path / "broken.py"
    program.write_text("import sys\nprint('CUDA out of memory', file=sys.stderr)\nsys.exit(3)\n")
    study = {
        "name": "broken",
        "output_dir": str(tmp_path / "broken"),
        "seeds": 1,
        "task": {"name": "addition", "max_digits": 1, "n_train": 40, "n_eval": 8},
        "model": {"name": "tiny", "tiny": {"hidden_size": 32, "layers": 1, "heads": 2, "intermediate_size": 64}},
        "warmstart": {"enabled": False},
        "train": {"steps": 1, "prompts_per_step": 2, "max_new_tokens": 3, "eval_every": 0, "eval_samples": 2},
        "trainer": {"kind": "command", "command": ["{python}", str(program), "{trial_file}"]},
        "arms": [{"name": "prog", "algorithm": "grpo", "set": {"group_size": 2}}],
    }
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    stream = io.StringIO()
    summary = run_study(path, RunOptions(workers=1, tracking=False, stream=stream, gpus=[], retries=1))
    assert summary.exit_code == 1
    assert "seed check: skipped" in stream.getvalue()  # the control is a program: no engine sampler to check
    [trial] = load_results(path, phase=None).trials.to_dict(orient="records")
    assert trial["status"] == "failed"
    assert "exited with code 3: CUDA out of memory" in trial["error"]
