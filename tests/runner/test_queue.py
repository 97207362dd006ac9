"""The Optuna-storage queue: atomic claims, idempotent enqueue, retries, stale jobs, slots."""

from __future__ import annotations

import threading
import time

import optuna
import pytest
from optuna.trial import TrialState
from runner_helpers import at_once

from harness import store as study_db
from harness.runner import queue
from harness.runner.slots import plan_slots


class _Spec:
    """Just what enqueue_specs reads from a TrialSpec."""

    def __init__(self, trial_id: str):
        self.trial_id, self.arm = trial_id, trial_id.split("-")[0]

    def model_dump(self, mode="json"):
        return {"arm": self.arm, "trial_id": self.trial_id}


@pytest.fixture
def q(tmp_path):
    url = study_db.default_storage_url(tmp_path)
    storage = study_db.open_storage(url, create=True)
    return queue.create_queue(storage, "s", "maximize"), url


def test_enqueue_is_idempotent_and_requeues_failures(q):
    study, _ = q
    specs = [_Spec(f"a-s{i}") for i in range(4)]
    first = queue.enqueue_specs(study, specs, phase="compare", retries=1)
    again = queue.enqueue_specs(study, specs, phase="compare", retries=1)
    assert (first.added, again.added, again.requeued) == (4, 0, 0)
    assert len(study.get_trials()) == 4

    job = queue.claim_next(study)
    assert job is not None and job.attempt == 1 and job.max_attempt == 2
    assert queue.fail(study, job, "RuntimeError: boom") is True  # budget left: re-queued
    retry = [j for j in queue.jobs(study) if j.key == job.key and j.attempt == 2]
    assert len(retry) == 1 and retry[0].state == TrialState.WAITING
    assert queue.jobs(study)[0].reason == "RuntimeError: boom"

    # the last attempt fails: no more retries this run; re-enqueueing gives a fresh budget
    job2 = None
    while job2 is None or job2.key != job.key:
        job2 = queue.claim_next(study)
        if job2.key != job.key:
            queue.complete(study, job2, 0.5)
    assert queue.fail(study, job2, "RuntimeError: boom") is False
    report = queue.enqueue_specs(study, specs, phase="compare", retries=0)
    assert (report.added, report.requeued) == (0, 1)
    assert queue.latest(queue.jobs(study))[job.key].attempt == 3

    # a waiting trial that left the design is cancelled, with a reason
    assert job.key == "a-s0"
    report = queue.enqueue_specs(study, specs[1:], phase="compare", retries=0)
    assert report.cancelled == 1
    gone = queue.latest(queue.jobs(study))[job.key]
    assert gone.state == TrialState.FAIL and gone.reason == "no longer in the study design"


def test_claim_is_atomic_across_connections(q):
    """Many claimers with their own storage connections never claim the same job twice."""
    study, url = q
    queue.enqueue_specs(study, [_Spec(f"a-s{i}") for i in range(24)], phase="compare", retries=0)
    claimed: list[str] = []
    lock = threading.Lock()
    errors = []

    def claimer():
        try:
            mine = queue.load_queue(study_db.open_storage(url), "s")
            while (job := queue.claim_next(mine)) is not None:
                with lock:
                    claimed.append(job.key)
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=claimer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert sorted(claimed) == sorted(f"a-s{i}" for i in range(24))  # each exactly once


def test_stale_job_is_failed_once_and_requeued(q):
    study, url = q
    queue.enqueue_specs(study, [_Spec("a-s0")], phase="compare", retries=0)
    job = queue.claim_next(study)
    assert queue.stale_jobs(study, 60) == []
    time.sleep(2.2)  # the database clock has 1 s resolution on SQLite
    other = queue.load_queue(study_db.open_storage(url), "s")
    handled = queue.fail_stale(other, 1)
    assert [(s.job.key, s.reason.split(":")[0], s.requeued) for s in handled] == [("a-s0", "worker lost", True)]
    assert queue.fail_stale(study, 1) == []  # exactly one process handles it
    tries = queue.attempts(queue.jobs(study))["a-s0"]
    assert [t.state for t in tries] == [TrialState.FAIL, TrialState.WAITING]
    assert tries[0].reason.startswith("worker lost")
    assert tries[1].max_attempt == 2  # a lost worker does not use up the retry budget
    # the dead worker's late tell is refused; its job was handed on
    assert queue.complete(study, job, 0.5) is False


