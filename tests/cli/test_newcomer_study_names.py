"""Every reading command takes a study's name, its file or its output folder, and says on stderr
what it resolved to; a missing or ambiguous name is one line listing what was tried. The trials
frame (``harness results --csv``, ``results.csv``) names each quantity once."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest
from cli_main import run_main
from stored_study import STUDY, write_records, write_study

import harness
from harness.study.load import dump_study, load_study

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

RESOLVED = "study small: studies/small.yaml, runs/small"


@pytest.fixture
def ran(monkeypatch):
    """``studies/small.yaml`` and its folder ``runs/small`` with a record of every trial; ``sync``
    is replaced by a stand-in that says which folder it was given (MLflow is not what is tested)."""
    write_records(write_study())
    synced = []

    class Report:
        failed = 0

        def __str__(self) -> str:
            return "synced"

    def fake_sync(folder, tracking_uri=None):
        synced.append(Path(folder))
        return Report()

    monkeypatch.setattr("harness.tracking.mlflow_mirror.sync", fake_sync)
    (Path("runs") / "small" / "mlflow.db").touch()  # what `harness ui` looks for
    return synced


COMMANDS = {
    "status": ["status"],
    "results": ["results"],
    "report": ["report", "--out", "rep"],
    "compare": ["compare", "{study}", "rloo", "grpo"],
    "noise-floor": ["noise-floor"],
    "mirror-to-mlflow": ["mirror-to-mlflow"],
    "ui": ["ui", "--dry-run"],
}


def command(name: str, study: str) -> list[str]:
    args = COMMANDS[name]
    return [a.format(study=study) for a in args] if "{study}" in args else [args[0], study, *args[1:]]


@pytest.mark.parametrize("name", COMMANDS)
def test_every_reading_command_takes_the_study_name_and_says_what_it_resolved(ran, monkeypatch, capsys, name):
    code, out, err = run_main(monkeypatch, capsys, *command(name, "small"))
    assert code == 0, (out, err)
    assert err.splitlines()[0] == RESOLVED
    if name == "mirror-to-mlflow":
        assert ran == [Path("runs") / "small"]


@pytest.mark.parametrize(
    "given, said",
    [
        ("studies/small.yaml", RESOLVED),
        ("runs/small", "study small: runs/small (its study.yaml)"),
    ],
)
def test_a_file_or_a_folder_is_said_the_same_way(ran, monkeypatch, capsys, given, said):
    (Path("runs") / "small" / "study.yaml").write_text(dump_study(load_study("studies/small.yaml")))
    code, out, err = run_main(monkeypatch, capsys, "results", given)
    assert code == 0, err
    assert err.splitlines()[0] == said
    assert "study small: 6 trials (6 completed)" in out


def test_a_name_with_only_its_runs_folder_reads_the_folder(monkeypatch, capsys):
    write_records(write_study())
    Path("studies/small.yaml").unlink()
    code, out, err = run_main(monkeypatch, capsys, "results", "small")
    assert code == 0, err
    assert err.splitlines()[0] == "study small: runs/small (no study.yaml: read from its records)"
    assert "6 trials (6 completed)" in out


def one_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def test_a_missing_name_is_one_line_listing_what_was_tried(monkeypatch, capsys):
    code, _, err = run_main(monkeypatch, capsys, "status", "quickstart")
    assert code == 2
    line = one_error(err)
    assert "no study named 'quickstart'" in line and "tried studies/quickstart.yaml and runs/quickstart/" in line
    assert str(Path.cwd()) in line


def test_a_name_whose_file_and_folder_are_different_studies_is_ambiguous(monkeypatch, capsys):
    write_study(STUDY.replace("name: small", "name: other"))  # studies/small.yaml writes to runs/other
    (Path("runs") / "small").mkdir(parents=True)
    code, _, err = run_main(monkeypatch, capsys, "results", "small")
    assert code == 2
    line = one_error(err)
    assert "'small' is ambiguous" in line and "studies/small.yaml writes to runs/other/" in line
    assert "runs/small/" in line


def test_a_name_never_reaches_outside_studies(tmp_path, monkeypatch, capsys):
    outside = tmp_path / "elsewhere.yaml"
    outside.write_text(STUDY)
    Path("studies").mkdir()
    Path("studies/small.yaml").symlink_to(outside)
    code, _, err = run_main(monkeypatch, capsys, "status", "small")
    assert code == 2
    assert "outside studies/" in one_error(err)
    code, _, err = run_main(monkeypatch, capsys, "status", "../small")  # not a name: a path that is not there
    assert code == 2
    assert one_error(err) == "error: no study file or study folder at ../small"


def test_the_python_shortcut_takes_the_name_too():
    write_records(write_study())
    assert len(harness.results("small").trials) == 6


def test_the_trials_frame_names_the_wall_time_once(ran, monkeypatch, capsys):
    code, _, err = run_main(monkeypatch, capsys, "results", "small", "--csv", "trials.csv")
    assert code == 0, err
    with open("trials.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert "wall_time_s" in rows[0] and "time/total_s" not in rows[0]
    assert sorted(float(r["wall_time_s"]) for r in rows) == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    code, _, err = run_main(monkeypatch, capsys, "report", "small", "--out", "rep")
    assert code == 0, err
    with open("rep/results.csv", newline="") as handle:
        header = next(csv.reader(handle))
    assert "wall_time_s" in header and "time/total_s" not in header
