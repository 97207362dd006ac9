import json
import os
import subprocess
import sys

import pytest

from harness.cli.trial import parse_assignments
from harness.errors import ConfigError

TINY_SETS = [
    "task.n_train=300", "task.n_eval=16", "task.reward=partial_match", "model.tiny.hidden_size=32",
    "model.tiny.layers=1", "model.tiny.heads=2", "model.tiny.intermediate_size=64", "warmstart.steps=10",
    "train.prompts_per_step=2", "train.max_new_tokens=4", "train.eval_every=0", "train.eval_samples=1",
]


def harness(*args, cwd=None):
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    return subprocess.run(
        [sys.executable, "-c", "from harness.cli import main; main()", *args],
        capture_output=True, text=True, timeout=300, env=env, cwd=cwd,
    )


def test_assignments_split_into_algorithm_and_nested_sections():
    algorithm, sections = parse_assignments(["eps_high=0.28", "train.steps=5", "model.tiny.layers=1", "dual_clip=null"])
    assert algorithm == {"eps_high": 0.28, "dual_clip": None}
    assert sections == {"train": {"steps": 5}, "model": {"tiny": {"layers": 1}}}
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_assignments(["eps_high"])
    with pytest.raises(ConfigError, match="unknown section 'trian'"):
        parse_assignments(["trian.steps=3"])


def test_algorithms_lists_every_preset():
    out = harness("algorithms", "--json")
    assert out.returncode == 0, out.stderr
    names = {p["name"] for p in json.loads(out.stdout)}
    assert names == {"ppo", "grpo", "dr_grpo", "rloo", "reinforce_pp", "cispo", "dpo", "dapo", "gspo"}


@pytest.mark.parametrize(
    "args, message",
    [
        (["--algorithm", "nope"], "unknown algorithm preset 'nope'; valid: cispo, dapo, dpo"),
        (["--algorithm", "grpo", "--set", "eps_hgh=0.3"], "eps_hgh"),
        (["--algorithm", "grpo", "--set", "train.stepz=3"], "train.stepz"),
        (["--algorithm", "grpo", "--set", "group_size=1"], "group_size"),
        (["--algorithm", "grpo", "--task", "nope", "--steps", "1"], "unknown task 'nope'"),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_problem(args, message, tmp_path):
    out = harness("trial", *args, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and "Traceback" not in out.stderr
    assert not any(tmp_path.iterdir()), "nothing is started or written on bad input"


def test_trial_prints_final_metrics_as_json(tmp_path):
    sets = [arg for s in TINY_SETS for arg in ("--set", s)]
    out = harness("trial", "--algorithm", "rloo", "--steps", "1", "--seed", "2", "--json", *sets, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    assert payload["trial_id"].startswith("rloo-s2-")
    assert 0.0 <= payload["final"]["eval/accuracy"] <= 1.0
