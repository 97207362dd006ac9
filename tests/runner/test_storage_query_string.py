"""`harness run --storage 'sqlite:///...db?timeout=30'` (a query string in the storage URL): the
workers open the database the run queued the trials in, and run them (issue 37, item 11: they
said "no study database")."""

from __future__ import annotations

import pytest
from runner_helpers import options, write_study

from harness.runner.run import run_study


@pytest.mark.slow
def test_a_study_run_with_a_query_string_in_its_storage_url_completes(tmp_path, fake_env):
    path = write_study(tmp_path, ["ok"], seeds=[0, 1])
    summary = run_study(path, options(storage=f"sqlite:///{tmp_path / 'queue.db'}?timeout=30"))
    assert summary.exit_code == 0, summary.format()
    assert [t.status for t in summary.trials] == ["completed", "completed"]
    assert (tmp_path / "queue.db").is_file() and not list(tmp_path.glob("queue.db?*"))
