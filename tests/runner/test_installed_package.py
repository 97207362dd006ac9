"""Workers and trial processes import the installed harness, whatever folder they start in."""

from __future__ import annotations

from pathlib import Path

import pytest
from runner_helpers import options, write_study

import harness
from harness.runner.run import run_study
from harness.tracking.records import read_records


@pytest.mark.slow
def test_a_harness_folder_in_the_working_directory_is_not_imported(tmp_path, fake_env, monkeypatch):
    decoy = tmp_path / "elsewhere"
    (decoy / "harness").mkdir(parents=True)
    (decoy / "harness" / "__init__.py").write_text("raise ImportError('the decoy harness was imported')\n")
    monkeypatch.chdir(decoy)
    for start in ("fork", "exec"):  # forkserver children and exec'd children alike
        monkeypatch.setenv("HARNESS_TRIAL_START", start)
        path = write_study(tmp_path, ["ok_a"], name=f"decoy_{start}")
        summary = run_study(path, options())
        assert summary.exit_code == 0, [t.reasons for t in summary.trials]
        (record,) = read_records(tmp_path / "out" / f"decoy_{start}")
        assert record.harness_path == str(Path(harness.__file__).resolve().parent)
