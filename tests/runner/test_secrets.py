"""The storage and tracking URLs (passwords) never lie where a trial's program can read them:
a worker gets them through an inherited pipe, and the runner and the worker blank them in what
/proc shows of their environment and command line; a program that reads every ancestor's
/proc/<pid>/environ and cmdline finds no password."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from harness.runner.options import RunOptions
from harness.runner.run import run_study
from harness.runner.secret_pipe import SECRETS_FD_ENV, hand_over, take_over
from harness.tracking.results import load_results

PASSWORD = "s3cret-pw"
URL = f"http://harness:{PASSWORD}@127.0.0.1:9/"
ROOT = str(Path(__file__).resolve().parents[2])

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def proc_text(pid: int, what: str) -> bytes:
    with open(f"/proc/{pid}/{what}", "rb") as fh:
        return fh.read()


def test_secrets_travel_through_the_pipe_and_only_once():
    fd, named = hand_over({"HARNESS_WORKER_TRACKING": URL})
    environ = {"PATH": "/bin", **named}
    try:
        assert take_over(environ) == {"HARNESS_WORKER_TRACKING": URL}
    finally:
        with pytest.raises(OSError):  # take_over closed it
            os.close(fd)
    assert SECRETS_FD_ENV not in environ and take_over(environ) == {}  # nothing handed over: nothing


CONCEALING_CHILD = """
import os, sys
sys.path.insert(0, sys.argv[2])
from harness.runner.secret_pipe import conceal
conceal(os.environ, ["HARNESS_TRACKING_URI", "HARNESS_WORKER_TRACKING"], [sys.argv[1]])
assert "HARNESS_TRACKING_URI" not in os.environ
print("ready", flush=True)
sys.stdin.read()
"""


@linux
def test_a_process_blanks_the_url_in_what_proc_shows_of_its_environment_and_command_line():
    """A process given the URL in its environment and on its command line (``--storage URL``)."""
    env = {**os.environ, "HARNESS_TRACKING_URI": URL, "MY_OTHER": "kept"}
    child = subprocess.Popen(
        [sys.executable, "-c", CONCEALING_CHILD, URL, ROOT],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        assert PASSWORD.encode() in URL.encode()  # what is looked for
        environ, cmdline = proc_text(child.pid, "environ"), proc_text(child.pid, "cmdline")
        assert PASSWORD.encode() not in environ and PASSWORD.encode() not in cmdline
        assert b"MY_OTHER=kept" in environ  # the rest of the environment is as it was
    finally:
        child.stdin.close()
        child.wait()
    assert child.returncode == 0


ANCESTORS = """
import json, os, sys
from pathlib import Path
trial = json.loads(Path(sys.argv[1]).read_text())
found, pid = [], os.getppid()  # every ancestor (this program's own command line names the password)
while pid > 1:
    for what in ("environ", "cmdline"):
        try:
            text = Path(f"/proc/{pid}/{what}").read_bytes()
        except OSError:
            continue
        if sys.argv[3].encode() in text:
            found.append([pid, what, Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\\0", b" ").decode()[:200]])
    pid = int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
Path(sys.argv[2]).write_text(json.dumps(found))
prompts = [json.loads(line) for line in Path(trial["eval_prompts"]).read_text().splitlines()]
rows = [{"step": step, "prompt_id": p["id"], "benchmark": p["benchmark"], "greedy": 1.0, "sampled_mean": 1.0,
         "sampled_var": 0.0, "samples": 2} for step in (0, trial["train"]["steps"]) for p in prompts]
Path(trial["scores_file"]).write_text("".join(json.dumps(r) + "\\n" for r in rows))
"""


@linux
@pytest.mark.slow
def test_a_program_finds_no_password_in_any_ancestors_environment_or_command_line(tmp_path, monkeypatch):
    program, found = tmp_path / "ancestors.py", tmp_path / "found.json"
    program.write_text(textwrap.dedent(ANCESTORS))
    monkeypatch.setenv("HARNESS_TRACKING_URI", URL)  # exported where the run starts, as a user might
    study = {
        "name": "secrets",
        "output_dir": str(tmp_path / "secrets"),
        "seeds": 1,
        "task": {"name": "addition", "max_digits": 1, "n_train": 40, "n_eval": 8},
        "model": {"name": "tiny", "tiny": {"hidden_size": 32, "layers": 1, "heads": 2, "intermediate_size": 64}},
        "warmstart": {"enabled": False},
        "train": {"steps": 1, "prompts_per_step": 2, "max_new_tokens": 3, "eval_every": 0, "eval_samples": 2},
        "trainer": {
            "kind": "command",
            "command": ["{python}", str(program), "{trial_file}", str(found), PASSWORD],
            "scores": "program",
        },
        "arms": [{"name": "prog", "algorithm": "grpo", "set": {"group_size": 2}}],
    }
    path = tmp_path / "secrets.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    stream = io.StringIO()
    # the URL reaches the worker (tracking off: nothing connects to it)
    summary = run_study(path, RunOptions(workers=1, tracking=False, tracking_uri=URL, stream=stream, gpus=[]))
    assert summary.exit_code == 0, stream.getvalue()
    assert json.loads(found.read_text()) == []  # the trial process, the forkserver, the worker, the runner
    assert set(load_results(path).trials["status"]) == {"completed"}
