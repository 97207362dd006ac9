"""The A/A tripwire and the placebo: read like verdicts, reported apart, never in the family."""

import pandas as pd
import pytest
from report_fakes import CONTROL, PRIMARY, make_results

from harness.decide.analysis import analyze
from harness.decide.rules import ReadOptions
from harness.report.markdown import render_markdown

OFFSET = 1_000_000


def with_aa(shift: float, seeds=(0, 1, 2, 3, 4)):
    """Fake results plus the control's copy on disjoint seeds, its scores the control's moved by
    ``shift`` plus a little independent noise."""
    res = make_results(seeds=seeds, failed={})
    rows = res.trials[res.trials["arm"] == CONTROL].copy()
    rows["arm"] = f"{CONTROL}-aa"
    rows["seed"] = rows["seed"] + OFFSET
    rows["trial_id"] = [f"{CONTROL}-aa-s{s}" for s in rows["seed"]]
    rows[PRIMARY] = rows[PRIMARY] + shift + [0.004, -0.003, 0.002, -0.001, 0.0][: len(rows)]
    res.trials = pd.concat([res.trials, rows], ignore_index=True)
    res.meta["conditions"] = [*res.meta["conditions"], f"{CONTROL}-aa"]
    res.meta["calibration"] = [(f"{CONTROL}-aa", CONTROL, "aa")]
    res.meta["seed_pools"] = {f"{CONTROL}-aa": [OFFSET + s for s in seeds]}
    res.meta["min_effect"] = 0.05
    return res


def test_an_aa_copy_that_differs_trips_the_header():
    analysis = analyze(with_aa(0.2), ReadOptions(n_permutations=200))
    row = analysis.calibration.set_index("condition").loc[f"{CONTROL}-aa"]
    assert row["role"] == "A/A tripwire" and row["verdict"] == "better"
    assert not row["paired"]  # its seeds are its own
    assert analysis.header["state"][0].startswith(f"A/A TRIPWIRE: {CONTROL}-aa")
    assert "not to be trusted" in analysis.header["state"][0]
    assert "an A/A copy of the control on fresh seeds tells which" in analysis.header["state"][0]
    assert "## Calibration checks" in render_markdown(analysis)


def test_an_aa_copy_at_the_same_level_as_the_verdicts_and_outside_their_family():
    analysis = analyze(with_aa(0.0), ReadOptions(n_permutations=200))
    aa = analysis.calibration.iloc[0]
    assert aa["verdict"] in ("equivalent", "inconclusive")
    assert not any(line.startswith("A/A TRIPWIRE") for line in analysis.header["state"])
    verdicts = analysis.verdicts
    assert list(verdicts["condition"]) == ["big", "null"]  # the family is the pre-registered two
    assert aa["ci_level"] == pytest.approx(verdicts["ci_level"].iloc[0])  # 1 - alpha / 2
    assert verdicts["p_adjusted"].iloc[0] == pytest.approx(min(1.0, 2 * verdicts["p_value"].iloc[0]))


def test_a_study_without_calibration_has_no_table():
    analysis = analyze(make_results(failed={}), ReadOptions(n_permutations=200))
    assert analysis.calibration.empty
    assert "Calibration checks" not in render_markdown(analysis)
