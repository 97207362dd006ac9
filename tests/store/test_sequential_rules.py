"""The store of a sequential study's fixed rule: one version is fixed once, whoever tries first,
however many processes try at once; the study folder's copy stands in for the database."""

import threading

import pytest

from harness.store import open_storage
from harness.store import rules as store


@pytest.fixture()
def url(tmp_path):
    return f"sqlite:///{tmp_path / 'optuna.db'}"


def test_a_version_is_fixed_once_however_many_processes_try_at_once(url):
    open_storage(url, create=True).engine.dispose()
    racers = 8
    barrier = threading.Barrier(racers)
    got: list[dict] = []
    errors: list[BaseException] = []

    def machine(i: int) -> None:
        rdb = open_storage(url)  # an engine of its own, like another machine
        try:
            barrier.wait()
            got.append(store.fix(rdb.engine, "seq", 1, {"min_effect": i}))
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)
        finally:
            rdb.engine.dispose()

    threads = [threading.Thread(target=machine, args=(i,)) for i in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert len(got) == racers and len({g["min_effect"] for g in got}) == 1  # every one got the same rule
    rdb = open_storage(url)
    assert store.stored(rdb.engine, "seq") == [got[0]]
    assert store.fix(rdb.engine, "seq", 2, {"min_effect": 99}) == {"min_effect": 99}  # the next version
    assert store.stored(rdb.engine, "seq") == [got[0], {"min_effect": 99}]
    assert store.stored(rdb.engine, "other") == []  # per study


def test_the_folder_copy_stands_in_when_the_database_cannot_be_read(tmp_path, url):
    assert store.read_rules(tmp_path, None, "seq") == []
    store.write_local(tmp_path / "seq", [{"version": 1}])
    assert store.read_rules(tmp_path / "seq", None, "seq") == [{"version": 1}]
    with pytest.warns(UserWarning, match="cannot read the sequential rules stored in"):
        assert store.read_rules(tmp_path / "seq", f"sqlite:///{tmp_path / 'missing.db'}", "seq") == [{"version": 1}]
