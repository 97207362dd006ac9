"""A mistyped --tracking-uri (or HARNESS_TRACKING_URI) for a command that reads or adds to a study's
MLflow store (mirror-to-mlflow, report, ui) is a one-line error naming the rule; it never creates a new, empty
store. `harness run` (and worker, trial), which start trials, create the store they are given."""

from __future__ import annotations

import pytest
from cli_main import run_main
from stored_study import write_records, write_study


@pytest.fixture
def study():
    path = write_study()
    write_records(path)
    return path


def one_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("command", [["mirror-to-mlflow"], ["report"], ["ui", "--dry-run"]])
def test_a_sqlite_store_that_does_not_exist_is_an_error(monkeypatch, capsys, tmp_path, study, command):
    typo = tmp_path / "mlfow.db"
    code, _, err = run_main(
        monkeypatch, capsys, command[0], "small", *command[1:], "--tracking-uri", f"sqlite:///{typo}"
    )
    assert code == 2
    assert one_error(err) == (
        f"error: --tracking-uri sqlite:///{typo}: no MLflow store at {typo}; mirror-to-mlflow, report and ui only use "
        "an existing store (run, worker and trial create the one they are given): check the URI "
        "(or HARNESS_TRACKING_URI)"
    )
    assert not typo.exists() and not (tmp_path / "reports").exists()


def test_the_environment_variable_is_held_to_the_same_rule(monkeypatch, capsys, tmp_path, study):
    folder = tmp_path / "no-such-folder"
    monkeypatch.setenv("HARNESS_TRACKING_URI", f"file://{folder}/mlruns")
    code, _, err = run_main(monkeypatch, capsys, "mirror-to-mlflow", "small")
    assert code == 2
    assert f"no MLflow store at {folder}/mlruns" in one_error(err)
    assert not folder.exists()


def test_the_study_own_store_is_still_built_by_mirror_to_mlflow(monkeypatch, capsys, study):
    code, out, _ = run_main(monkeypatch, capsys, "mirror-to-mlflow", "small")
    assert code == 0 and out.strip().endswith("6 records; 0 already present, 6 sent, 0 failed")
