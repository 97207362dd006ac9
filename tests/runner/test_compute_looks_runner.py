"""A compute-look study run segment by segment: every trial's first segment is queued at once,
each next segment only for the arms that go on after a look, each resuming from the checkpoint
the segment before it left; an arm decided worse stops where it was decided, and a re-run queues
nothing again."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from runner_helpers import options, write_study

from harness.decide.analysis import analyze
from harness.runner.run import prepare, run_study, study_status
from harness.study.load import load_study
from harness.tracking.results import load_results

LOOKED = "fake_trials:looked"  # bad* arms trail the control by 0.3 at every look
ARMS = ["grpo", "bad", "equal"]  # grpo is the control
AT = [0.25, 0.5, 1.0]


def compute_look_study(tmp_path: Path) -> Path:
    return write_study(
        tmp_path,
        ARMS,
        seeds=4,
        name="cl",
        train={"steps": 8},
        compute_looks={"at": AT, "spending": "pocock", "catch_up": 0.05},
    )


def segments_run(counters: Path, arm: str) -> int:
    """How many segments of ``arm`` ran (each finished call counted once)."""
    return sum(len(path.read_text().split()) for path in counters.glob(f"{arm}-s*.done"))


@pytest.mark.slow
def test_an_arm_decided_worse_stops_at_the_first_look_and_the_others_run_to_the_budget(tmp_path, fake_env):
    path = compute_look_study(tmp_path)
    summary = run_study(path, options(trial_fn=LOOKED, workers=2))
    text = summary.format()
    assert summary.exit_code == 0, text
    assert segments_run(fake_env, "bad") == 4  # its first segment only: stopped at look 1
    assert segments_run(fake_env, "grpo") == segments_run(fake_env, "equal") == 4 * len(AT)
    assert "28 trials: 28 completed" in text and "not queued" not in text  # every segment that ran
    assert re.search(r"^compute looks: look 3 of 3 \(finished\)$", text, re.MULTILINE), text
    assert re.search(r"^  bad +stopped at look 1: worse$", text, re.MULTILINE), text
    assert re.search(r"^  equal +read at the budget: ", text, re.MULTILINE), text
    status = study_status(path).format()
    assert re.search(r"^  bad +stopped at look 1: worse$", status, re.MULTILINE), status

    results = load_results(path)  # one row per design trial: bad's paused at its first look
    by_arm = results.trials.groupby("arm")["status"].agg(set).to_dict()
    assert by_arm == {"grpo": {"completed"}, "equal": {"completed"}, "bad": {"paused"}}
    assert (results.trials.groupby("arm").size() == 4).all()
    full = results.curves[(results.curves["arm"] == "grpo") & (results.curves["metric"] == "eval/accuracy")]
    assert sorted(full["step"].unique()) == [0, 2, 4, 8]  # the last segment's record holds the whole curve

    analysis = analyze(results)  # the report's verdicts are the looks'
    verdicts = analysis.verdicts.set_index("condition")
    assert verdicts.loc["bad", "verdict"] == "worse"
    assert verdicts.loc["bad", "reason"].startswith("stopped at look 1 (2): worse than grpo by more than")
    assert verdicts.loc["equal", "reason"].startswith("read at the budget after 2 interim look(s)")
    looks = analysis.looks
    assert set(looks[looks["condition"] == "bad"]["decision"]) == {"stop"}
    assert list(looks[looks["condition"] == "equal"]["decision"]) == ["go on", "go on", "budget"]
    assert "compute looks at 0.25 (2), 0.5 (4), 1 (8) steps" in analysis.header["design"]
    assert "stopped: bad at look 1" in analysis.header["design"]

    opts = options(trial_fn=LOOKED)
    again = run_study(path, opts)
    assert again.exit_code == 0, again.format()
    assert "nothing to run" in opts.stream.getvalue()
    assert segments_run(fake_env, "bad") == 4 and segments_run(fake_env, "grpo") == 4 * len(AT)


@pytest.mark.slow
def test_with_forecasts_on_the_higher_ceiling_is_called_better_at_the_look_and_trains_no_further(tmp_path, fake_env):
    path = write_study(
        tmp_path,
        ["grpo", "high"],
        seeds=4,
        name="clf",
        train={"steps": 12},
        compute_looks={"at": [0.5, 1.0], "spending": "pocock", "catch_up": 0.05, "forecast": True},
    )
    summary = run_study(path, options(trial_fn="fake_trials:curved", workers=2))
    assert summary.exit_code == 0, summary.format()
    assert segments_run(fake_env, "high") == segments_run(fake_env, "grpo") == 4  # both end at the look
    assert re.search(r"^  high +stopped at look 1: better$", summary.format(), re.MULTILINE), summary.format()
    analysis = analyze(load_results(path))
    verdict = analysis.verdicts.set_index("condition").loc["high"]
    assert verdict["verdict"] == "better" and "Forecast at the budget (12)" in verdict["reason"]
    assert "stopped: high at look 1 (forecast: better)" in analysis.header["design"]
    assert "every verdict called before the budget by a forecast is a prediction" in analysis.header["design"]
    assert "forecasts on" in analysis.header["rule"]


def test_the_first_segments_are_queued_in_their_phase_and_the_design_trials_are_the_last_segments(tmp_path):
    path = compute_look_study(tmp_path)
    study = load_study(path)
    setup = prepare(path, options(trial_fn=LOOKED))
    from harness.decide.sequential.segments import every_segment, phase_of
    from harness.study.expand import expand

    design = expand(study)
    assert {spec.looks.run_to for spec in design} == {len(AT) - 1}
    segments = every_segment(study)
    assert len(segments) == len(design) * len(AT)
    assert [phase_of(s) for s in segments].count("compare") == len(design)
    assert {s.whole_trial_id() for s in segments} == {s.trial_id for s in design}
    assert setup.study.compute_looks is not None
