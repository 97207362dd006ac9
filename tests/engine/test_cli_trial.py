import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from harness.algorithms.presets import PRESETS
from harness.cli.app import app, main
from harness.cli.trial import parse_assignments
from harness.errors import ConfigError

TINY_SETS = [
    "task.n_train=300",
    "task.n_eval=16",
    "task.reward=partial_match",
    "model.tiny.hidden_size=32",
    "model.tiny.layers=1",
    "model.tiny.heads=2",
    "model.tiny.intermediate_size=64",
    "warmstart.steps=10",
    "train.prompts_per_step=2",
    "train.max_new_tokens=4",
    "train.eval_every=0",
    "train.eval_samples=1",
]


def harness(*args, cwd=None):
    """`harness ...` as a separate process (for a real trial run end to end)."""
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    return subprocess.run(
        [sys.executable, "-c", "from harness.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=cwd,
    )


def test_assignments_split_into_algorithm_and_nested_sections():
    algorithm, sections = parse_assignments(["eps_high=0.28", "train.steps=5", "model.tiny.layers=1", "dual_clip=null"])
    assert algorithm == {"eps_high": 0.28, "dual_clip": None}
    assert sections == {"train": {"steps": 5}, "model": {"tiny": {"layers": 1}}}
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_assignments(["eps_high"])
    with pytest.raises(ConfigError, match="unknown section 'trian'"):
        parse_assignments(["trian.steps=3"])


def run_main(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    """The console entry point in this process: (exit code, stderr)."""
    monkeypatch.setattr(sys, "argv", ["harness", *args])
    with pytest.raises(SystemExit) as exit_:
        main()
    return exit_.value.code, capsys.readouterr().err


def test_algorithms_lists_every_preset():
    out = CliRunner().invoke(app, ["algorithms", "--json"])
    assert out.exit_code == 0, out.output
    names = {p["name"] for p in json.loads(out.stdout)}
    assert names == set(PRESETS)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--algorithm", "nope"], f"unknown algorithm preset 'nope'; valid: {', '.join(sorted(PRESETS))}"),
        (["--algorithm", "grpo", "--set", "eps_hgh=0.3"], "eps_hgh"),
        (["--algorithm", "grpo", "--set", "train.stepz=3"], "train.stepz"),
        (["--algorithm", "grpo", "--set", "group_size=1"], "group_size"),
        (["--algorithm", "cispo", "--set", "kind=dpo"], "algorithm.kind comes from the preset"),
        (["--algorithm", "dpo", "--set", "eps_high=0.3"], "'eps_high' belongs to RL algorithms"),
        (["--algorithm", "grpo", "--set", "lam=0.9"], "lam is read by none of this algorithm's parts"),
        (["--algorithm", "grpo", "--task", "nope", "--steps", "1"], "unknown task 'nope'"),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_problem(args, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, err = run_main(monkeypatch, capsys, "trial", *args)
    assert code == 2, err
    assert message in err and "Traceback" not in err
    assert not any(tmp_path.iterdir()), "nothing is started or written on bad input"


@pytest.mark.slow
def test_trial_prints_final_metrics_as_json(tmp_path):
    sets = [arg for s in TINY_SETS for arg in ("--set", s)]
    out = harness("trial", "--algorithm", "rloo", "--steps", "1", "--seed", "2", "--json", *sets, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    assert payload["trial_id"].startswith("rloo-s2-")
    assert 0.0 <= payload["final"]["eval/accuracy"] <= 1.0
