"""A study database, or an installed Optuna, not laid out as the queue expects: one line naming
the Optuna version and what differs, exit 2, before any trial runs.

The queue's exactly-once statements are written against Optuna's own tables
(:mod:`harness.store.optuna_tables` declares which tables, columns and private attributes);
a release that renamed one would otherwise show only as trials run twice or lost. What is real
and what is simulated:

- *a renamed column (real)*: a copy of a study database set up by the installed Optuna, with
  ``ALTER TABLE ... RENAME COLUMN``, given to the real ``harness run`` and ``harness worker``;
- *a missing private attribute (simulated)*: Optuna's trials handed back without ``_trial_id``,
  or its storage cache without ``_backend``, as a release that renamed them would;
- *a model that changed (simulated)*: the declared layout asks for a column Optuna's model lacks.
"""

from __future__ import annotations

import copy
import shutil
import sqlite3
import subprocess
from pathlib import Path

import optuna
import pytest
from faults_helpers import FAKE, HARNESS, record_files, write_study

from harness import store as study_db
from harness.runner import queue
from harness.store import optuna_tables


def _study_database(path: Path, name: str) -> str:
    """A study database as ``harness run`` sets one up (the schema and the study's queue), no trial."""
    url = f"sqlite:///{path}"
    storage = study_db.open_storage(url, create=True)
    queue.create_queue(storage, name, "maximize")
    storage.engine.dispose()
    return url


def _refusal(url: str, *differences: str) -> str:
    tested = optuna_tables.TESTED_OPTUNA
    return (
        f"the study database {url} does not have the layout this harness was tested on "
        f"(optuna {optuna.__version__}): {'; '.join(differences)}; install optuna{tested} "
        f"(pip install 'optuna{tested}') and use a study database it created"
    )


def _trial_rows(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT count(*) FROM trials").fetchone()[0]


@pytest.mark.parametrize("command", ["run", "worker"])
def test_a_renamed_column_stops_the_runner_with_one_line_before_any_trial(tmp_path, fault_env, command):
    original = tmp_path / "original.db"
    _study_database(original, "layout")
    changed = tmp_path / "changed.db"
    shutil.copy(original, changed)
    with sqlite3.connect(changed) as conn:
        conn.execute("ALTER TABLE trial_user_attributes RENAME COLUMN value_json TO value_text")
    study = write_study(tmp_path, "layout", ["ok"], output_dir=str(tmp_path / "out"))

    done = subprocess.run(
        [*HARNESS, command, str(study), "--trial-fn", FAKE, "--no-tracking", "--storage", f"sqlite:///{changed}"],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )

    expected = _refusal(f"sqlite:///{changed}", "table trial_user_attributes has no column value_json")
    assert done.returncode == 2, done.stderr
    said = [line for line in done.stderr.strip().splitlines() if not line.startswith("[harness] ")]
    assert said == [f"error: {expected}"], done.stderr  # besides the run's own preamble: one line, no traceback
    assert not fault_env.exists(), "a trial ran"
    assert record_files(tmp_path / "out") == {}
    assert _trial_rows(changed) == 0  # nothing was queued either
    # the database as the installed Optuna laid it out passes the same check
    optuna_tables.check_layout(study_db.open_storage(f"sqlite:///{original}"))


def test_a_missing_table_is_named(tmp_path):
    _study_database(tmp_path / "original.db", "s")
    shutil.copy(tmp_path / "original.db", tmp_path / "changed.db")  # this process checked the original
    with sqlite3.connect(tmp_path / "changed.db") as conn:
        conn.execute("DROP TABLE trial_heartbeats")
    url = f"sqlite:///{tmp_path / 'changed.db'}"
    with pytest.raises(optuna_tables.LayoutMismatch) as refused:
        queue.load_queue(study_db.open_storage(url), "s")
    assert str(refused.value) == _refusal(url, "it has no table trial_heartbeats")


def _trials_without_row_ids(monkeypatch):
    real = optuna.study.Study.get_trials

    def get_trials(self, *args, **kwargs):
        out = []
        for trial in real(self, *args, **kwargs):
            trial = copy.copy(trial)
            del trial._trial_id
            out.append(trial)
        return out

    monkeypatch.setattr(optuna.study.Study, "get_trials", get_trials)


def _cache_without_backend(monkeypatch):
    real = optuna.storages.get_storage

    def get_storage(storage):
        wrapped = real(storage)
        if "_backend" in vars(wrapped):
            del wrapped._backend
        return wrapped

    monkeypatch.setattr(optuna.storages, "get_storage", get_storage)


@pytest.mark.parametrize(
    ("rename", "difference"),
    [
        (_trials_without_row_ids, "optuna.trial.FrozenTrial has no attribute _trial_id"),
        (_cache_without_backend, "optuna.storages.get_storage(RDBStorage) has no attribute _backend"),
    ],
)
def test_a_missing_private_attribute_is_reported(tmp_path, monkeypatch, rename, difference):
    monkeypatch.setattr(optuna_tables, "optuna_problems", optuna_tables.optuna_problems.__wrapped__)  # not cached
    rename(monkeypatch)
    url = f"sqlite:///{tmp_path / 'study.db'}"
    with pytest.raises(optuna_tables.LayoutMismatch) as refused:
        queue.create_queue(study_db.open_storage(url, create=True), "s", "maximize")
    assert str(refused.value) == _refusal(url, difference)


def test_a_model_without_a_declared_column_is_reported(tmp_path, monkeypatch):
    trials = next(t for t in optuna_tables.LAYOUT if t.name == "trials")
    changed = optuna_tables.OptunaTable(trials.name, trials.model, (*trials.columns, "trial_uuid"))
    monkeypatch.setattr(optuna_tables, "LAYOUT", tuple(changed if t is trials else t for t in optuna_tables.LAYOUT))
    monkeypatch.setattr(optuna_tables, "optuna_problems", optuna_tables.optuna_problems.__wrapped__)
    url = f"sqlite:///{tmp_path / 'study.db'}"
    with pytest.raises(optuna_tables.LayoutMismatch) as refused:
        optuna_tables.check_layout(study_db.open_storage(url, create=True))
    assert str(refused.value) == _refusal(
        url,
        f"{optuna_tables.MODELS_MODULE}.TrialModel has no column trial_uuid",
        "table trials has no column trial_uuid",
    )


def test_the_declared_layout_is_what_the_installed_optuna_has(tmp_path):
    assert optuna_tables.optuna_problems() == ()
    storage = study_db.open_storage(f"sqlite:///{tmp_path / 'study.db'}", create=True)
    assert optuna_tables.database_problems(storage.engine) == []
