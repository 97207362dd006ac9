"""``harness validate`` and ``harness plan`` of a sequential study with calibration arms: the looks,
the maximum, and the trials expected under no effect and at min_effect."""

from __future__ import annotations

import datetime as dt
import textwrap
from pathlib import Path

import pytest
from cli_main import run_main

from harness.engine.spec import TrialResult
from harness.stats.sequential import expected_trials
from harness.study.expand import expand
from harness.study.load import load_study
from harness.study.plan import plan_study
from harness.tracking import records

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@pytest.fixture()
def study_file(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "seq.yaml"
    path.write_text(
        textwrap.dedent("""\
        name: seq
        control: grpo
        seeds: 8
        min_effect: 0.05
        calibration: aa
        sequential: {looks: [3, 5, 8], spending: pocock}
        arms:
          - {name: grpo, algorithm: grpo}
          - {name: rloo, algorithm: rloo}
          - {name: dr, algorithm: dr_grpo}
        """)
    )
    return path


def test_validate_names_the_looks_and_the_calibration(monkeypatch, capsys, study_file):
    code, out, err = run_main(monkeypatch, capsys, "validate", str(study_file))
    assert code == 0, err
    assert "-> 32 trials" in out  # 4 conditions x 8 seeds: the maximum
    assert "sequential: looks at 3, 5, 8 seeds per arm (pocock spending); the trials above are its maximum" in out
    assert "calibration: an A/A copy of the control, reported apart from the verdicts" in out
    assert "identical configurations" not in err  # the A/A copy is identical by design


def test_plan_prints_expected_trials_from_an_assumed_sd(monkeypatch, capsys, study_file):
    code, out, err = run_main(monkeypatch, capsys, "plan", str(study_file))
    assert code == 0, err
    expected = [
        expected_trials([3, 5, 8], arms=2, delta=d, margin=0.05, sd=0.05, spending="pocock", followers=1).mean
        for d in (0.0, 0.05)
    ]
    assert (
        f"expected trials: {expected[0]:.0f} under no effect; {expected[1]:.0f} under min_effect "
        "(every arm alike; from an sd of trial means assumed equal to min_effect (none measured yet))"
    ) in out
    assert "(the A/A copy: the same + 1000000)" in out
    assert "total: 32 trials" in out


def test_plan_uses_the_controls_measured_sd(study_file):
    study = load_study(study_file)
    made = []
    for spec, value in zip([s for s in expand(study) if s.arm == "grpo"], [0.40, 0.45, 0.50, 0.55]):
        result = TrialResult(trial_id=spec.trial_id, final={"eval/accuracy": value}, wall_time_s=5.0)
        made.append(records.make_record(spec, result, started_at=T0, finished_at=T0 + dt.timedelta(seconds=9)))
    plan = plan_study(study, records=made)
    assert plan.control_sd == pytest.approx(0.0645497, rel=1e-5) and plan.control_sd_from == 4
    assert plan.sequential == {"looks": [3, 5, 8], "spending": "pocock"} and plan.followers == 1
