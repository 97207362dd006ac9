"""Every way a trial program breaks the contract fails its trial with one line, each with a
real program (a small script written here) run as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trainer_helpers import PREAMBLE, SAVE_START

from harness.engine.trial_file import check_templates
from harness.errors import ConfigError
from harness.runner.child import DEFAULT_TRIAL_FN, process_gone
from harness.runner.launch import run_trial_process
from harness.trainers.dispatch import run_trial
from harness.trainers.faults import ProgramTrialError
from harness.trainers.trial_dir import TRIAL_DIR_ENV, fresh_trial_dir


def in_trial_process(spec, tmp_path: Path, timeout_s: float | None = None):
    """Run ``spec`` as a worker does: in a trial process of its own, with the default trial function."""
    return run_trial_process(
        spec.model_dump_json(),
        trial_fn=DEFAULT_TRIAL_FN,
        work_dir=tmp_path / "tmp",
        log_path=tmp_path / "logs" / "trial.log",
        stem="trial",
        timeout_s=timeout_s,
        kill_grace_s=2.0,
    )


def failure(spec) -> str:
    with pytest.raises(ProgramTrialError) as caught:
        run_trial(spec)
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.slow
def test_a_program_that_exits_non_zero_fails_with_the_tail_of_its_log(program_spec, script, tmp_path):
    command = script(
        PREAMBLE + "print('loading the data'); print('boom: no such dataset', file=sys.stderr); sys.exit(3)"
    )
    outcome = in_trial_process(program_spec(command), tmp_path)
    assert outcome.result is None
    assert outcome.reason.startswith("ProgramTrialError: the trainer's program exited with code 3")
    assert "boom: no such dataset" in outcome.reason
    assert "boom: no such dataset" in (tmp_path / "logs" / "trial.log").read_text()  # its output is in the log


#: a program's line starting a child that leaves the trial's group and session (a daemon's way)
DETACHED = 'subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)'


@pytest.mark.slow
def test_a_program_past_the_timeout_is_ended_with_everything_it_started(program_spec, script, tmp_path):
    pids = tmp_path / "pids.json"
    command = script(
        PREAMBLE
        + f"""
import subprocess, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
detached = {DETACHED}
Path({str(pids)!r}).write_text(json.dumps([os.getpid(), child.pid, detached.pid]))
time.sleep(600)
"""
    )
    spec = program_spec(command, warmstart={"enabled": False})  # the program starts within seconds
    outcome = in_trial_process(spec, tmp_path, timeout_s=15)
    assert outcome.result is None and outcome.reason.startswith("timeout")
    program, grandchild, detached = json.loads(pids.read_text())
    assert process_gone(program) and process_gone(grandchild)
    assert process_gone(detached)  # in a session of its own, out of reach of the group's kill


@pytest.mark.slow
def test_what_a_program_leaves_running_is_ended_with_it(program_spec, script, tmp_path):
    pids = tmp_path / "pids.json"
    body = (
        SAVE_START
        + f"""
import subprocess
server = subprocess.Popen([sys.executable, "-c", "import time; print('serving', flush=True); time.sleep(600)"])
daemon = subprocess.Popen(
    [sys.executable, "-c", {"import subprocess, sys; print(" + DETACHED + ".pid, flush=True)"!r}],
    stdout=subprocess.PIPE, text=True,
)  # starts a detached child and exits: the child is an orphan in a session of its own
detached = int(daemon.stdout.readline()); daemon.wait()
Path({str(pids)!r}).write_text(json.dumps([server.pid, detached]))
model.save_pretrained(trial["checkpoint_dir"])
"""
    )
    outcome = in_trial_process(program_spec(script(body), warmstart={"enabled": False}), tmp_path, timeout_s=120)
    assert outcome.result is not None, outcome.reason
    server, detached = json.loads(pids.read_text())
    assert process_gone(server)
    assert process_gone(detached)  # docs/trainers.md: what the program leaves running ends with the trial


def test_a_program_that_cannot_start_fails_with_its_name(program_spec):
    assert "'/no/such/trainer' cannot start" in failure(program_spec(["/no/such/trainer", "{trial_file}"]))


def test_a_program_that_writes_no_checkpoint_fails(program_spec, script):
    assert "wrote no checkpoint" in failure(program_spec(script(PREAMBLE + "print('done')")))


def test_a_checkpoint_that_does_not_load_fails(program_spec, script):
    body = (
        PREAMBLE
        + """
