"""Claiming on PostgreSQL: ``claim_next`` takes the oldest waiting trial no other transaction
holds, so processes claiming at once take different trials instead of waiting on one row."""

from __future__ import annotations

import threading

import sqlalchemy as sa

from harness import store as study_db
from harness.runner import queue


class _Spec:
    """Just what enqueue_specs reads from a TrialSpec."""

    def __init__(self, trial_id: str):
        self.trial_id, self.arm = trial_id, trial_id.split("-")[0]

    def model_dump(self, mode="json"):
        return {"arm": self.arm, "trial_id": self.trial_id}


def test_claim_next_skips_a_row_another_claim_holds_and_takes_the_oldest_free(pg_url):
    study = queue.create_queue(study_db.open_storage(pg_url, create=True), "s", "maximize")
    queue.enqueue_specs(study, [_Spec(f"a-s{i}") for i in range(3)], phase="compare", retries=0)
    other = sa.create_engine(pg_url)
    try:
        with other.begin() as held:  # another process, mid-claim on the oldest trial
            held.execute(
                sa.text("SELECT trial_id FROM trials WHERE state = 'WAITING' ORDER BY number LIMIT 1 FOR UPDATE")
            ).scalar_one()
            claimed = []  # in a thread: waiting on the held row would hang the test
            claimer = threading.Thread(target=lambda: claimed.append(queue.claim_next(study, "host:1")), daemon=True)
            claimer.start()
            claimer.join(timeout=30)
            assert claimed, "claim_next waited on a row another transaction holds"
            job = claimed[0]
            assert (job.key, job.attrs[study_db.WORKER], job.state.name) == ("a-s1", "host:1", "RUNNING")
        assert queue.claim_next(study, "host:2").key == "a-s0"  # released uncommitted: still waiting
        assert queue.claim_next(study, "host:2").key == "a-s2"
        assert queue.claim_next(study, "host:2") is None
    finally:
        other.dispose()
    assert {j.key: j.attrs[study_db.WORKER] for j in queue.jobs(study)} == {
        "a-s0": "host:2",
        "a-s1": "host:1",
        "a-s2": "host:2",
    }
