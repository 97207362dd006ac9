"""Real components for the fault tests: a PostgreSQL server and an MLflow tracking server.

Both run on loopback, on free ports, in temporary folders, for the whole session, and are
stopped at its end. The PostgreSQL server is :class:`local_servers.Postgres` (shared with the
queue benchmark); host connections need a password, so the credentials in the storage URLs are real.

When the binaries (Debian: ``apt-get install postgresql``; CI's ``.ci/run`` installs them) or
the driver (``pip install -e '.[postgres]'``) are missing, the tests that need them are skipped
with the reason.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from local_servers import Postgres, ServerUnavailable, free_port

HERE = Path(__file__).resolve().parent
RUNNER_TESTS = HERE.parent / "runner"
for _path in (str(HERE), str(RUNNER_TESTS)):  # faults_helpers; fake_trials (here and in workers)
    if _path not in sys.path:
        sys.path.insert(0, _path)

STARTUP_TIMEOUT_S = 90.0


# --------------------------------------------------------------------------------------------
# PostgreSQL


@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL server on loopback for the session (skips when it cannot be had)."""
    try:
        import psycopg  # noqa: F401  (SQLAlchemy's default driver for postgresql:// URLs)
    except ImportError:
        pytest.skip("the PostgreSQL driver is not installed: pip install -e '.[postgres]'")
    try:
        server = Postgres()
    except ServerUnavailable as exc:
        pytest.skip(str(exc))
    try:
        server.start()
    except Exception:
        server.stop()
        raise
    yield server
    server.stop()


@pytest.fixture
def pg_url(postgres, request):
    """A fresh database for one test: the Optuna storage URL, with the password in it."""
    name = "t_" + "".join(c if c.isalnum() else "_" for c in request.node.name.lower())[:50]
    return postgres.create_db(f"{name}_{os.getpid()}")


# --------------------------------------------------------------------------------------------
# MLflow tracking server


class MlflowServer:
    """``mlflow server`` on loopback (SQLite backend, local artifact folder); stop/start keep the
    same port and store, like a tracking server that goes down and comes back."""

    def __init__(self, root: Path):
        self.root = root
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        mlflow = Path(sys.executable).parent / "mlflow"
        cmd = [str(mlflow)] if mlflow.exists() else [sys.executable, "-m", "mlflow"]
        cmd += [
            "server",
            "--backend-store-uri",
            f"sqlite:///{self.root / 'mlflow.db'}",
            "--artifacts-destination",
            str(self.root / "artifacts"),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            "1",
        ]
        env = {
            **os.environ,
            "MLFLOW_DISABLE_TELEMETRY": "true",
            "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",  # no job runner processes: tracking only
        }
        self.starts += 1
        log = open(self.root / f"server.{self.starts}.log", "wb")  # noqa: SIM115 - the server's, for its life
        self.proc = subprocess.Popen(
            cmd, cwd=self.root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.3)
        text = (self.root / f"server.{self.starts}.log").read_text(errors="replace")[-3000:]
        self.stop()
        raise RuntimeError(f"mlflow server did not come up on {self.url}:\n{text}")

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is None:
            return
        for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 15)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # whatever is left in its group (uvicorn's worker)
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc = None


@pytest.fixture(scope="session")
def mlflow_server_session(tmp_path_factory):
    server = MlflowServer(tmp_path_factory.mktemp("mlflow-server"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def mlflow_server(mlflow_server_session):
    """The session's tracking server, running (a test that stopped it gets it restarted)."""
    if not mlflow_server_session.running():
        mlflow_server_session.start()
    yield mlflow_server_session
    if not mlflow_server_session.running():
        mlflow_server_session.start()


# --------------------------------------------------------------------------------------------
# the machines' environment


@pytest.fixture
def fault_env(tmp_path, monkeypatch):
    """Environment for harness commands, workers and trial processes; returns the folder where
    the fake trials count their calls (``<trial_id>.started`` / ``.done``, one line a call)."""
    counters = tmp_path / "calls"
    monkeypatch.setenv("FAKE_TRIALS_DIR", str(counters))
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(RUNNER_TESTS), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # CPU workers, whatever the machine has
    for var in ("FAKE_TRIAL_SLEEP", "FAKE_SLOW_FIRST_S", "HARNESS_MIN_FREE_MB"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    return counters
