"""The server's life, with a stand-in for vLLM: a few lines of Python served as the module
``vllm.entrypoints.openai.api_server`` that, like vLLM, leaves a child process of its own (vLLM's
engine core) behind when it alone is killed. Each way the server can fail is the typed error
named in one line, and nothing of its process group survives: not after ``stop``, not after a
failed start, not after the server died, not after kill -9 of the process that started it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.engine.vllm.errors import VllmDiedError, VllmStartError
from harness.engine.vllm.server import VllmServer

#: the stand-in: its behaviour is the word in <model folder>/mode; it writes its child's pid into
#: <model folder>/child.pid before it serves /health
FAKE_SERVER = textwrap.dedent(
    """
    import os, subprocess, sys, time
    from http.server import BaseHTTPRequestHandler, HTTPServer
    args = sys.argv[1:]
    folder, port = args[args.index("--model") + 1], int(args[args.index("--port") + 1])
    mode = open(os.path.join(folder, "mode")).read().strip()
    if mode == "exit-at-once":
        print("fake vLLM: cannot load the model", file=sys.stderr)
        sys.exit(3)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    open(os.path.join(folder, "child.pid"), "w").write(str(child.pid))
    if mode == "never-ready":
        time.sleep(3600)
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
        def do_POST(self):
            print("fake vLLM: engine core died", file=sys.stderr, flush=True)
            os._exit(7)
        def log_message(self, *a):
            pass
    HTTPServer(("127.0.0.1", port), Handler).serve_forever()
    """
)

#: a trial's process: starts the server, says its process group, then waits to be killed
TRIAL = textwrap.dedent(
    """
    import sys, time
    from harness.engine.vllm.server import VllmServer
    python, folder, log = sys.argv[1:4]
    server = VllmServer(python, folder, log_path=log, start_timeout_s=float(sys.argv[4]))
    server.start()
    print(server.process.pid, flush=True)
    time.sleep(3600)
    """
)


#: a trial's process that says its server's process group as soon as it exists (from a thread:
#: the main thread starts the server, as a trial does, and waits in ``start``)
STARTING_TRIAL = textwrap.dedent(
    """
    import sys, threading, time
    from harness.engine.vllm.server import VllmServer
    python, folder, log = sys.argv[1:4]
    server = VllmServer(python, folder, log_path=log, start_timeout_s=float(sys.argv[4]))
    def say_group():
        while server.pgid is None:
            time.sleep(0.05)
        print(server.pgid, flush=True)
    threading.Thread(target=say_group, daemon=True).start()
    server.start()
    time.sleep(3600)
    """
)


@pytest.fixture
def fake_python(tmp_path) -> str:
    """A "Python" whose ``-m vllm.entrypoints.openai.api_server`` is the stand-in."""
    package = tmp_path / "fake" / "vllm" / "entrypoints" / "openai"
    package.mkdir(parents=True)
    for level in [package, *list(package.parents)[:3]]:
        (level / "__init__.py").touch()
    (package / "api_server.py").write_text(FAKE_SERVER)
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={tmp_path / "fake"} exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def model(tmp_path: Path, mode: str) -> Path:
    folder = tmp_path / mode
    folder.mkdir()
    (folder / "mode").write_text(mode)
    return folder


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_gone(pgid: int, child_pid: int | None, deadline_s: float = 60.0) -> None:
    """Polls until the group is empty and the child is gone; fails with who is left at the deadline."""
    end = time.monotonic() + deadline_s
    while group_members(pgid) or (child_pid is not None and alive(child_pid)):
        if time.monotonic() > end:
            pytest.fail(f"left running: group {pgid}: {group_members(pgid)}, child {child_pid}: {alive(child_pid)}")
        time.sleep(0.1)


def child_pid(folder: Path) -> int:
    return int((folder / "child.pid").read_text())


def test_stop_ends_the_whole_process_group(fake_python, tmp_path):
    folder = model(tmp_path, "serve")
    with VllmServer(fake_python, folder, log_path=tmp_path / "log" / "vllm.log") as server:
        assert server.client(vocab_size=10).healthy()
        pgid, child = server.pgid, child_pid(folder)
        assert alive(child) and child in group_members(pgid)
    assert server.process is None
    wait_gone(pgid, child)


def test_a_server_that_exits_at_start_is_a_start_error_naming_its_code_and_log(fake_python, tmp_path):
    server = VllmServer(fake_python, model(tmp_path, "exit-at-once"), log_path=tmp_path / "vllm.log")
    with pytest.raises(VllmStartError) as caught:
        server.start()
    message = str(caught.value)
    assert "stopped before it was ready" in message and "vLLM server exited with code 3" in message
    assert "cannot load the model" in message
    assert str(tmp_path / "vllm.log") in message
    assert "\n" not in message and server.process is None


def test_a_server_that_never_answers_is_a_start_error_and_is_ended(fake_python, tmp_path):
    folder = model(tmp_path, "never-ready")
    server = VllmServer(fake_python, folder, log_path=tmp_path / "vllm.log", start_timeout_s=1.0, stop_grace_s=1.0)
    with pytest.raises(VllmStartError, match=r"did not answer /health within 1 s"):
        server.start()
    assert server.process is None
    # the stand-in may have been ended before it wrote its child's pid: then there is no child to look for
    wait_gone(server.pgid, child_pid(folder) if (folder / "child.pid").exists() else None)


def test_a_server_that_dies_mid_trial_is_a_died_error_and_leaves_nothing(fake_python, tmp_path):
    folder = model(tmp_path, "serve")
    with VllmServer(fake_python, folder, log_path=tmp_path / "vllm.log") as server:
        pgid, child = server.pgid, child_pid(folder)
        with pytest.raises(VllmDiedError) as caught:
            server.client(vocab_size=10).complete([[1]], n=1, max_tokens=2, temperature=1.0, model="base")
        assert "engine core died" in str(caught.value) and "exited with code 7" in str(caught.value)
        wait_gone(pgid, child)  # the watchdog ended the group on its own


def test_kill_9_of_the_trial_leaves_no_server_behind(fake_python, tmp_path):
    folder = model(tmp_path, "serve")
    trial = subprocess.Popen(
        [sys.executable, "-c", TRIAL, fake_python, str(folder), str(tmp_path / "vllm.log"), "60"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )
    pgid = int(trial.stdout.readline())
    child = child_pid(folder)
    assert alive(child) and pgid in group_members(pgid)
    trial.send_signal(signal.SIGKILL)
    trial.wait()
    wait_gone(pgid, child)


@pytest.mark.slow
def test_kill_9_of_the_trial_leaves_no_real_vllm_process_behind(vllm_env, smollm2, tmp_path):
    """The same with the real server, killed once vLLM's engine core runs (the process that
    outlives its API server): the API server, its engine core and its workers all go."""
    trial = subprocess.Popen(
        [sys.executable, "-c", STARTING_TRIAL, vllm_env, smollm2.folder, str(tmp_path / "vllm.log"), "600"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )
    try:
        pgid = int(trial.stdout.readline())
        end = time.monotonic() + 600
        while not any("EngineCore" in command_line(pid) for pid in group_members(pgid)):
            assert trial.poll() is None and time.monotonic() < end, "the engine core never started"
            time.sleep(0.2)
    finally:
        trial.send_signal(signal.SIGKILL)
        trial.wait()
    wait_gone(pgid, None)


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.slow
def test_a_real_server_that_cannot_load_its_model_is_a_start_error(vllm_env, tmp_path):
    (tmp_path / "not-a-model").mkdir()
    server = VllmServer(vllm_env, tmp_path / "not-a-model", log_path=tmp_path / "vllm.log")
    with pytest.raises(
        VllmStartError, match=r"stopped before it was ready .*vLLM server exited with code [1-9]"
    ) as caught:
        server.start()
    assert "\n" not in str(caught.value)
    wait_gone(server.pgid, None)
