"""Stopping ``harness ui`` stops everything it started: the MLflow server, uvicorn and its
workers, the job runner. Every process is checked through ``/proc``, by pid and start time, so
a pid reused by the system does not count as a survivor."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from harness.cli.process_group import run_owning_group

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc")

Process = tuple[int, int]  # (pid, start time in clock ticks since boot)


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # fields from the state on


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants(root: int) -> dict[Process, str]:
    """Every live process below ``root`` (by parent links), with its command line."""
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            table[int(entry.name)] = fields
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, fields in table.items() if int(fields[1]) in frontier} - found
        found |= frontier
    return {(pid, int(table[pid][19])): _cmdline(pid) for pid in found if table[pid][0] != "Z"}


def alive(processes) -> list[Process]:
    """Those of ``processes`` still running: same pid, same start time, not a zombie."""
    left = []
    for pid, start in processes:
        fields = _stat(pid)
        if fields is not None and fields[0] != "Z" and int(fields[19]) == start:
            left.append((pid, start))
    return left


def marked(marker: str) -> dict[Process, str]:
    """Every live process whose environment holds ``marker`` (inherited by all the server
    starts, even what it starts after the last look at its descendants)."""
    needle = f"HARNESS_UI_TEST={marker}".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:  # gone, or not ours
            continue
        fields = _stat(int(entry.name))
        if needle in environ and fields is not None and fields[0] != "Z":
            found[(int(entry.name), int(fields[19]))] = _cmdline(int(entry.name))
    return found


def kill_left(processes) -> None:
    """Clean up after a failed check, so the test leaves nothing running."""
    for pid, _ in alive(processes):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_sigterm_to_harness_ui_ends_the_server_and_every_worker(tmp_path):
    study = tmp_path / "study"
    study.mkdir()
    (study / "mlflow.db").touch()  # an empty sqlite store: MLflow creates its tables
    marker = uuid.uuid4().hex
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HARNESS_UI_TEST": marker}
    ui = subprocess.Popen(
        [sys.executable, "-c", "from harness.cli import main; main()", "ui", str(study), "--port", str(free_port())],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    seen: dict[Process, str] = {}
    try:
        deadline = time.monotonic() + 60  # all its workers start after 20-40 s on 2 cores
        # the last to start: uvicorn's workers and, where MLflow runs jobs, the job runner's huey consumers
        while not (
            "spawn_main" in (commands := " | ".join(seen.values()))
            and ("_job_runner" not in commands or "huey_consumer" in commands)
        ):
            assert ui.poll() is None, f"harness ui exited early with {ui.returncode}"
            assert time.monotonic() < deadline, f"the MLflow server did not start all its workers: {commands}"
            seen.update(descendants(ui.pid))
            time.sleep(0.2)
        assert "mlflow ui" in commands and "uvicorn" in commands, commands

        ui.send_signal(signal.SIGTERM)
        assert ui.wait(timeout=20) == 0
        survivors = alive(seen)
        assert not survivors, "still running after harness ui stopped: " + "; ".join(seen[p] for p in survivors)
        late = marked(marker)
        assert not late, "started by harness ui and still running: " + "; ".join(late.values())
    finally:
        if ui.poll() is None:
            ui.kill()
        kill_left({**seen, **marked(marker)})


#: A child that ignores SIGTERM and starts a grandchild in a session of its own: argv[1] gets
#: the grandchild's pid once both run.
STUBBORN = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
away = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
with open(sys.argv[1] + ".tmp", "w") as out:
    out.write(str(away.pid))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(60)
"""

#: The server: a plain child and the stubborn one; it writes every pid below it to argv[1],
#: then sends SIGINT to its parent (argv[2] == "stop") or exits with 3 (argv[2] == "exit").
SERVER = """
import os, signal, subprocess, sys, time
marker = sys.argv[1] + ".away"
plain = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
stubborn = subprocess.Popen([sys.executable, sys.argv[3], marker])
while not os.path.exists(marker):
    time.sleep(0.01)
with open(sys.argv[1], "w") as out:
    out.write(f"{plain.pid} {stubborn.pid} {open(marker).read()}")
if sys.argv[2] == "stop":
    os.kill(os.getppid(), signal.SIGINT)  # as if Ctrl-C reached the harness
    time.sleep(60)
sys.exit(3)
"""