folder = Path(trial["checkpoint_dir"]); folder.mkdir()
(folder / "config.json").write_text("{not json")
"""
    )
    assert "does not load" in failure(program_spec(script(body)))


@pytest.mark.slow
def test_a_checkpoint_with_another_vocabulary_fails(program_spec, script):
    body = (
        SAVE_START
        + """
model.resize_token_embeddings(model.get_input_embeddings().weight.shape[0] + 7)
model.save_pretrained(trial["checkpoint_dir"])
"""
    )
    message = failure(program_spec(script(body)))
    assert "token ids" in message and "model.start" in message


SCORES = (
    PREAMBLE
    + """
mode = sys.argv[2]
prompts = [json.loads(line) for line in Path(trial["eval_prompts"]).read_text().splitlines()]
rows = []
for step in (0, trial["train"]["steps"]):
    for p in prompts:
        rows.append({"step": step, "prompt_id": p["id"], "benchmark": p["benchmark"], "greedy": 1.0,
                     "sampled_mean": 0.5, "sampled_var": 0.25, "samples": 2})
if mode == "missing":
    rows.pop()
elif mode == "repeated":
    rows.append(rows[0])
elif mode == "out_of_range":
    rows[1]["greedy"] = 1.5
Path(trial["scores_file"]).write_text("".join(json.dumps(r) + "\\n" for r in rows))
with open(trial["metrics_file"], "w") as fh:
    fh.write(json.dumps({"step": 1, "train/reward_mean": 0.3, "compute/gpus": 2, "compute/wall_s": 5}) + "\\n")
"""
)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("missing", "lacks 1 of the"), ("repeated", "repeats at step 0"), ("out_of_range", "outside [0, 1]")],
)
def test_handed_in_scores_must_cover_every_prompt_once_in_range(program_spec, script, mode, expected):
    command = [*script(SCORES), mode]
    assert expected in failure(program_spec(command, trainer={"scores": "program"}))


def test_handed_in_scores_that_keep_the_contract_are_the_trials_evaluations(program_spec, script):
    spec = program_spec([*script(SCORES), "valid"], trainer={"scores": "program"})
    result = run_trial(spec)
    assert [p.step for p in result.prompts] == [0, spec.train.steps]
    assert result.final["eval/accuracy"] == 1.0 and result.final["eval/mean_reward"] == 0.5
    assert result.final["compute/gpus"] == 2 and result.final["train/reward_mean"] == 0.3
    assert [row["step"] for row in result.history] == [0, 1, 2]
    assert result.history[2]["compute/wall_s"] == 5  # the latest compute totals carried onto the evaluation


def test_a_template_naming_no_field_is_refused_before_anything_runs(program_spec, script, tmp_path):
    spec = program_spec([*script(PREAMBLE), "--lr", "{algorithm.learning_rate}"])
    with pytest.raises(ConfigError) as caught:
        check_templates(spec)
    assert "{algorithm.learning_rate}" in str(caught.value) and "lr" in str(caught.value)
    with pytest.raises(ConfigError, match="valid top-level fields: contract, trial_id"):
        check_templates(program_spec([*script(PREAMBLE), "{out_dir}"]))


@pytest.mark.slow
def test_the_program_never_sees_the_storage_password(program_spec, script, monkeypatch, tmp_path):
    secret = "postgresql://harness:s3cret-pw@db.example/harness"
    monkeypatch.setenv("HARNESS_STORAGE", secret)
    monkeypatch.setenv("HARNESS_WORKER_STORAGE", secret)
    monkeypatch.setenv("HARNESS_WORKER_TRACKING", "http://user:s3cret-pw@mlflow.example")
    monkeypatch.setenv(TRIAL_DIR_ENV, str(tmp_path / "trial"))
    body = (
        SAVE_START
        + """
