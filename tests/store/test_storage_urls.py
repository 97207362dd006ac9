"""A SQLite storage URL with a query string (``sqlite:///x.db?timeout=30``) names the file before the
``?``: the database ``harness run`` creates is the one its workers open (issue 37, item 11), a missing
one is still named in one line, and the driver's timeout the URL gives is the one used."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import store as study_db
from harness.ground.urls import sqlite_file
from harness.store import database
from harness.store.errors import StorageError
from harness.tracking.mlflow_mirror import local_store_path, require_existing_store


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:////abs/x.db", Path("/abs/x.db")),
        ("sqlite:////abs/x.db?timeout=30", Path("/abs/x.db")),
        ("sqlite:///rel/x.db?timeout=30&check_same_thread=false", Path("rel/x.db")),
        ("sqlite:////abs/a%20b.db?timeout=30", Path("/abs/a b.db")),
        ("sqlite:///file:/abs/x.db?mode=ro&uri=true", Path("/abs/x.db")),
        ("sqlite://", None),
        ("sqlite:///:memory:", None),
        ("sqlite:///file:mem?mode=memory&uri=true", None),
    ],
)
def test_the_file_of_a_sqlite_url_leaves_its_query_string_out(url, path):
    assert sqlite_file(url) == path


def test_the_database_run_creates_with_a_query_string_is_the_one_its_workers_open(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}?timeout=30"
    study_db.open_storage(url, create=True).engine.dispose()
    assert [p.name for p in tmp_path.iterdir()] == ["study.db"]
    study_db.open_storage(url, create=False).engine.dispose()  # a worker: no "no study database"


def test_a_missing_database_with_a_query_string_is_named_in_one_line(tmp_path):
    url = f"sqlite:///{tmp_path / 'missing.db'}?timeout=30"
    with pytest.raises(StorageError, match=r"^no study database at sqlite:///.*missing\.db\?timeout=30; start the"):
        study_db.open_storage(url, create=False)
    assert not (tmp_path / "missing.db").exists()


@pytest.mark.parametrize(("query", "timeout"), [("", 120), ("?timeout=30", None)])
def test_the_lock_timeout_a_url_gives_is_not_overridden(tmp_path, monkeypatch, query, timeout):
    """SQLAlchemy hands the URL's ``timeout`` to the driver; connect_args would replace it."""
    given = []
    real = database.RDBStorage

    def spy(url, *, engine_kwargs, **kwargs):
        given.append(engine_kwargs.get("connect_args", {}).get("timeout"))
        return real(url, engine_kwargs=engine_kwargs, **kwargs)

    monkeypatch.setattr(database, "RDBStorage", spy)
    study_db.open_storage(f"sqlite:///{tmp_path / 'study.db'}{query}", create=True).engine.dispose()
    assert given == [timeout]


def test_an_existing_mlflow_store_named_with_a_query_string_is_found(tmp_path):
    (tmp_path / "mlflow.db").touch()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}?timeout=30"
    assert local_store_path(uri) == tmp_path / "mlflow.db"
    require_existing_store(uri)  # no "no MLflow store at .../mlflow.db?timeout=30"