@pytest.mark.parametrize("how", ["stop", "exit"])
def test_run_owning_group_ends_children_that_ignore_sigterm_or_left_the_group(tmp_path, how):
    """Stopped by SIGINT, or the server exiting on its own (exit code 3): either way nothing it
    started is left, neither the child ignoring SIGTERM nor the grandchild in a session of its
    own, and the signal handlers are as they were."""
    pids_file, stubborn = tmp_path / "pids", tmp_path / "stubborn.py"
    stubborn.write_text(STUBBORN)
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    started = time.monotonic()
    command = [sys.executable, "-c", SERVER, str(pids_file), how, str(stubborn)]
    code = run_owning_group(command, os.environ, grace_s=1.0)
    elapsed = time.monotonic() - started
    below = [int(pid) for pid in pids_file.read_text().split()]
    try:
        assert code == (0 if how == "stop" else 3)
        left = [pid for pid in below if (fields := _stat(pid)) is not None and fields[0] != "Z"]
        assert not left, f"still running: {left}"
        assert elapsed >= 1.0, "the child ignoring SIGTERM can only have gone by SIGKILL after the grace"
        assert {signum: signal.getsignal(signum) for signum in handlers} == handlers
    finally:
        for pid in below:
            if (fields := _stat(pid)) is not None and fields[0] != "Z":
                os.kill(pid, signal.SIGKILL)


def start_ui(study: Path, tracking_uri: str, stderr) -> subprocess.Popen:
    """``harness ui STUDY`` with the store given only by ``HARNESS_TRACKING_URI``, as a shared
    PostgreSQL database is."""
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HARNESS_TRACKING_URI": tracking_uri}
    return subprocess.Popen(
        [sys.executable, "-c", "from harness.cli import main; main()", "ui", str(study), "--port", str(free_port())],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )


def stop_ui(ui: subprocess.Popen, seen) -> None:
    if ui.poll() is None:
        ui.send_signal(signal.SIGTERM)
        try:
            ui.wait(timeout=20)
        except subprocess.TimeoutExpired:
            ui.kill()
    kill_left(seen)


def database_url(tmp_path: Path) -> tuple[str, str, int]:
    """(url, its password, its port): a PostgreSQL URL on a loopback port where nothing listens."""
    secret, port = f"pw{uuid.uuid4().hex}", free_port()
    return f"postgresql+psycopg://harness:{secret}@127.0.0.1:{port}/mlflow", secret, port


def test_the_tracking_password_is_on_no_command_line(tmp_path):
    """``mlflow ui --backend-store-uri postgresql+psycopg://harness:PASSWORD@...`` let any local
    user read the password with ``ps``. The store now reaches mlflow in its environment
    (``MLFLOW_BACKEND_STORE_URI``, which only its owner can read), and no command line holds it."""
    url, secret, _ = database_url(tmp_path)
    ui = start_ui(tmp_path, url, subprocess.DEVNULL)
    seen: dict[Process, str] = {}
    try:
        deadline = time.monotonic() + 60
        while not (servers := [p for p, command in seen.items() if "-m mlflow ui" in command]):
            assert ui.poll() is None, f"harness ui exited early with {ui.returncode}"
            assert time.monotonic() < deadline, f"mlflow ui did not start: {seen}"
            seen.update(descendants(ui.pid))
            time.sleep(0.02)
        commands = [_cmdline(ui.pid), *seen.values(), *descendants(ui.pid).values()]
        assert not [command for command in commands if secret in command], commands
        environ = Path(f"/proc/{servers[0][0]}/environ").read_bytes().split(b"\0")
        assert f"MLFLOW_BACKEND_STORE_URI={url}".encode() in environ
    finally:
        stop_ui(ui, seen)


@pytest.mark.slow
def test_mlflow_ui_uses_the_store_it_gets_in_its_environment(tmp_path):
    """End to end: mlflow tries the database of the URL it got in its environment (it says so on
    stderr: the connection to that port was refused), and no process that harness ui started
    ever had the password on its command line."""
    url, secret, port = database_url(tmp_path)
    log = tmp_path / "ui.err"
    with log.open("wb") as stderr:
        ui = start_ui(tmp_path, url, stderr)
    seen: dict[Process, str] = {}
    try:
        deadline = time.monotonic() + 120  # the mlflow import alone takes 10-30 s on 2 busy cores
        while f'"127.0.0.1", port {port} failed' not in log.read_text(errors="replace"):
            assert ui.poll() is None, f"harness ui exited early with {ui.returncode}: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"mlflow never tried the database: {log.read_text()[-2000:]}"
            seen.update(descendants(ui.pid))
            time.sleep(0.05)
        assert any("-m mlflow ui" in command for command in seen.values()), seen
        assert not [command for command in seen.values() if secret in command]
        assert secret not in log.read_text(errors="replace")
    finally:
        stop_ui(ui, seen)
