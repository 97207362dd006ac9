"""A sequential study run look by look: the runner and the workers queue each look once it is due,
exactly once however many processes find it due, and stop each arm once it is decided."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from optuna.trial import TrialState
from runner_helpers import options, write_study

from harness import store as study_db
from harness.decide.sequential.pools import look_specs
from harness.runner import queue
from harness.runner.looks import Looks
from harness.runner.run import _Phases, prepare, run_study, run_worker, study_status
from harness.study.expand import expand
from harness.study.load import load_study

PLANTED = "fake_trials:planted"  # big* arms: a large effect; the others: equal
LOOKS = [3, 5, 8]
ARMS = ["grpo", "big", "equal"]  # grpo is the control


def sequential_study(tmp_path: Path) -> Path:
    return write_study(tmp_path, ARMS, seeds=8, name="seq", sequential={"looks": LOOKS, "spending": "pocock"})


def seeds_run(counters: Path, arm: str) -> list[int]:
    """The seeds at which ``arm``'s trials ran (each trial counted once per call)."""
    runs = []
    for path in counters.glob(f"{arm}-s*.started"):  # <arm>-s<seed>-<hash>.started
        runs += [int(path.name[len(arm) + 2 :].split("-")[0])] * len(path.read_text().split())
    return sorted(runs)


def jobs_of(setup) -> list[queue.Job]:
    return queue.jobs(queue.load_queue(setup.storage, setup.study.name))


def assert_stopped_early(counters: Path, pool: list[int]) -> None:
    assert seeds_run(counters, "big") == pool[: LOOKS[0]]  # decided at look 1: no more seeds
    assert seeds_run(counters, "equal") == seeds_run(counters, "grpo") == pool[: LOOKS[-1]]


@pytest.mark.slow
def test_a_large_effect_stops_at_the_first_look_and_a_rerun_queues_nothing(tmp_path, fake_env):
    path = sequential_study(tmp_path)
    summary = run_study(path, options(trial_fn=PLANTED, workers=2))
    text = summary.format()
    assert summary.exit_code == 0, text
    pool = load_study(path).seeds
    assert_stopped_early(fake_env, pool)
    assert "19 trials: 19 completed" in text and "not queued" not in text  # 3 x 3 + 2 x 2 + 2 x 3
    assert re.search(r"^sequential: look 3 of 3 \(finished\)$", text, re.MULTILINE)
    assert re.search(r"^  big +stopped at look 1: better$", text, re.MULTILINE)
    assert re.search(r"^  equal +undecided after the last look$", text, re.MULTILINE)
    status = study_status(path).format()
    assert "comparison: 19 trials: 19 completed" in status
    assert re.search(r"^  big +stopped at look 1: better$", status, re.MULTILINE)

    opts = options(trial_fn=PLANTED)
    setup = prepare(path, opts)
    before = len(jobs_of(setup))
    again = run_study(path, opts)
    assert again.exit_code == 0, again.format()
    assert len(jobs_of(setup)) == before == 19  # nothing queued twice, no look queued again
    assert "nothing to run" in opts.stream.getvalue()
    assert_stopped_early(fake_env, pool)  # and nothing ran again


def test_processes_that_find_the_same_look_due_at_once_queue_it_once(tmp_path, fake_env):
    path = sequential_study(tmp_path)
    setup = prepare(path, options())
    queue.create_queue(setup.storage, "seq", "maximize")
    racers = 4
    barrier = threading.Barrier(racers)
    added: list[int] = []
    errors: list[BaseException] = []

    def machine(replay: bool) -> None:
        storage = study_db.open_storage(setup.storage_url)  # connections of its own, like another machine
        q = queue.load_queue(storage, "seq")
        try:
            if replay:  # the whole path: replay the study, find look 1 due, queue it
                looks = Looks(setup.study, setup.study_file, setup.storage_url, q, say=lambda _: None)
                barrier.wait()
                added.append(looks.advance(force=True))
            else:  # the queueing alone, all at the same instant: every look's trials
                barrier.wait()
                added.append(len(queue.enqueue_missing(q, expand(setup.study), phase="compare", retries=0)))
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)
        finally:
            storage.engine.dispose()

    first, design = look_specs(setup.study, 0, ARMS), expand(setup.study)
    for replay, expected, new in ((True, first, len(first)), (False, design, len(design) - len(first))):
        added.clear()
        threads = [threading.Thread(target=machine, args=(replay,)) for _ in range(racers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors, errors
        assert sorted(added) == [0] * (racers - 1) + [new]  # one process queued them, the others nothing
        keys = Counter(j.key for j in jobs_of(setup))
        assert keys == Counter({s.trial_id: 1 for s in expected})  # each trial once
    numbers = sorted(j.number for j in jobs_of(setup))
    assert numbers == list(range(len(numbers)))  # numbered as Optuna numbers its trials
    assert all(j.state == TrialState.WAITING and j.attempt == 1 for j in jobs_of(setup))


@pytest.mark.slow
def test_a_worker_alone_queues_the_next_looks_and_exits_when_the_study_is_finished(tmp_path, fake_env):
    """No driver: after look 1 the queue is empty but the study is not finished, so the worker
    does not exit; it queues look 2 and 3 itself and exits once the replay says finished."""
    path = sequential_study(tmp_path)
    opts = options(trial_fn=PLANTED, workers=2)
    setup = prepare(path, opts)
    q = queue.create_queue(setup.storage, "seq", "maximize")
    assert Looks(setup.study, setup.study_file, setup.storage_url, q, say=lambda _: None).advance(force=True) == 9
    summary = run_worker(setup.study_dir, opts)
    assert summary.exit_code == 0, summary.format()
    assert_stopped_early(fake_env, setup.study.seeds)
    assert "sequential: look 3 of 3 (finished)" in summary.format()
    assert all(j.state == TrialState.COMPLETE for j in jobs_of(setup))


@pytest.mark.slow
def test_a_worker_of_a_tuned_study_waits_for_the_comparison_trials(tmp_path, fake_env, capfd):
    """A worker that is not the runner's (no hold file) carries on from tuning into the
    comparison instead of exiting between the phases."""
    tuning = {"n_trials": 1, "seeds": [100], "search_space": {"lr": {"low": 1.0e-4, "high": 1.0e-2, "log": True}}}
    path = write_study(tmp_path, ["ok_a", "ok_b"], seeds=1, tuning=tuning)
    opts = options()
    setup = prepare(path, opts)
    phases = _Phases(setup, opts, workers=1)
    phases.start()  # the runner queues the tuning budget, then (here) leaves the running to the worker
    out: dict = {}
    worker = threading.Thread(target=lambda: out.update(summary=run_worker(setup.study_dir, opts)))
    worker.start()
    try:
        deadline = time.monotonic() + 120
        while any(queue.has_work(q) for q in phases.tune.values()) or "waiting for `harness run`" not in (
            err := capfd.readouterr().err
        ):
            assert time.monotonic() < deadline, "the tuning trials did not finish"
            time.sleep(0.3)
        assert "tuning is over; waiting for `harness run` to queue the comparison trials" in err
        time.sleep(1.0)
        assert worker.is_alive()  # nothing waiting or running anywhere, and still there
        phases.tick()  # the runner queues the comparison trials
        worker.join(timeout=120)
    finally:
        phases.close()
    assert not worker.is_alive()
    summary = out["summary"]
    assert summary.exit_code == 0, summary.format()
    compare = [t for t in summary.trials if t.phase == "compare"]
    assert len(compare) == 2 and all(t.status == "completed" for t in compare)
