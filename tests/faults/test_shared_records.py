"""The shared copy of the records in the storage database (harness.tracking.shared_records), on SQLite:
what importing into a machine's folder and publishing from it do, attempt by attempt."""

from __future__ import annotations

import optuna

from harness import store as study_db
from harness.algorithms.presets import resolve_algorithm
from harness.engine.spec import TrainConfig, TrialResult, TrialSpec
from harness.runner import queue
from harness.tracking.records import (
    make_record,
    read_failed_attempts,
    read_record,
    read_records,
    record_path,
    write_record,
)
from harness.tracking.results import load_results
from harness.tracking.shared_records import (
    RecordStore,
    import_records,
    merge,
    publish_missing,
)


def _record(study: str, arm: str, seed: int, *, attempt: int = 1, ok: bool = True, value: float = 0.5):
    spec = TrialSpec(study=study, arm=arm, seed=seed, train=TrainConfig(steps=2), algorithm=resolve_algorithm("grpo"))
    result = TrialResult(
        trial_id=spec.trial_id,
        status="completed" if ok else "failed",
        error=None if ok else "RuntimeError: boom",
        final={"eval/accuracy": value} if ok else {},
        history=[{"step": 0, "train/reward_mean": value}],
    )
    return make_record(spec, result, attempt=attempt, started_at=0, finished_at=1, study=study)


def _store(tmp_path, study: str = "s") -> tuple[RecordStore, str]:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    storage = study_db.open_storage(url, create=True)
    return RecordStore.of(storage, study), url


def test_import_takes_what_is_missing_or_newer_archives_failed_attempts_and_is_idempotent(tmp_path):
    store, _ = _store(tmp_path)
    a1, a2 = _record("s", "a", 0, ok=False), _record("s", "a", 0, attempt=2, value=0.7)
    b1 = _record("s", "b", 0)
    for record in (a1, a2, b1):
        store.put(record)
    store.put(b1)  # storing the same attempt again changes nothing
    RecordStore(store.engine, "other").put(_record("other", "c", 0))  # another study, same database
    here = tmp_path / "machine"
    write_record(here, b1)

    report = import_records(here, store)
    assert (report.imported, report.present, report.archived) == (1, 1, 1)
    assert read_record(record_path(here, a2.trial_id)).fingerprint() == a2.fingerprint()
    assert [r.fingerprint() for r in read_failed_attempts(here)] == [a1.fingerprint()]
    assert sorted(r.trial_id for r in read_records(here)) == sorted([a2.trial_id, b1.trial_id])
    again = import_records(here, store)
    assert (again.imported, again.present, again.archived) == (0, 2, 0)

    # a later attempt stored elsewhere replaces an older local one (kept under superseded/)
    b2 = _record("s", "b", 0, attempt=2, value=0.9)
    store.put(b2)
    assert import_records(here, store).imported == 1
    assert read_record(record_path(here, b1.trial_id)).attempt == 2
    assert (here / "records" / "superseded" / f"{b1.trial_id}.1.json").exists()


def test_publish_sends_only_local_records_the_database_lacks(tmp_path):
    store, _ = _store(tmp_path)
    here = tmp_path / "machine"
    only_here, shared = _record("s", "a", 1), _record("s", "b", 1)
    write_record(here, only_here)
    write_record(here, shared)
    store.put(shared)
    assert publish_missing(here, store) == 1
    assert sorted(store.latest()) == sorted([only_here.trial_id, shared.trial_id])
    assert publish_missing(here, store) == 0
    assert store.completed(only_here.trial_id).fingerprint() == only_here.fingerprint()
    assert store.completed("no-such-trial") is None


def test_merge_prefers_the_later_attempt_and_a_completed_one():
    old, new = _record("s", "a", 0, ok=False), _record("s", "a", 0, attempt=2)
    assert merge([old], {new.trial_id: new}) == [new]
    assert merge([new], {old.trial_id: old}) == [new]
    failed_same = _record("s", "a", 0, attempt=2, ok=False)
    assert merge([failed_same], {new.trial_id: new}) == [new]


def test_load_results_reads_any_storage_url_and_only_its_own_study(tmp_path):
    store, url = _store(tmp_path)
    done = _record("s", "a", 0)
    store.put(done)  # ran on another machine: only in the database
    storage = study_db.open_storage(url)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    mine = queue.create_queue(storage, "s", "maximize")
    theirs = queue.create_queue(storage, "other", "maximize")
    waiting = TrialSpec(study="s", arm="a", seed=1, train=TrainConfig(steps=2), algorithm=resolve_algorithm("grpo"))
    queue.enqueue_specs(mine, [waiting], phase="compare", retries=0)
    stranger = TrialSpec(
        study="other", arm="z", seed=0, train=TrainConfig(steps=2), algorithm=resolve_algorithm("grpo")
    )
    queue.enqueue_specs(theirs, [stranger], phase="compare", retries=0)
    folder = tmp_path / "machine" / "s"
    folder.mkdir(parents=True)
    (folder / "study.yaml").write_text(
        "name: s\ncontrol: a\nseeds: 2\ntrain: {steps: 2}\narms: [{name: a, algorithm: grpo}]\n"
    )

    res = load_results(folder, storage=url)
    rows = res.trials.set_index("trial_id")["status"].to_dict()
    assert rows == {done.trial_id: "completed", waiting.trial_id: "waiting"}
    assert res.trials.set_index("trial_id").loc[done.trial_id, "eval/accuracy"] == 0.5
    assert not (folder / "records").exists()  # reading writes nothing
    assert load_results(folder).trials.empty  # without the storage: nothing here yet
