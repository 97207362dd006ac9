"""A throwaway PostgreSQL server on loopback, for the tests and the benchmarks alike.

It runs on a free port in a temporary folder and is stopped (its folder removed) by ``stop``.
PostgreSQL refuses to run as root: as root its binaries run as the ``postgres`` user
(``runuser``) on a data folder owned by that user. Host connections need a password
(scram-sha-256), so the credentials in the storage URLs are real.

Nothing here depends on pytest: what cannot be had here (no binaries, no ``postgres`` user) is
a :class:`ServerUnavailable` whose message says what to install; the fixtures turn it into a
skip, a benchmark into its one-line exit.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

PG_USER = "harness"
PG_PASSWORD = "pg-secret-4e9b1c"  # the tests check it is never printed or logged
STARTUP_TIMEOUT_S = 90.0


class ServerUnavailable(Exception):
    """The server cannot be started on this machine; the message says why and what to install."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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

    def __init__(self, bindir: Path | None = None, max_connections: int = 300):
        bindir = bindir or postgres_bin()
        if bindir is None:
            raise ServerUnavailable("PostgreSQL server binaries not found (apt-get install postgresql; .ci/run does)")
        self.bindir = bindir
        self.max_connections = max_connections
        self.port = free_port()
        self.password = PG_PASSWORD
        self.prefix: list[str] = []
        self._owner: tuple[int, int] | None = None
        if os.geteuid() == 0:
            import pwd

            try:
                user = pwd.getpwnam("postgres")
            except KeyError:
                raise ServerUnavailable(
                    "running as root and there is no 'postgres' user to run PostgreSQL as"
                ) from None
            if shutil.which("runuser") is None:
                raise ServerUnavailable("running as root without `runuser` to start PostgreSQL as 'postgres'")
            self.prefix = ["runuser", "-u", "postgres", "--"]
            self._owner = (user.pw_uid, user.pw_gid)
        self.root = Path(tempfile.mkdtemp(prefix="harness-pg-"))  # /tmp: reachable by postgres
        self.data = self.root / "data"
        if self._owner:
            os.chown(self.root, *self._owner)

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
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            f"-c max_connections={self.max_connections}"
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
