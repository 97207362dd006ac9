"""A sequential study on several machines sharing one PostgreSQL storage: a look is queued once
however many machines find it due at once, and when the `harness run` machine dies after the
first look, a worker on another machine queues and runs the rest of the study.

A "machine" is a folder the harness commands run in, with its own ``runs/<study>``
(:class:`faults_helpers.Machine`).
"""

from __future__ import annotations

from collections import Counter

import pytest
import yaml
from faults_helpers import Machine, queue_jobs, record_files, wait_for, wait_process
from optuna.trial import TrialState
from runner_helpers import at_once
from slowness import Deadline, slowness

from harness import store as study_db
from harness.decide.sequential.pools import look_specs
from harness.errors import HarnessError
from harness.runner import queue
from harness.runner.looks import Looks
from harness.store import rules as sequential_rules
from harness.study.expand import expand
from harness.study.load import load_study

PLANTED = "fake_trials:planted"  # big* arms: a large effect; the others: equal


def fast() -> list[str]:
    """Fast timings; a live trial's heartbeat is stale after 3 s (on an idle machine: stretched by
    :func:`slowness`, so a busy machine's late heartbeat does not make a live trial look dead)."""
    grace = f"{3 * slowness():g}"
    timings = ["--poll-interval", "0.2", "--heartbeat-interval", "1", "--grace-period", grace]
    return ["--trial-fn", PLANTED, *timings, "--no-tracking"]


def write_sequential(folder, name: str = "seq"):
    """Arms grpo (control), big and equal; a pool of 8 seeds bought at looks of 3, 5 and 8."""
    folder.mkdir(parents=True, exist_ok=True)
    data = {
        "name": name,
        "seeds": 8,
        "control": "grpo",
        "arms": [{"name": arm, "algorithm": "grpo"} for arm in ("grpo", "big", "equal")],
        "sequential": {"looks": [3, 5, 8], "spending": "pocock"},
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_machines_queueing_the_same_look_at_once_queue_it_once(tmp_path, pg_url):
    study = load_study(write_sequential(tmp_path))
    storage = study_db.open_storage(pg_url, create=True)
    queue.create_queue(storage, study.name, "maximize")
    specs = [*look_specs(study, 0, ["grpo", "big", "equal"]), *expand(study)]  # look 1 twice over
    added = at_once(pg_url, study.name, 6, lambda q: len(queue.enqueue_missing(q, specs, phase="compare", retries=0)))
    design = expand(study)
    assert sorted(added) == [0] * 5 + [len(design)]
    jobs = queue_jobs(pg_url, study.name)
    assert Counter(j.key for j in jobs) == Counter({s.trial_id: 1 for s in design})
    assert sorted(j.number for j in jobs) == list(range(len(design)))
    storage.engine.dispose()


def test_machines_finding_the_first_look_due_at_once_fix_one_rule(tmp_path, pg_url):
    """Six machines find the first look due at once, half of them with a study file whose
    min_effect differs: one rule is fixed in the shared database, look 1 is queued once, and the
    machines whose file differs from the fixed rule are refused before they queue anything."""
    files = [write_sequential(tmp_path / "a"), write_sequential(tmp_path / "b")]
    data = yaml.safe_load(files[1].read_text())
    files[1].write_text(yaml.safe_dump({**data, "min_effect": 0.05}, sort_keys=False))
    storage = study_db.open_storage(pg_url, create=True)
    queue.create_queue(storage, "seq", "maximize")
    turn = iter(range(6))

    def machine(q):
        path = files[next(turn) % 2]  # each thread takes the next file, alternately
        looks = Looks(load_study(path), path, pg_url, q, say=lambda _: None)
        try:
            return looks.advance(force=True)
        except HarnessError as err:
            return err

    outcomes = at_once(pg_url, "seq", 6, machine)
    queued = sorted(o for o in outcomes if isinstance(o, int))
    refused = [o for o in outcomes if isinstance(o, HarnessError)]
    assert len(queued) == len(refused) == 3 and queued == [0, 0, 9], outcomes
    assert all("the study file changes the sequential rule fixed at its first look" in str(e) for e in refused)
    rules = sequential_rules.stored(storage.engine, "seq")
    assert len(rules) == 1 and rules[0]["version"] == 1
    assert len(queue_jobs(pg_url, "seq")) == 9  # look 1, once
    storage.engine.dispose()


@pytest.mark.slow
def test_a_worker_on_another_machine_runs_the_next_looks_when_the_runner_machine_dies(tmp_path, fault_env, pg_url):
    a, b = Machine(tmp_path, "machine_a"), Machine(tmp_path, "machine_b")
    study_a, study_b = write_sequential(a.dir), write_sequential(b.dir)  # the same file, copied
    # look 2's trials (seeds 3 and 4) hold until released: A dies while they run, whatever the load
    release = tmp_path / "release"
    env = {"FAKE_HOLD_FROM_SEED": "3", "FAKE_RELEASE_FILE": str(release)}

    def completed() -> list:
        return [j for j in queue_jobs(pg_url, "seq") if j.state == TrialState.COMPLETE]

    def look_two_running() -> bool:
        jobs = queue_jobs(pg_url, "seq")
        return sum(j.state == TrialState.COMPLETE for j in jobs) == 9 and any(
            j.state == TrialState.RUNNING for j in jobs
        )

    try:
        runner = a.start("run", study_a.name, "--storage", pg_url, "--workers", "1", *fast(), label="run", env=env)
        wait_for(look_two_running, 120, "the first look's 9 trials, then look 2 running", unless_ended=runner)
        runner.kill()  # the `harness run` machine dies; its orphaned worker puts its trial back and stops
        assert wait_process(runner, Deadline(30)) is not None, "the killed `harness run` did not end"
        wait_for(
            lambda: not any(j.state == TrialState.RUNNING for j in queue_jobs(pg_url, "seq")),
            60,
            "machine A's worker to stop",
        )
        assert len(completed()) == 9  # A died inside look 2
        release.touch()
        code, _, err = b.run(
            "worker", study_b.name, "--storage", pg_url, "--workers", "1", *fast(), label="worker", env=env, timeout=240
        )
    finally:
        a.stop_all()
        b.stop_all()
    assert code == 0, err
    assert "look 3 of 3: queued 6 trials (grpo, equal)" in err  # B worked out the last look itself
    jobs = queue_jobs(pg_url, "seq")
    done = Counter(j.key for j in jobs if j.state == TrialState.COMPLETE)
    assert set(done.values()) == {1} and len(done) == 19  # each trial once; big only at look 1
    study = load_study(study_b)
    big = {s.trial_id for s in look_specs(study, 0, ["big"])}
    assert {k for k in done if k.startswith("big-")} == big
    last = {s.trial_id for s in look_specs(study, 2, ["grpo", "equal"])}
    assert last <= set(record_files(b.study_dir("seq")))  # run on machine B

    code, out, err = b.run("status", study_b.name, "--storage", pg_url, label="status")
    assert code == 0, err
    assert "sequential: look 3 of 3 (finished)" in out
    assert "stopped at look 1: better" in out