def test_release_puts_a_job_back(q):
    study, _ = q
    queue.enqueue_specs(study, [_Spec("a-s0")], phase="compare", retries=0)
    job = queue.claim_next(study)
    assert queue.claim_next(study) is None
    assert queue.release(study, job)
    again = queue.claim_next(study)
    assert again is not None and again.optuna_id == job.optuna_id and again.attempt == 1


def test_tuning_slots_are_an_exact_budget(q):
    study, _ = q
    assert queue.enqueue_slots(study, arm="a", n_trials=3, retries=0).added == 3
    assert queue.enqueue_slots(study, arm="a", n_trials=3, retries=0).added == 0
    job = queue.claim_next(study)
    trial = optuna.trial.Trial(study, job.optuna_id)
    lr = trial.suggest_float("lr", 1e-4, 1e-2, log=True)
    job.params = {"lr": lr}
    queue.fail(study, job, "boom")
    report = queue.enqueue_slots(study, arm="a", n_trials=3, retries=0)
    assert (report.added, report.requeued) == (0, 1)
    retry = queue.latest(queue.jobs(study))[job.key]
    assert retry.attempt == 2
    claimed = None
    while claimed is None or claimed.key != job.key:
        claimed = queue.claim_next(study)
    again = optuna.trial.Trial(study, claimed.optuna_id)
    assert again.suggest_float("lr", 1e-4, 1e-2, log=True) == pytest.approx(lr)  # same configuration


def test_plan_slots_pins_devices_and_splits_cores():
    gpu = plan_slots(None, gpus=["0", "3"], cores=16)
    assert [s.device for s in gpu] == ["cuda:0", "cuda:3"]
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in gpu] == ["0", "3"]
    assert gpu[0].env["OMP_NUM_THREADS"] == "8"
    cpu = plan_slots(3, gpus=[], cores=8)
    assert [s.device for s in cpu] == ["cpu"] * 3 and cpu[0].env["OMP_NUM_THREADS"] == "2"
    assert len(plan_slots(None, gpus=[], cores=4)) == 1


def test_storage_errors_never_show_credentials(tmp_path):
    with pytest.raises(study_db.StorageError) as err:
        study_db.open_storage("postgresql://alice:s3cret-pw@127.0.0.1:1/db", create=True)
    assert "s3cret-pw" not in str(err.value) and "alice:***@127.0.0.1" in str(err.value)
    with pytest.raises(study_db.StorageError, match="harness run"):
        study_db.open_storage(study_db.default_storage_url(tmp_path / "missing"))


def _fail_all(study) -> None:
    while (job := queue.claim_next(study)) is not None:
        queue.fail(study, job, "RuntimeError: boom", retry=False)


def test_re_runs_at_once_retry_each_failure_once(q):
    """Several machines re-running a study at the same instant queue each failed trial's next
    attempt once, and each never-queued trial once."""
    study, url = q
    specs = [_Spec(f"a-s{i}") for i in range(6)]
    queue.enqueue_specs(study, specs[:4], phase="compare", retries=0)
    _fail_all(study)
    reports = at_once(url, "s", 4, lambda mine: queue.enqueue_specs(mine, specs, phase="compare", retries=0))
    assert sorted((r.added, r.requeued) for r in reports) == [(0, 0)] * 3 + [(2, 4)]
    tries = queue.attempts(queue.jobs(study))
    assert {key: [j.attempt for j in js] for key, js in tries.items()} == {
        **{f"a-s{i}": [1, 2] for i in range(4)},
        "a-s4": [1],
        "a-s5": [1],
    }
    numbers = sorted(j.number for j in queue.jobs(study))
    assert numbers == list(range(len(numbers)))  # numbered as Optuna numbers its trials


def test_a_worker_retry_and_a_re_run_retry_of_one_failure_queue_one_attempt(q):
    """A re-run that retried a failure first leaves the failing worker's own retry nothing to add,
    and the other way round."""
    study, _ = q
    queue.enqueue_specs(study, [_Spec("a-s0"), _Spec("a-s1")], phase="compare", retries=1)
    first = queue.claim_next(study)
    queue.fail(study, first, "RuntimeError: boom", retry=False)
    assert queue.enqueue_specs(study, [_Spec("a-s0"), _Spec("a-s1")], phase="compare", retries=1).requeued == 1
    queue.requeue(study, first)  # the worker's retry, late
    assert [j.attempt for j in queue.attempts(queue.jobs(study))[first.key]] == [1, 2]

    second = queue.claim_next(study)
    assert second.key != first.key
    assert queue.fail(study, second, "RuntimeError: boom") is True  # the worker's retry first
    assert queue.enqueue_specs(study, [_Spec("a-s0"), _Spec("a-s1")], phase="compare", retries=1).requeued == 0
    assert [j.attempt for j in queue.attempts(queue.jobs(study))[second.key]] == [1, 2]