Path(trial["output_dir"], "env.json").write_text(json.dumps(dict(os.environ)))
Path(trial["output_dir"], "argv.json").write_text(json.dumps(sys.argv))
model.save_pretrained(trial["checkpoint_dir"])
"""
    )
    spec = program_spec(script(body), trainer={"env": {"MY_LR": "{algorithm.lr}"}})
    run_trial(spec)
    env = json.loads((tmp_path / "trial" / "env.json").read_text())
    assert not [name for name, value in env.items() if "s3cret" in value]
    assert "s3cret" not in (tmp_path / "trial" / "trial.json").read_text()
    assert env["HARNESS_TRIAL_FILE"] == str(tmp_path / "trial" / "trial.json")
    assert env["HARNESS_SEED"] == "0" and env["HARNESS_ARM"] == spec.arm and env["MY_LR"] == str(spec.algorithm.lr)
    assert {"HARNESS_CHECKPOINT_DIR", "HARNESS_METRICS_FILE", "HARNESS_SCORES_FILE", "CUDA_VISIBLE_DEVICES"} <= set(env)
    assert os.environ["HARNESS_STORAGE"] == secret  # the trial process's own environment is left as it was


def test_a_trial_folder_is_emptied_only_when_it_is_a_trials(monkeypatch, tmp_path):
    mine = tmp_path / "mine"
    monkeypatch.setenv(TRIAL_DIR_ENV, str(mine))
    (fresh_trial_dir("t") / "checkpoint").mkdir()  # an earlier attempt's leftovers
    assert [p.name for p in fresh_trial_dir("t").iterdir()] == [".harness-trial"]
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("keep me")
    monkeypatch.setenv(TRIAL_DIR_ENV, str(theirs))
    with pytest.raises(ProgramTrialError, match="is left as it is"):
        fresh_trial_dir("t")
    assert (theirs / "notes.txt").read_text() == "keep me"


@pytest.mark.slow
def test_a_program_is_ended_when_its_worker_is_killed(program_spec, script, tmp_path):
    """A worker killed with SIGKILL takes its trial's program along (the trial process ends its
    whole group when it sees the worker gone), so nothing keeps a GPU busy for a dead worker."""
    pids = tmp_path / "pids.json"
    command = script(
        PREAMBLE
        + f"import subprocess, time\ndetached = {DETACHED}\n"
        + f"Path({str(pids)!r}).write_text(json.dumps([os.getpid(), detached.pid]))\ntime.sleep(600)"
    )
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(program_spec(command, warmstart={"enabled": False}).model_dump_json())
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from harness.runner.launch import run_trial_process;"
            "from harness.runner.child import DEFAULT_TRIAL_FN;"
            "run_trial_process(Path(sys.argv[1]).read_text(), trial_fn=DEFAULT_TRIAL_FN, work_dir=Path(sys.argv[2]),"
            " log_path=Path(sys.argv[3]), stem='trial', timeout_s=300, kill_grace_s=2.0)",
            str(spec_file),
            str(tmp_path / "tmp"),
            str(tmp_path / "trial.log"),
        ],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    deadline = time.monotonic() + 120
    while not pids.exists() and time.monotonic() < deadline and worker.poll() is None:
        time.sleep(0.2)
    assert pids.exists(), (tmp_path / "trial.log").read_text() if (tmp_path / "trial.log").exists() else "no log"
    program, detached = json.loads(pids.read_text())
    worker.kill()
    worker.wait()
    deadline = time.monotonic() + 10
    while not (process_gone(program) and process_gone(detached)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert process_gone(program) and process_gone(detached)
