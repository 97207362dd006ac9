"""A sequential study replayed look by look: who stops where, and which looks are wanted next."""

import pytest
from report_fakes import CONDITIONS, PRIMARY, make_results

from harness import stats
from harness.decide.comparisons import arm_scores
from harness.decide.frames import meta_of
from harness.decide.rules import DecisionRules, ReadOptions
from harness.decide.sequential.replay import replay

LOOKS = [3, 5, 8]


def sequential_results(seeds_of: dict[str, int], *, failed=None, pending=None, spending="pocock"):
    """Fake results where condition c has trials on seeds 0..seeds_of[c]-1 (of a pool of 8)."""
    res = make_results(seeds=tuple(range(8)), failed=failed or {}, pending=pending)
    keep = [row.seed < seeds_of[row.arm] for row in res.trials.itertuples()]
    res.trials = res.trials[keep].reset_index(drop=True)
    res.meta.update(sequential={"looks": LOOKS, "spending": spending}, seeds=list(range(8)))
    return res


def run(res, min_effect=0.05):
    scores = {c: arm_scores(res, c, PRIMARY) for c in CONDITIONS}
    return replay(res, scores, DecisionRules.of(meta_of(res), ReadOptions(min_effect=min_effect)))


def test_a_large_effect_stops_at_the_first_look_while_an_equal_arm_goes_on():
    out = run(sequential_results({"grpo": 3, "big": 3, "null": 3}))
    big, null = out.states[("big", "grpo")], out.states[("null", "grpo")]
    assert (big.verdict, big.stopped_at) == ("better", 0)
    assert null.stopped_at is None and null.waiting == 1
    assert out.wanted == {"null": 1, "grpo": 1}  # the stopped arm gets no more seeds
    assert out.current_look == 2 and not out.finished
    first = out.table[out.table["look"] == 1].set_index("condition")
    assert list(first["decision"]) == ["stop", "continue"]


def test_the_look_interval_is_the_repeated_one_at_alpha_over_the_family():
    res = sequential_results({"grpo": 3, "big": 3, "null": 3})
    out = run(res)
    row = out.table[(out.table["condition"] == "null") & (out.table["look"] == 1)].iloc[0]
    look = stats.Look((3,), 8, "pocock")
    assert row["ci_level"] == pytest.approx(2 * stats.verdict.special.ndtr(look.bound(0.05 / 2)) - 1)
    assert row["ci_level"] > 1 - 0.05 / 2  # wider than the fixed-sample Bonferroni interval


def test_the_next_look_is_read_on_the_pools_first_seeds():
    out = run(sequential_results({"grpo": 5, "big": 3, "null": 5}))
    null = out.states[("null", "grpo")]
    assert null.reached == 1 and null.waiting == 2 and null.seen == (3, 5)
    assert out.wanted == {"null": 2, "grpo": 2}
    assert list(out.table[out.table["condition"] == "null"]["n"]) == [3, 5]


def test_unfinished_trials_hold_a_look_without_asking_for_more():
    out = run(sequential_results({"grpo": 5, "big": 3, "null": 5}, pending={"null-s4": "running"}))
    null = out.states[("null", "grpo")]
    assert null.waiting == 1 and null.reached == 0
    assert out.wanted == {}  # the look's trials exist; nothing to enqueue, just wait
    assert not out.finished


def test_a_look_whose_new_trials_all_failed_spends_no_alpha():
    failed = {"null-s3": "boom", "null-s4": "boom"}
    out = run(sequential_results({"grpo": 5, "big": 3, "null": 5}, failed=failed))
    null = out.states[("null", "grpo")]
    assert null.seen == (3,) and null.waiting == 2
    assert list(out.table[out.table["condition"] == "null"]["look"]) == [1]


def test_an_equal_arm_is_equivalent_by_the_last_look():
    out = run(sequential_results({"grpo": 8, "big": 3, "null": 8}))
    assert out.states[("null", "grpo")].status == "stopped at look 3: equivalent"
    assert list(out.table[out.table["condition"] == "null"]["decision"]) == ["continue", "continue", "stop"]
    assert out.finished


def test_undecided_after_the_last_look_finishes_the_study():
    out = run(sequential_results({"grpo": 8, "big": 3, "null": 8}), min_effect=None)
    null = out.states[("null", "grpo")]
    assert (null.reached, null.waiting, null.status) == (2, None, "undecided after the last look")
    assert out.table.iloc[-1]["decision"] == "last look"
    assert out.finished and out.wanted == {}


def test_the_report_of_a_sequential_study_reads_each_verdict_at_its_look():
    from harness.decide.analysis import analyze
    from harness.report.markdown import render_markdown

    res = sequential_results({"grpo": 5, "big": 3, "null": 5})
    res.meta["min_effect"] = 0.05
    analysis = analyze(res, ReadOptions(n_permutations=200))
    verdicts = analysis.verdicts.set_index("condition")
    big = verdicts.loc["big"]
    look = stats.Look((3,), 8, "pocock")
    assert big["verdict"] == "better" and big["n"] == 3
    assert big["ci_level"] == pytest.approx(2 * stats.verdict.special.ndtr(look.bound(0.05 / 2)) - 1)
    assert "repeated interval (look 1)" in big["reason"]
    assert verdicts.loc["null", "n"] == 5  # read at its latest look, not on every seed run
    assert list(analysis.looks["look"]) == [1, 1, 2]
    assert analysis.header["design"].startswith(
        "sequential, looks at 3, 5, 8 seeds per arm (pocock spending); at look 3 of 3"
    )
    assert "big: stopped at look 1: better" in analysis.header["design"]
    text = render_markdown(analysis)
    assert "## Looks" in text and "- **Design:** sequential" in text


def test_a_comparison_not_yet_at_its_first_look_is_not_read_early():
    from harness.decide.analysis import analyze

    res = sequential_results({"grpo": 3, "big": 3, "null": 2})  # null's third seed not there yet
    analysis = analyze(res, ReadOptions(n_permutations=200))
    null = analysis.verdicts.set_index("condition").loc["null"]
    assert null["verdict"] == "untested" and null["p_value"] != null["p_value"]  # NaN: untested
    assert "not tested yet: waiting for look 1 (3 seeds per arm)" in null["reason"]
