"""The report shows what the trials warned about (issue 13, items 4 and 5): a warm start below its
target and a study that cannot learn were invisible, and an arm whose groups were all degenerate
was told to run more seeds. The header lists each warning code per arm, and a comparison with a
side that has no learning signal in every trial gives no seeds-needed figure and says why."""

from __future__ import annotations

import pandas as pd
from report_fakes import CONTROL, make_results

from harness.decide.analysis import analyze, compare_pair
from harness.decide.rules import ReadOptions
from harness.decide.trial_warnings import NO_SIGNAL, split_warnings
from harness.engine.spec import NO_LEARNING_SIGNAL, WARMSTART_BELOW_TARGET
from harness.report.markdown import render_markdown

WARM = f"{WARMSTART_BELOW_TARGET}: after 1000 of at most 1000 SFT steps the policy has greedy val accuracy 0.117"
SILENT = f"{NO_LEARNING_SIGNAL}: every group was degenerate in each of the first 10 steps"


def with_warnings(results, lines: dict[tuple[str, int], list[str]]):
    """``results`` with a warnings column as ``harness.tracking.results`` builds it."""
    trials = results.trials.copy()
    trials["warnings"] = ["\n".join(lines.get((a, s), [])) for a, s in zip(trials["arm"], trials["seed"])]
    results.trials = trials
    return results


def test_the_report_and_the_engine_use_one_code():
    assert NO_SIGNAL == NO_LEARNING_SIGNAL


def test_the_header_lists_each_warning_per_arm():
    seeds = range(5)
    lines = {(arm, s): [WARM] for arm in ("grpo", "big", "null") for s in seeds}
    for s in (0, 2):
        lines[("big", s)] = [WARM, SILENT]
    analysis = analyze(with_warnings(make_results(), lines), ReadOptions(n_permutations=200))
    state = [line for line in analysis.header["state"] if line.startswith("WARNING")]
    assert state == [
        f"WARNING {NO_LEARNING_SIGNAL} in completed trials (big 2 of 5); big seed 0: "
        "every group was degenerate in each of the first 10 steps",
        f"WARNING {WARMSTART_BELOW_TARGET} in completed trials (grpo 5 of 5, big 5 of 5, null 4 of 4); grpo seed 0: "
        + WARM.partition(": ")[2],
    ]  # null seed 4 failed: only completed trials count
    assert f"> **{state[1]}**" in render_markdown(analysis)
    assert analysis.verdicts["seeds_needed_effect"].notna().all()  # some signal in big: no mark


def test_an_arm_without_learning_signal_gets_no_seeds_needed_figure():
    lines = {("null", s): [SILENT] for s in range(4)}  # every completed trial of null (seed 4 failed)
    results = with_warnings(make_results(), lines)
    verdicts = analyze(results, ReadOptions(n_permutations=200)).verdicts.set_index("condition")
    null, big = verdicts.loc["null"], verdicts.loc["big"]
    assert null["seeds_needed_null"] is None and null["seeds_needed_effect"] is None
    assert null["reason"].startswith(
        f"No learning signal in null (each of its completed trials warns "
        f"{NO_LEARNING_SIGNAL}): more seeds will not decide this"
    )
    assert pd.notna(big["seeds_needed_effect"]) and not big["reason"].startswith("No learning signal")

    tested_alone = compare_pair(
        results, "big", "null", options=ReadOptions(n_permutations=200)
    )  # null is the control here
    assert tested_alone["seeds_needed_effect"] is None and "No learning signal in null" in tested_alone["reason"]
    assert (
        compare_pair(results, "big", CONTROL, options=ReadOptions(n_permutations=200))["seeds_needed_effect"]
        is not None
    )


def test_results_without_a_warnings_column_still_analyse():
    analysis = analyze(make_results(), ReadOptions(n_permutations=200))
    assert not any(line.startswith("WARNING") for line in analysis.header["state"])


def test_a_warning_over_several_lines_is_one_warning():
    """A warning's code is the first token of its first line only: the lines after it (free text,
    or indented) go on with it, and are not read as warning codes of their own."""
    long_warm = f"{WARM}\nRaise warm_start.max_steps, or lower warm_start.target.\n  (the RL steps ran all the same)"
    assert split_warnings(f"{long_warm}\n{SILENT}") == [
        (
            WARMSTART_BELOW_TARGET,
            WARM.partition(": ")[2] + " Raise warm_start.max_steps, or lower warm_start.target."
            " (the RL steps ran all the same)",
        ),
        (NO_LEARNING_SIGNAL, SILENT.partition(": ")[2]),
    ]
    lines = {("grpo", s): [long_warm] for s in range(5)}
    lines[("big", 1)] = [long_warm, SILENT]
    analysis = analyze(with_warnings(make_results(), lines), ReadOptions(n_permutations=200))
    state = [line for line in analysis.header["state"] if line.startswith("WARNING")]
    assert [line.split(" in completed trials")[0] for line in state] == [
        f"WARNING {NO_LEARNING_SIGNAL}",
        f"WARNING {WARMSTART_BELOW_TARGET}",
    ]
    assert state[1].endswith(
        "grpo seed 0: after 1000 of at most 1000 SFT steps the policy has greedy val accuracy "
        "0.117 Raise warm_start.max_steps, or lower warm_start.target. (the RL steps ran all "
        "the same)"
    )
