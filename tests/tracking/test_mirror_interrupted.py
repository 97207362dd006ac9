"""An interrupted MLflow mirror is completed, never left RUNNING beside a second run of its trial."""

from __future__ import annotations

import pytest
from test_tracking import assert_mirrors

from harness.tracking import records
from harness.tracking.mlflow_layout import ROLE_TAG
from harness.tracking.mlflow_mirror import Tracker, sync


class Interrupted(BaseException):
    """A Ctrl-C or a killed process: not an ``Exception``, so nothing in the mirror catches it."""


def every_run(tracker: Tracker, trial_id: str) -> list:
    """All of the trial's runs, deleted ones included: a run in MLflow's trash still counts."""
    from mlflow.entities import ViewType

    runs = tracker.client.search_runs(
        [tracker.experiment_id()], f"tags.`{ROLE_TAG}` = 'trial'", run_view_type=ViewType.ALL
    )
    return [r for r in runs if r.data.tags.get("trial_id") == trial_id]


def interrupt_on(monkeypatch, client, method: str, call: int) -> None:
    """Make the ``call``-th call of ``client.method`` interrupt the mirror."""
    original = getattr(client, method)
    calls = []

    def interrupting(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            raise Interrupted(f"interrupted in {method}")
        return original(*args, **kwargs)

    monkeypatch.setattr(client, method, interrupting)


@pytest.mark.parametrize(
    "method, call",
    [
        ("log_batch", 2),  # after the run and its params, before its metrics
        ("log_artifacts", 1),  # metrics logged, artifacts not
        ("set_terminated", 1),  # everything logged, the run still RUNNING
    ],
)
def test_an_interrupted_mirror_is_completed_in_place(study_dir, make_record, monkeypatch, method, call):
    record = make_record("grpo", 0)
    records.write_record(study_dir, record)
    tracker = Tracker(None, study_dir, "demo")
    assert tracker.prepare()  # the study's parent run exists: only the trial's mirror is interrupted
    with monkeypatch.context() as patch:
        interrupt_on(patch, tracker.client, method, call)
        with pytest.raises(Interrupted):
            tracker.log_record(record)
    (left,) = every_run(tracker, record.trial_id)
    assert left.info.status == "RUNNING"

    report = sync(study_dir)  # the partial run is not counted as present
    assert (report.already_present, report.sent, report.failed) == (0, 1, 0)
    (run,) = every_run(tracker, record.trial_id)
    assert run.info.run_id == left.info.run_id and run.info.lifecycle_stage == "active"
    assert run.info.status == "FINISHED"
    assert_mirrors(Tracker(None, study_dir, "demo"), record)

    report = sync(study_dir)
    assert (report.already_present, report.sent, report.failed) == (1, 0, 0)
    assert len(every_run(tracker, record.trial_id)) == 1


def test_a_run_left_running_beside_the_complete_one_is_not_present(study_dir, make_record, monkeypatch):
    """A re-mirror interrupted after it completed its own run, before it cleared the partial one:
    sync must not call that trial present while a RUNNING run of it is left over."""
    record = make_record("grpo", 0)
    records.write_record(study_dir, record)
    tracker = Tracker(None, study_dir, "demo")
    leftover = tracker.client.create_run(  # a partial run of an earlier record of this trial
        tracker.experiment_id(),
        tags={ROLE_TAG: "trial", "trial_id": record.trial_id, "attempt": "1"},
    )
    with monkeypatch.context() as patch:
        interrupt_on(patch, tracker.client, "delete_run", 1)
        with pytest.raises(Interrupted):
            tracker.log_record(record)

    report = sync(study_dir)
    assert (report.already_present, report.sent, report.failed) == (0, 1, 0)
    assert_mirrors(Tracker(None, study_dir, "demo"), record)
    stale = tracker.client.get_run(leftover.info.run_id).info
    assert (stale.lifecycle_stage, stale.status) == ("deleted", "KILLED")  # not RUNNING forever

    report = sync(study_dir)
    assert (report.already_present, report.sent, report.failed) == (1, 0, 0)


def test_two_mirrors_that_both_created_a_run_settle_on_one(study_dir, make_record):
    record = make_record("grpo", 0)
    records.write_record(study_dir, record)
    first, second = Tracker(None, study_dir, "demo"), Tracker(None, study_dir, "demo")
    assert first.log_record(record, _existing=[]) and second.log_record(record, _existing=[])  # neither saw the other
    assert_mirrors(first, record)
    assert len([r for r in every_run(first, record.trial_id) if r.info.lifecycle_stage == "active"]) == 1
