"""A local record carries a checksum of its content: a file edited after it was written is not
believed (one warning line naming it), the shared storage's copy stands in where there is one,
and a record written before records had a checksum is read as it is."""

from __future__ import annotations

import json
import shutil

import pytest

from harness import store as study_db
from harness.errors import HarnessError
from harness.tracking import records
from harness.tracking.results import load_results
from harness.tracking.shared_records import RecordStore, import_records, merge, publish_missing

STUDY_YAML = (
    "name: demo\ncontrol: grpo\nseeds: 2\ntrain: {steps: 4, eval_every: 2}\narms: [{name: grpo, algorithm: grpo}]\n"
)


def edit_final(path, value: float, *, recompute: bool = False) -> None:
    """What the issue did: the final eval/accuracy rewritten in the file (optionally with the
    checksum recomputed, as someone who knows the scheme could)."""
    data = json.loads(path.read_text())
    data["final"]["eval/accuracy"] = value
    if recompute:
        data["checksum"] = records.content_checksum(data)
    path.write_text(json.dumps(data, indent=1))


def mismatch_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "does not match its checksum" in line]


def test_a_written_record_carries_the_checksum_of_its_content(tmp_path, make_record):
    path = records.write_record(tmp_path, make_record("grpo", 0))
    data = json.loads(path.read_text())
    assert data["checksum"] == records.content_checksum(data) and data["checksum"].startswith("sha256:")
    path.write_text(json.dumps(data, indent=4, sort_keys=True))  # laid out anew, the content as it was
    assert records.read_record(path).final["eval/accuracy"] == 0.5


def test_an_edited_record_is_not_believed_with_one_warning_line_naming_it(tmp_path, make_record, capsys):
    kept, edited = make_record("grpo", 0), make_record("grpo", 1)
    records.write_record(tmp_path, kept)
    path = records.write_record(tmp_path, edited)
    edit_final(path, 0.99)
    with pytest.raises(records.RecordMismatch, match=str(path)):
        records.read_record(path)
    assert [r.trial_id for r in records.read_records(tmp_path)] == [kept.trial_id]
    records.read_records(tmp_path)  # read again by the same command: said once
    (line,) = mismatch_lines(capsys.readouterr().err)
    assert str(path) in line and "not believed" in line
    with pytest.raises(HarnessError, match="does not match its checksum"):
        records.read_records(tmp_path, strict=True)


def test_a_record_without_a_checksum_is_read_as_before(tmp_path, make_record, capsys):
    """Records written by earlier versions (stored baselines among them) have no checksum."""
    old = make_record("grpo", 0)
    path = records.record_path(tmp_path, old.trial_id)
    path.parent.mkdir(parents=True)
    path.write_text(old.model_dump_json(indent=1) + "\n")  # how earlier versions wrote it
    (back,) = records.read_records(tmp_path)
    assert back.fingerprint() == old.fingerprint()
    assert not mismatch_lines(capsys.readouterr().err)


@pytest.fixture(scope="module")
def empty_storage(tmp_path_factory):
    """An empty study database, made once (creating its tables takes most of a second)."""
    path = tmp_path_factory.mktemp("storage") / "optuna.db"
    study_db.open_storage(f"sqlite:///{path}", create=True).engine.dispose()
    return path


@pytest.fixture
def shared(tmp_path, make_record, empty_storage):
    """A study folder whose records are also in its storage database (as a worker stores them)."""
    folder = tmp_path / "demo"
    folder.mkdir()
    (folder / "study.yaml").write_text(STUDY_YAML)
    shutil.copy(empty_storage, folder / "optuna.db")
    store = RecordStore.of(study_db.open_storage(f"sqlite:///{folder / 'optuna.db'}"), "demo")
    record = make_record("grpo", 0)
    records.write_record(folder, record)
    store.put(record)
    return folder, store, record


def accuracy(folder, trial_id: str) -> float:
    return load_results(folder).trials.set_index("trial_id").loc[trial_id, "eval/accuracy"]


def test_the_results_read_the_storages_copy_of_an_edited_record(shared, capsys):
    folder, _, record = shared
    edit_final(records.record_path(folder, record.trial_id), 0.99)
    assert accuracy(folder, record.trial_id) == 0.5
    assert len(mismatch_lines(capsys.readouterr().err)) == 1


def test_the_storages_copy_wins_over_a_local_record_with_a_recomputed_checksum(shared, capsys):
    folder, store, record = shared
    path = records.record_path(folder, record.trial_id)
    edit_final(path, 0.99, recompute=True)
    assert accuracy(folder, record.trial_id) == 0.5
    assert f"the local record {path} differs from the shared storage's copy" in capsys.readouterr().err
    assert publish_missing(folder, store) == 0  # the edited copy never replaces the stored one
    assert store.completed(record.trial_id).final["eval/accuracy"] == 0.5
    import_records(folder, store)  # bringing the folder up to date puts the stored copy back
    assert records.read_record(path).fingerprint() == record.fingerprint()


def test_without_a_storage_copy_an_edited_record_is_set_aside(tmp_path, make_record, capsys):
    folder = tmp_path / "demo"
    folder.mkdir()
    (folder / "study.yaml").write_text(STUDY_YAML)
    record = make_record("grpo", 0)
    edit_final(records.write_record(folder, record), 0.99)
    assert record.trial_id not in set(load_results(folder).trials["trial_id"])
    assert len(mismatch_lines(capsys.readouterr().err)) == 1


def test_merge_keeps_a_local_record_that_matches_the_stored_one(make_record):
    record = make_record("grpo", 0)
    assert merge([record], {record.trial_id: make_record("grpo", 0)}) == [record]
