"""``harness reward-model train`` and a study that trains on its model: the output, the cache, the
MLflow run, the one-line errors, and ``harness validate`` before and after the model is built."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cli_main import run_main

from harness.tracking.mlflow_mirror import TrackingWarning

REPO = Path(__file__).resolve().parents[2]
TINY = [
    "--set",
    "model.tiny.hidden_size=32",
    "--set",
    "model.tiny.layers=1",
    "--set",
    "model.tiny.heads=2",
    "--set",
    "model.tiny.intermediate_size=64",
    "--set",
    "model.device=cpu",
]
FAST = ["--steps", "20", "--lr", "3e-3"]


def parity_file(path: Path, n: int = 120) -> Path:
    rng = random.Random(0)
    lines = []
    for _ in range(n):
        a, b = rng.randrange(100), rng.randrange(100)
        lines.append(
            json.dumps(
                {
                    "prompt": f"{a:02d}+{b:02d}=",
                    "chosen": f"{rng.randrange(50) * 2:03d}",
                    "rejected": f"{rng.randrange(50) * 2 + 1:03d}",
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def mlflow_runs() -> list:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{Path('runs/reward_models/mlflow.db').resolve()}")
    experiment = client.get_experiment_by_name("reward-models")
    return client.search_runs([experiment.experiment_id]) if experiment else []


@pytest.mark.slow  # creating the MLflow store takes ~10 s
def test_train_prints_the_id_and_metrics_caches_and_records_one_mlflow_run(monkeypatch, capsys):
    pairs = parity_file(Path("pairs.jsonl"))
    code, out, err = run_main(
        monkeypatch, capsys, "reward-model", "train", "--pairs", str(pairs), "--base", "model", *TINY, *FAST
    )
    assert code == 0, err
    first = out.splitlines()[0]
    assert first.startswith("reward model rm-") and "trained in" in first
    rm_id = first.split()[2]
    assert f"folder: .cache/harness/reward_models/{rm_id[3:]}" in out
    assert "heldout/accuracy" in out and "heldout/ece" in out and "heldout/brier" in out
    assert f"task: {{reward: {{model: {rm_id}}}}}" in out
    (run,) = mlflow_runs()
    assert run.data.tags["harness.reward_model"] == rm_id and "heldout/accuracy" in run.data.metrics
    assert run.data.params["training.steps"] == "20"

    code, out, _ = run_main(
        monkeypatch, capsys, "reward-model", "train", "--pairs", str(pairs), "--base", "model", *TINY, *FAST, "--json"
    )
    payload = json.loads(out)
    assert code == 0 and payload["cached"] and payload["id"] == rm_id
    assert payload["metrics"]["heldout/accuracy"] > 0.5 and payload["mlflow_run_id"] == run.info.run_id
    assert len(mlflow_runs()) == 1  # the same model is recorded once


def test_an_mlflow_failure_only_warns(monkeypatch, capsys):
    pairs = parity_file(Path("pairs.jsonl"), 40)
    with pytest.warns(TrackingWarning, match="failed for reward model rm-"):
        code, out, _ = run_main(
            monkeypatch,
            capsys,
            "reward-model",
            "train",
            "--pairs",
            str(pairs),
            "--base",
            "model",
            *TINY,
            "--steps",
            "2",
            "--tracking-uri",
            "http://127.0.0.1:9",
        )
    assert code == 0 and out.startswith("reward model rm-") and "MLflow: run" not in out


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "give the pairs as --pairs FILE.jsonl or build them with --from-verifier"),
        (["--pairs", "pairs.jsonl", "--from-verifier"], "(one of the two)"),
        (["--pairs", "pairs.jsonl", "--label-noise", "0.1"], "--label-noise applies to --from-verifier pairs"),
        (["--from-verifier", "--label-noise", "0.7"], "--label-noise: Input should be less than or equal to 0.5"),
        (["--pairs", "pairs.jsonl", "--held-out", "1.5"], "--held-out: Input should be less than 1"),
        (["--pairs", "pairs.jsonl", "--set", "lr=1"], "--set lr: give SECTION.KEY=VALUE"),
        (["--pairs", "pairs.jsonl", "--set", "task.nme=x"], "task.nme: unknown key"),
        (["--pairs", "bad.jsonl"], "bad.jsonl:2: missing field rejected"),
        (["--pairs", "same.jsonl"], "same.jsonl:1: chosen and rejected are identical"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(monkeypatch, capsys, args, message):
    parity_file(Path("pairs.jsonl"), 10)
    Path("bad.jsonl").write_text('{"prompt": "a", "chosen": "b", "rejected": "c"}\n{"prompt": "a", "chosen": "b"}\n')
    Path("same.jsonl").write_text('{"prompt": "a", "chosen": "b", "rejected": "b"}\n')
    code, out, err = run_main(monkeypatch, capsys, "reward-model", "train", "--base", "model", *TINY, *args)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not Path(".cache/harness/reward_models").exists() or not any(Path(".cache/harness/reward_models").iterdir())


STUDY = {
    "name": "rm_study",
    "control": "ppo",
    "seeds": 3,
    "task": {"name": "addition", "n_train": 300, "n_eval": 24},
    "model": {
        "name": "tiny",
        "tiny": {"hidden_size": 32, "layers": 1, "heads": 2, "intermediate_size": 64},
        "dtype": "float32",
        "device": "cpu",
    },
    "warmstart": {"steps": 20, "batch_size": 16, "lr": 3e-3},
    "train": {"steps": 2, "prompts_per_step": 4, "max_new_tokens": 4, "eval_every": 0, "eval_samples": 2},
    "arms": [{"name": "ppo", "algorithm": "ppo"}, {"name": "grpo", "algorithm": "grpo"}],
}


@pytest.mark.slow
def test_a_study_names_the_model_the_command_built(monkeypatch, capsys):
    """validate says how to build a missing model; the command run with the study prints the id
    to name; then the study validates, and ``harness validate`` stays torch-free."""
    monkeypatch.setattr("harness.tracking.reward_model_runs.log_reward_model", lambda *a, **k: None)  # tested above
    study = Path("rm_study.yaml")
    reward = {"model": "rm-0000000000000000", "verifier": "partial_match"}  # dense: mixed groups at once
    study.write_text(yaml.safe_dump({**STUDY, "task": {**STUDY["task"], "reward": reward}}))
    code, _, err = run_main(monkeypatch, capsys, "validate", str(study))
    assert code == 2 and "no such reward model" in err and "harness reward-model train --study" in err
    assert err.count("\n") == 1

    code, out, err = run_main(
        monkeypatch,
        capsys,
        "reward-model",
        "train",
        "--study",
        str(study),
        "--from-verifier",
        "--label-noise",
        "0.2",
        "--prompts",
        "60",
        "--samples-per-prompt",
        "4",
        *FAST,
    )
    assert code == 0, err
    rm_id = out.split()[2]
    assert (
        f"note: {study} trains on reward model rm-0000000000000000; to train on this one set "
        f"task.reward.model: {rm_id}" in out
    )
    assert "heldout/accuracy_gold" in out and "pairs/flipped_share" in out
    data = yaml.safe_load(study.read_text())
    data["task"]["reward"]["model"] = rm_id
    study.write_text(yaml.safe_dump(data))

    # the id is a content hash of what the study trains: the same command gives the same model
    code, out, _ = run_main(
        monkeypatch,
        capsys,
        "reward-model",
        "train",
        "--study",
        str(study),
        "--from-verifier",
        "--label-noise",
        "0.2",
        "--prompts",
        "60",
        "--samples-per-prompt",
        "4",
        *FAST,
    )
    assert code == 0 and out.startswith(f"reward model {rm_id} (cached: loaded, nothing trained)")
    assert "note:" not in out

    script = (
        "import sys\nfrom typer.testing import CliRunner\nfrom harness.cli import app\n"
        f"r = CliRunner().invoke(app, ['validate', {str(study)!r}])\n"
        "print(r.exit_code, sorted(m for m in ('torch', 'transformers', 'mlflow') if m in sys.modules))\n"
        f"r = CliRunner().invoke(app, ['plan', {str(study)!r}])\n"
        "print(r.exit_code, sorted(m for m in ('torch', 'transformers', 'mlflow') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["0 []", "0 []"], done.stdout


def test_the_shipped_rlhf_study_validates_on_a_fresh_checkout(monkeypatch, capsys):
    """It says how its reward model is trained, so validate needs no model built (in a folder
    without any cache, as on a fresh checkout) and builds none."""
    code, out, err = run_main(monkeypatch, capsys, "validate", str(REPO / "studies" / "rlhf_reward_model.yaml"))
    assert code == 0, err
    assert out.startswith(f"ok: {REPO / 'studies' / 'rlhf_reward_model.yaml'}")
    assert not Path(".cache/harness/reward_models").exists()


RECIPE = {"steps": 10, "lr": 3e-3, "from_verifier": {"prompts": 60, "samples_per_prompt": 4, "label_noise": 0.2}}


def recipe_study(path: Path, **extra) -> Path:
    """A two-trial study (one arm, two seeds; 2 RL steps) that says how its reward model is trained."""
    reward = {"train": RECIPE, "verifier": "partial_match"}  # dense: mixed groups at once
    path.write_text(
        yaml.safe_dump(
            {**STUDY, "seeds": 2, "arms": STUDY["arms"][:1], **extra, "task": {**STUDY["task"], "reward": reward}}
        )
    )
    return path


@pytest.mark.slow  # two trial processes and a study database: ~20 s
def test_a_study_naming_how_its_reward_model_is_trained_validates_and_runs_building_it_once(monkeypatch, capsys):
    """validate checks the recipe and builds nothing; ``harness run`` with two workers starts two
    trials at once (no seed check to build it first): one builds the reward model under the
    cache's lock, the other waits, then loads it; every trial trains on it."""
    study = recipe_study(Path("rm_recipe.yaml"), checks={"seeds": False})
    code, out, err = run_main(monkeypatch, capsys, "validate", str(study))
    assert code == 0, err
    assert not Path(".cache").exists()

    code, out, err = run_main(monkeypatch, capsys, "run", str(study), "--workers", "2", "--no-tracking")
    assert code == 0, out + err
    logs = [p.read_text() for p in sorted(Path("runs/rm_study/logs").glob("*.log"))]
    assert len(logs) == 2
    assert sum(log.count("reward model: building .cache/harness/reward_models/") for log in logs) == 1
    assert sum(log.count("reward model: using the cached reward model") for log in logs) == 1
    folders = [p for p in Path(".cache/harness/reward_models").iterdir() if p.is_dir()]
    assert len(folders) == 1
    from harness.tracking.records import read_records

    records = read_records(Path("runs/rm_study"))
    assert len(records) == 2 and all(r.status == "completed" and "train/reward_proxy" in r.final for r in records)

    # the command builds the same model: it finds the trials' entry, and says that they train on it
    monkeypatch.setattr("harness.tracking.reward_model_runs.log_reward_model", lambda *a, **k: None)
    code, out, err = run_main(monkeypatch, capsys, "reward-model", "train", "--study", str(study))
    assert code == 0, err
    assert out.startswith(f"reward model rm-{folders[0].name} (cached: loaded, nothing trained)")
    assert f"{study}'s trials train on this model (its task.reward.train): they load it from the cache" in out


def test_the_command_on_a_recipe_study_takes_no_other_settings(monkeypatch, capsys):
    study = recipe_study(Path("rm_recipe.yaml"))
    code, out, err = run_main(monkeypatch, capsys, "reward-model", "train", "--study", str(study), "--steps", "3")
    assert code == 2 and out == ""
    assert err == (
        f"error: --steps: {study} says how its reward model is trained (task.reward.train); change it "
        "there, or give --pairs or --from-verifier to train another\n"
    )