def test_tuning_slots_queued_at_once_are_queued_once(q):
    study, url = q
    reports = at_once(url, "s", 4, lambda mine: queue.enqueue_slots(mine, arm="a", n_trials=5, retries=0))
    assert sorted(r.added for r in reports) == [0, 0, 0, 5]
    assert sorted(j.key for j in queue.jobs(study)) == [f"slot{i:04d}" for i in range(5)]


def test_a_lost_workers_trial_that_left_the_design_is_superseded_not_requeued(q):
    # a worker was killed mid-trial, then the arm was edited: its trial is no longer in the design,
    # so it is failed as superseded and not run again (it would be outside --retries, unused)
    study, url = q
    queue.enqueue_specs(study, [_Spec("a-s0"), _Spec("b-s0")], phase="compare", retries=0)
    queue.claim_next(study), queue.claim_next(study)
    time.sleep(2.2)  # the database clock has 1 s resolution on SQLite
    other = queue.load_queue(study_db.open_storage(url), "s")
    edited = {"a-s0": "from an earlier version of arm a"}
    handled = queue.fail_stale(other, 1, left_design=lambda job: edited.get(job.key))
    reasons = {s.job.key: s.reason for s in handled}
    assert {s.job.key: s.requeued for s in handled} == {"a-s0": False, "b-s0": True}
    assert reasons["a-s0"].startswith("superseded: worker lost") and "earlier version of arm a" in reasons["a-s0"]
    assert reasons["b-s0"].startswith("worker lost")
    tries = queue.attempts(queue.jobs(study))
    assert [t.state for t in tries["a-s0"]] == [TrialState.FAIL]  # not queued again
    assert tries["a-s0"][0].reason.startswith(queue.SUPERSEDED)
    assert [t.state for t in tries["b-s0"]] == [TrialState.FAIL, TrialState.WAITING]


def test_the_worker_reads_an_edited_arm_as_left_the_design(tmp_path):
    from types import SimpleNamespace

    import yaml
    from runner_helpers import write_study

    from harness.runner.worker import left_design
    from harness.store import SPEC
    from harness.study.expand import condition_spec
    from harness.study.load import load_study

    path = write_study(tmp_path, ["ok_a", "ok_b"])
    before = load_study(path)
    old = condition_spec(before, "ok_a", 0)
    job = SimpleNamespace(phase="compare", attrs={SPEC: old.model_dump(mode="json")}, key="ok_a-s0")
    assert left_design(before, job) is None
    data = yaml.safe_load(path.read_text())
    data["arms"][0]["set"] = {"eps_high": 0.28}  # the arm edited while its worker was dead
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert left_design(load_study(path), job) == "from an earlier version of arm ok_a"


def test_a_database_lost_while_claiming_leaves_no_claim_behind(q, monkeypatch):
    """The job is read before its claim commits: an outage in that read claims nothing, so no
    trial is left RUNNING under a claim its worker never learnt it holds."""
    from sqlalchemy.exc import OperationalError

    from harness.store import optuna_tables

    study, _ = q
    queue.enqueue_specs(study, [_Spec("a-s0")], phase="compare", retries=0)

    def unreachable(*_args):
        raise OperationalError("SELECT", {}, Exception("server closed the connection unexpectedly"))

    with monkeypatch.context() as patched:
        patched.setattr(optuna_tables, "load_trial", unreachable)
        with pytest.raises(OperationalError):
            queue.claim_next(study, owner="host:1 cpu")
    [waiting] = queue.jobs(study)
    assert waiting.state == TrialState.WAITING
    job = queue.claim_next(study, owner="host:1 cpu")
    assert job is not None and job.key == "a-s0" and job.state == TrialState.RUNNING
    assert job.attrs["worker"] == "host:1 cpu"
    [claimed] = queue.jobs(study)
    assert claimed.state == TrialState.RUNNING
