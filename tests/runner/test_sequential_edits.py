"""A sequential study's decision rule is fixed at its first look: an edit of it after looks were
read is refused by every reader in one line, before anything is queued or run; concurrent first
looks fix one rule; ``--new-version`` starts the looks over on fresh seeds.

The looks are driven in this process (:func:`drive`: the replay, the queue and the planted fake
trials, as workers would run them), so the tests take seconds, not minutes of worker processes.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import yaml
from fake_trials import planted
from runner_helpers import options, write_study

from harness import store as study_db
from harness.decide.analysis import analyze
from harness.decide.rules import ReadOptions
from harness.engine.spec import TrialSpec
from harness.errors import ConfigError, HarnessError
from harness.report.markdown import render_markdown
from harness.runner import queue
from harness.runner.looks import Looks
from harness.runner.run import prepare, run_study, run_worker, study_status
from harness.study.load import load_study
from harness.tracking.records import make_record, write_record
from harness.tracking.results import load_results

PLANTED = "fake_trials:planted"  # big*: a large effect; equal: the control's level, up to +-0.01
ARMS = ["grpo", "big", "equal"]  # grpo is the control


def study_file(tmp_path: Path, *, min_effect: float = 0.02, looks=(3, 5, 8), seeds=8) -> Path:
    return write_study(
        tmp_path,
        ARMS,
        seeds=seeds,
        name="seq",
        min_effect=min_effect,
        sequential={"looks": list(looks), "spending": "pocock"},
    )


def edit(path: Path, **changes) -> None:
    data = yaml.safe_load(path.read_text())
    data.update(changes)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def run_looks(setup) -> Looks:
    """Run every look a prepared study queues, in this process, as its workers would: replay,
    queue what is due, run the planted trials, until no look is due. Returns the final Looks."""
    q = queue.create_queue(setup.storage, setup.study.name, setup.study.direction)
    looks = Looks(setup.study, setup.study_file, setup.storage_url, q, say=lambda _: None)
    while True:
        looks.advance(force=True)
        ran = 0
        while (job := queue.claim_next(q)) is not None:
            spec = TrialSpec.model_validate(job.attrs[study_db.SPEC])
            result = planted(spec)
            write_record(setup.study_dir, make_record(spec, result, study=setup.study.name))
            queue.complete(q, job, result.final["eval/accuracy"])
            ran += 1
        if not ran:
            return looks


def drive(path: Path):
    """The study prepared as `harness run` prepares it, and every look it queues run (:func:`run_looks`)."""
    setup = prepare(path, options(trial_fn=PLANTED))
    return setup, run_looks(setup)


def queue_state(setup) -> list[tuple[str, int, str]]:
    return sorted((j.key, j.attempt, j.state.name) for j in queue.jobs(queue.load_queue(setup.storage, "seq")))


def started(counters: Path) -> dict[str, int]:
    return {p.name: len(p.read_text().split()) for p in counters.glob("*.started")}


def refusal(call) -> str:
    """The one line a refused reader gives."""
    with pytest.raises(HarnessError) as caught:
        call()
    text = str(caught.value)
    assert "\n" not in text
    return text


# the three edits: (the study as run, the edit, what the edit would have done, the change named)
EDITS = {
    # equal stopped at look 2 as equivalent; a stricter margin re-opens it and queues look 3
    "stricter min_effect": ({"min_effect": 0.02}, {"min_effect": 0.015}, "min_effect 0.02 -> 0.015"),
    # equal stopped at look 3; a looser margin stops it at look 2 and hides look 3's six trials
    "looser min_effect": ({"min_effect": 0.015}, {"min_effect": 0.02}, "min_effect 0.015 -> 0.02"),
    # big stopped at look 1, at 4 seeds; looks [3, 5] would say it stopped at a look of 3 seeds
    "changed looks": (
        {"looks": (4, 8)},
        {"sequential": {"looks": [3, 5], "spending": "pocock"}},
        "looks [4, 8] -> [3, 5]",
    ),
}


@pytest.mark.parametrize("case", list(EDITS))
@pytest.mark.slow
def test_an_edited_rule_is_refused_by_every_reader_in_one_line_and_nothing_is_queued_or_run(tmp_path, fake_env, case):
    as_run, edited, named = EDITS[case]
    path = study_file(tmp_path, **as_run)
    setup, looks = drive(path)
    assert looks.finished
    before_queue, before_runs = queue_state(setup), started(fake_env)
    before_states = dict(looks.state.arms)
    snapshot = setup.study_file.read_text()
    edit(path, **edited)

    line = refusal(lambda: run_study(path, options(trial_fn=PLANTED)))  # harness run
    assert named in line and "new name:" in line and "--new-version" in line
    assert line.startswith("study 'seq': the study file changes the sequential rule fixed at its first look (rule v1 ")
    assert refusal(lambda: run_worker(path, options(trial_fn=PLANTED))) == line  # harness worker
    assert refusal(lambda: study_status(path)) == line  # harness status: no look that never happened
    assert refusal(lambda: analyze(load_results(path), ReadOptions(n_permutations=50))) == line  # harness report
    q = queue.load_queue(setup.storage, "seq")  # a worker's look replay, with the edited file
    assert refusal(lambda: Looks(load_study(path), path, setup.storage_url, q, say=print).advance(True)) == line

    assert queue_state(setup) == before_queue  # nothing queued, retried or cancelled
    assert started(fake_env) == before_runs  # no trial ran
    assert setup.study_file.read_text() == snapshot  # the study folder still holds the study as run
    status = study_status(setup.study_dir).format()  # the folder reads as before
    assert all(f"  {arm}" in status and state in status for arm, state in before_states.items())


@pytest.mark.slow
def test_a_study_file_that_drops_its_sequential_section_is_refused(tmp_path, fake_env):
    path = study_file(tmp_path)
    setup, _ = drive(path)
    before_queue, before_runs = queue_state(setup), started(fake_env)
    data = yaml.safe_load(path.read_text())
    del data["sequential"]
    path.write_text(yaml.safe_dump(data, sort_keys=False))  # a fixed design would read every seed at once
    line = refusal(lambda: run_study(path, options(trial_fn=PLANTED, new_version=True)))
    assert line.startswith(
        "study 'seq': the study file drops its sequential: section, but its looks were read "
        "under the sequential rule v1 "
    )
    assert refusal(lambda: run_worker(path, options(trial_fn=PLANTED))) == line
    assert (queue_state(setup), started(fake_env)) == (before_queue, before_runs)


def test_an_unchanged_rule_is_read_as_before_and_the_report_shows_the_rule_of_each_look(tmp_path, fake_env):
    path = study_file(tmp_path)
    setup, looks = drive(path)
    assert looks.state.arms == {"big": "stopped at look 1: better", "equal": "stopped at look 2: equivalent"}
    [rule] = looks.state.rules.versions
    assert (rule.version, rule.looks, rule.min_effect, rule.spending, rule.control) == (
        1,
        [3, 5, 8],
        0.02,
        "pocock",
        "grpo",
    )
    assert set(rule.configs) == set(ARMS)

    analysis = analyze(load_results(path), ReadOptions(n_permutations=50))
    assert list(analysis.looks["rule"]) == [rule.label] * len(analysis.looks) and len(analysis.looks) == 3
    header = analysis.header["rule"]
    assert header.startswith(
        f"rule {rule.label}, fixed {rule.when}: looks at 3, 5, 8 seeds per arm (seeds 0..7), "
        "pocock spending, alpha 0.05 (bonferroni), min_effect 0.02"
    )
    text = render_markdown(analysis)
    assert f"- **Sequential rule:** {header}" in text and rule.label in text.split("## Looks")[1]

    (setup.study_dir / "optuna.db").rename(setup.study_dir / "elsewhere.db")  # offline: the folder's copy
    offline = analyze(load_results(path), ReadOptions(n_permutations=50))
    assert offline.header["rule"] == header and list(offline.looks["rule"]) == [rule.label] * 3


def test_report_options_that_would_reread_the_looks_are_refused(tmp_path, fake_env):
    path = study_file(tmp_path)
    drive(path)
    results = load_results(path)
    line = refusal(lambda: analyze(results, ReadOptions(min_effect=0.05, n_permutations=50)))
    assert "the options change it: min_effect 0.02 -> 0.05; leave those options out" in line
    assert "alpha 0.05 -> 0.1" in refusal(lambda: analyze(results, ReadOptions(alpha=0.1, n_permutations=50)))
    assert (
        len(analyze(results, ReadOptions(min_effect=0.02, n_permutations=50)).looks) == 3
    )  # the rule's own value reads


def test_concurrent_first_looks_fix_one_rule_and_a_different_study_file_queues_nothing(tmp_path, fake_env):
    """Four machines find the first look due at once, two of them with a copy of the study file
    whose min_effect differs: one rule is fixed, look 1 is queued once, and the machines whose
    file differs from the rule fixed are refused and queue nothing."""
    path = study_file(tmp_path)
    other = tmp_path / "other.yaml"
    other.write_text(path.read_text())
    edit(other, min_effect=0.05)
    setup = prepare(path, options())
    queue.create_queue(setup.storage, "seq", "maximize")
    files = [path, other]
    racers = 4
    barrier = threading.Barrier(racers)
    outcome: dict[int, object] = {}

    def machine(i: int) -> None:
        storage = study_db.open_storage(setup.storage_url)  # connections of its own, like another machine
        try:
            q = queue.load_queue(storage, "seq")
            looks = Looks(load_study(files[i % 2]), files[i % 2], setup.storage_url, q, say=lambda _: None)
            barrier.wait()
            outcome[i] = looks.advance(force=True)
        except HarnessError as err:
            outcome[i] = err
        finally:
            storage.engine.dispose()

    threads = [threading.Thread(target=machine, args=(i,)) for i in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(outcome) == racers, outcome
    winners = [i for i, o in outcome.items() if isinstance(o, int)]
    losers = [i for i, o in outcome.items() if isinstance(o, HarnessError)]
    assert len(winners) == len(losers) == 2 and {i % 2 for i in winners} == {winners[0] % 2}, outcome
    assert all("the study file changes the sequential rule" in str(outcome[i]) for i in losers)
    assert sorted(outcome[i] for i in winners) == [0, 9]  # look 1 queued once, by one of them
    assert len(queue_state(setup)) == 9
    [rule] = load_results(path).meta.sequential_rules  # one rule, the winners'
    assert rule["version"] == 1 and rule["min_effect"] == (0.02, 0.05)[winners[0] % 2]


@pytest.mark.slow
def test_new_version_starts_the_looks_over_on_fresh_seeds_and_keeps_the_earlier_trials_apart(tmp_path, fake_env):
    path = study_file(tmp_path)
    setup, _ = drive(path)
    first_trials = {key for key, _, _ in queue_state(setup)}
    edit(path, min_effect=0.015)
    assert "--new-version" in refusal(lambda: prepare(path, options()))
    with pytest.raises(ConfigError, match=r"seeds 0\.\.7 were read under rule v1 .*\(e\.g\. 8\.\.15\)"):
        prepare(path, options(new_version=True))  # the same seeds would re-read what was seen

    edit(path, min_effect=0.015, seeds=list(range(8, 16)))
    setup = prepare(path, options(trial_fn=PLANTED, new_version=True))
    looks = run_looks(setup)
    v1, v2 = looks.state.rules.versions
    assert (v1.version, v1.min_effect, v2.version, v2.min_effect, v2.seeds) == (1, 0.02, 2, 0.015, list(range(8, 16)))
    assert looks.finished and looks.state.rules.in_force == v2
    assert first_trials < {key for key, _, _ in queue_state(setup)}  # the earlier version's trials are kept

    results = load_results(path)
    assert set(results.trials["seed"]) <= set(range(8, 16))  # never pooled with version 1's
    assert set(results.earlier["trial_id"]) == first_trials  # listed as an earlier design
    analysis = analyze(results, ReadOptions(n_permutations=50))
    assert set(analysis.looks["rule"]) == {v2.label} and analysis.looks["look"].min() == 1  # the looks start over
    assert analysis.header["rule"].endswith(
        f"replaces {v1.label} (fixed {v1.when}; its trials are kept and listed, not used)"
    )
    edit(path, min_effect=0.02)  # back to version 1's rule: that is an edit of version 2 now
    assert "min_effect 0.015 -> 0.02" in refusal(lambda: study_status(path))


@pytest.mark.slow
def test_the_commands_refuse_the_edit_with_one_line_and_exit_2(tmp_path, fake_env, monkeypatch, capsys):
    from cli_main import run_main

    path = study_file(tmp_path)
    drive(path)
    edit(path, min_effect=0.015)
    fast = ["--trial-fn", PLANTED, "--no-tracking"]
    for args in (["run", str(path), *fast], ["worker", str(path), *fast], ["status", str(path)], ["report", str(path)]):
        code, out, err = run_main(monkeypatch, capsys, *args)
        assert code == 2, (args, out, err)
        *said, line = err.splitlines()  # status and report say first which study they read
        assert line.startswith("error: study 'seq': the study file changes the sequential rule"), err
        assert said == ([] if args[0] in ("run", "worker") else [f"study seq: {path}, {tmp_path / 'out' / 'seq'}"])
        assert "min_effect 0.02 -> 0.015" in err
    code, _, err = run_main(monkeypatch, capsys, "run", str(path), "--new-version", *fast)
    assert code == 2 and "--new-version starts the looks over, so they need seeds no earlier version read" in err
    assert not (tmp_path / "reports").exists()  # the refused report wrote nothing
