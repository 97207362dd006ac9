"""`harness status` says why the study database cannot be read, in the words `harness run` uses:
a closed port, a wrong password, a database missing on the server. It says that there is no study
database (run the study first) only when that is so."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from cli_main import run_main

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cli"))
from stored_study import write_study

pytest.importorskip("psycopg", reason="the PostgreSQL driver is not installed: pip install -e '.[postgres]'")

OPTUNA_WRAPPER = "invalid data in the commit"  # Optuna's text around every driver error


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens there once the socket is closed


def error_line(err: str) -> str:
    """The command's one error line (stderr also names the study first)."""
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


def status_and_run(monkeypatch, capsys, url: str) -> tuple[str, str]:
    """The error lines of `harness status` and of `harness run` on the same storage URL."""
    path = write_study()
    code, _, status_err = run_main(monkeypatch, capsys, "status", str(path), "--storage", url)
    assert code == 2
    code, _, run_err = run_main(monkeypatch, capsys, "run", str(path), "--storage", url)
    assert code == 2
    return error_line(status_err), error_line(run_err)


def test_a_closed_port_is_named_as_such(monkeypatch, capsys):
    url = f"postgresql://harness:s3cret-pw@127.0.0.1:{closed_port()}/study"
    status, run = status_and_run(monkeypatch, capsys, url)
    assert "Connection refused" in status and OPTUNA_WRAPPER not in status
    assert "start the study" not in status
    assert "s3cret-pw" not in status
    assert status == run


def test_a_wrong_password_is_named_as_such(monkeypatch, capsys, postgres, pg_url):
    url = pg_url.replace(postgres.password, "not-the-password")
    status, run = status_and_run(monkeypatch, capsys, url)
    assert 'password authentication failed for user "harness"' in status and OPTUNA_WRAPPER not in status
    assert "start the study" not in status and "not-the-password" not in status
    assert status == run


def test_a_database_missing_on_the_server_is_not_a_study_to_run_first(monkeypatch, capsys, postgres):
    url = postgres.url("no_such_database")
    status, run = status_and_run(monkeypatch, capsys, url)
    assert 'database "no_such_database" does not exist' in status
    assert "start the study" not in status  # `harness run` cannot create a PostgreSQL database
    assert status == run


def test_an_empty_database_is_a_study_to_run_first(monkeypatch, capsys, pg_url):
    path = write_study()
    code, _, err = run_main(monkeypatch, capsys, "status", str(path), "--storage", pg_url)
    assert code == 2
    assert "is not set up for the harness yet; start the study with `harness run` first" in error_line(err)


def test_a_missing_sqlite_file_is_no_study_database(monkeypatch, capsys, tmp_path):
    path = write_study()
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    code, _, err = run_main(monkeypatch, capsys, "status", str(path), "--storage", url)
    assert code == 2
    assert error_line(err) == f"error: no study database at {url}; start the study with `harness run` first"
