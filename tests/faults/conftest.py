"""Real components for the fault tests: a PostgreSQL server and an MLflow tracking server.

Both run on loopback, on free ports, in temporary folders, for the whole session, and are
stopped at its end. PostgreSQL refuses to run as root: as root its binaries run as the
``postgres`` user (``runuser``) on a data folder owned by that user. Host connections need a
password (scram-sha-256), so the credentials in the storage URLs are real.

When the binaries (Debian: ``apt-get install postgresql``; CI's ``.ci/run`` installs them) or
the driver (``pip install -e '.[postgres]'``) are missing, the tests that need them are skipped
with the reason.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
RUNNER_TESTS = HERE.parent / "runner"
for _path in (str(HERE), str(RUNNER_TESTS)):  # faults_helpers; fake_trials (here and in workers)
    if _path not in sys.path:
        sys.path.insert(0, _path)

PG_USER = "harness"
PG_PASSWORD = "pg-secret-4e9b1c"  # the tests check it is never printed or logged
STARTUP_TIMEOUT_S = 90.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --------------------------------------------------------------------------------------------
# PostgreSQL


def postgres_bin() -> Path | None:
    """The folder holding initdb and pg_ctl: Debian's /usr/lib/postgresql/<v>/bin, else PATH."""

    def version(path: str) -> float:
        try:
            return float(Path(path).parent.name)
        except ValueError:
            return 0.0

    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True):
        if (Path(folder) / "initdb").is_file() and (Path(folder) / "pg_ctl").is_file():
            return Path(folder)
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb and pg_ctl:
        return Path(pg_ctl).resolve().parent
    return None


class Postgres:
    """A throwaway PostgreSQL cluster: ``url(db)`` for a database made by ``create_db``."""

    def __init__(self, bindir: Path):
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="harness-pg-"))  # /tmp: reachable by postgres
        self.data = self.root / "data"
        self.port = free_port()
        self.password = PG_PASSWORD
        self.prefix: list[str] = []
        if os.geteuid() == 0:
            import pwd

            try:
                user = pwd.getpwnam("postgres")
            except KeyError:
                shutil.rmtree(self.root, ignore_errors=True)
                pytest.skip("running as root and there is no 'postgres' user to run PostgreSQL as")
            if shutil.which("runuser") is None:
                shutil.rmtree(self.root, ignore_errors=True)
                pytest.skip("running as root without `runuser` to start PostgreSQL as 'postgres'")
            self.prefix = ["runuser", "-u", "postgres", "--"]
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._owner = (user.pw_uid, user.pw_gid)
        else:
            self._owner = None

    def _run(self, *args: str, timeout: float = 60) -> None:
        out = subprocess.run([*self.prefix, *args], cwd=self.root, capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            log = self.root / "postgres.log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{args[0]} failed ({out.returncode}): {out.stderr[-2000:]}\n{tail}")

    def start(self) -> None:
        pwfile = self.root / "pw"
        pwfile.write_text(PG_PASSWORD + "\n")
        if self._owner:
            os.chown(pwfile, *self._owner)
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            PG_USER,
            f"--pwfile={pwfile}",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--no-sync",
        )
        pwfile.unlink()
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories='' "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
        )
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.root / "postgres.log"),
            "-w",
            "-t",
            str(int(STARTUP_TIMEOUT_S)),
            "-o",
            options,
            "start",
            timeout=STARTUP_TIMEOUT_S + 10,
        )

    def stop(self) -> None:
        try:
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        except (RuntimeError, subprocess.TimeoutExpired, OSError):
            pass
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str, password: str = PG_PASSWORD) -> str:
        return f"postgresql://{PG_USER}:{password}@127.0.0.1:{self.port}/{database}"

    def create_db(self, name: str) -> str:
        import psycopg

        with psycopg.connect(
            host="127.0.0.1",
            port=self.port,
            user=PG_USER,
            password=PG_PASSWORD,
            dbname="postgres",
            autocommit=True,
        ) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL server on loopback for the session (skips when it cannot be had)."""
    try:
        import psycopg  # noqa: F401  (SQLAlchemy's default driver for postgresql:// URLs)
    except ImportError:
        pytest.skip("the PostgreSQL driver is not installed: pip install -e '.[postgres]'")
    bindir = postgres_bin()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries not found (apt-get install postgresql; .ci/run does)")
    server = Postgres(bindir)
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
