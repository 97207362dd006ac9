"""Commands that train nothing start without torch, transformers or peft, and without MLflow
when they do not talk to it (``benchmarks/startup.py`` times them).

One fresh interpreter runs them all in turn through typer's ``CliRunner`` and says, after each,
which of those modules are loaded: the first command that imports one is the one named. The
study is stored in the working folder (``stored_study``) and not mirrored to MLflow, so not even
``report`` talks to it; its arms were probed here first (the probe needs torch; validate and plan
read its kept results).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from stored_study import write_records, write_study

from harness.study.load import load_study
from harness.study.noop import noop_pairs

HEAVY = ("torch", "transformers", "peft", "mlflow")
COMMANDS = [
    ["--help"],
    ["validate", "studies/small.yaml"],
    ["plan", "studies/small.yaml"],
    ["schema"],
    ["algorithms"],
    ["reward-model", "train", "--help"],
    ["status", "small"],
    ["results", "small"],
    ["report", "small", "--out", "rep"],
    ["compare", "small", "rloo", "grpo"],
    ["noise-floor", "small"],
]
SCRIPT = """
import json, sys
from typer.testing import CliRunner
from harness.cli import app
for args in json.loads(sys.argv[1]):
    result = CliRunner().invoke(app, args)
    loaded = [m for m in json.loads(sys.argv[2]) if m in sys.modules]
    print(json.dumps({"args": args, "exit": result.exit_code, "output": result.output[-2000:], "loaded": loaded}))
"""


@pytest.mark.slow
def test_commands_that_do_not_train_import_no_torch_and_no_mlflow():
    study = write_study()
    write_records(study)
    noop_pairs(load_study(study))  # keeps the probe's results in .cache/harness/probe
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(COMMANDS), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"},
    )
    assert done.returncode == 0, done.stderr
    runs = [json.loads(line) for line in done.stdout.splitlines()]
    assert [run["args"] for run in runs] == COMMANDS
    for run in runs:
        assert run["exit"] == 0, run
        assert run["loaded"] == [], f"harness {' '.join(run['args'])} imported {run['loaded']}"
