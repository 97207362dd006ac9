"""The seeds a look reads and the trials it adds come from one module: the replay reads each look
on the seeds the runner queued for it, and the runner queues every look a condition needs."""

from harness.decide.sequential.pools import due_trials, look_pool, look_specs
from harness.study.load import parse_study
from harness.study.sections import AA_SEED_OFFSET
from harness.tracking.study_meta import StudyMeta

LOOKS = [2, 4, 6]


def sequential_study():
    return parse_study(
        {
            "name": "seq",
            "control": "grpo",
            "seeds": [7, 3, 9, 1, 4, 8],
            "calibration": "aa",
            "sequential": {"looks": LOOKS},
            "arms": [{"name": "grpo", "algorithm": "grpo"}, {"name": "dr", "algorithm": "dr_grpo"}],
        }
    )


def test_the_replay_reads_a_look_on_exactly_the_seeds_queued_up_to_it():
    s = sequential_study()
    meta = StudyMeta(seeds=s.seeds, seed_pools={c.name: s.condition_seeds(c) for c in s.iter_conditions()})
    for condition in s.conditions():
        queued: list[int] = []
        for look, n in enumerate(LOOKS):
            queued += [t.seed for t in look_specs(s, look, [condition])]
            assert look_pool(meta, condition, n) == queued
    assert look_pool(meta, "grpo-aa", 2) == [AA_SEED_OFFSET + 7, AA_SEED_OFFSET + 3]  # its own pool


def test_a_condition_that_wants_a_look_gets_every_look_up_to_it_in_the_designs_order():
    s = sequential_study()
    due = due_trials(s, {"dr": 2, "grpo": 1})
    assert [[(t.arm, t.seed) for t in trials] for trials in due] == [
        [("grpo", 7), ("dr", 7), ("grpo", 3), ("dr", 3)],
        [("grpo", 9), ("dr", 9), ("grpo", 1), ("dr", 1)],
        [("dr", 4), ("dr", 8)],
    ]
    assert [t.trial_id for t in due[1]] == [t.trial_id for t in look_specs(s, 1, ["grpo", "dr"])]


def test_nothing_wanted_is_nothing_due():
    assert due_trials(sequential_study(), {}) == []
