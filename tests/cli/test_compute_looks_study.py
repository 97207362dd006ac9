"""A testbed study with compute looks, end to end through ``harness run`` and ``harness report``:
every trial runs in segments (the second resuming the first's checkpoint), an arm far worse than
the control (sampling at a temperature far too high) stops at the first look, the others run to
the budget, and the report shows the looks, the stop and the compute saved."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from cli_main import run_main

from harness.study.expand import study_dir
from harness.study.load import load_study
from harness.tracking.results import load_results

STUDY = """\
    name: looked
    control: grpo
    seeds: 3
    min_effect: 0.05
    primary_metric: eval/mean_reward
    task: {name: addition, max_digits: 2, n_train: 300, n_eval: 32, reward: partial_match}
    model: {name: tiny, tiny: {hidden_size: 32, layers: 1, heads: 2, intermediate_size: 64}}
    warmstart: {steps: 40, batch_size: 16, lr: 3.0e-3}
    train: {steps: 8, prompts_per_step: 4, max_new_tokens: 4, eval_every: 4, eval_samples: 2, threads: 1}
    compute_looks: {at: [0.25, 1.0], spending: pocock, catch_up: 0.02}
    arms:
      - {name: grpo, algorithm: grpo}
      - {name: dr_grpo, algorithm: dr_grpo}
      - {name: broken, algorithm: grpo, train: {temperature: 4.0}}
    """


@pytest.mark.slow
def test_a_worse_arm_stops_at_the_first_look_and_the_report_shows_the_looks(monkeypatch, capsys):
    path = Path("studies") / "looked.yaml"
    path.parent.mkdir()
    path.write_text(textwrap.dedent(STUDY))
    code, out, err = run_main(monkeypatch, capsys, "run", str(path), "--workers", "2", "--no-tracking")
    assert code == 0, err
    assert "broken   stopped at look 1: worse" in out
    assert "15 trials: 15 completed" in out  # every trial's first segment, and grpo's and dr_grpo's second

    trials = load_results(path).trials.set_index("trial_id")
    assert set(trials.loc[trials["arm"] == "broken", "status"]) == {"paused"}  # never trained past look 1
    assert set(trials.loc[trials["arm"] != "broken", "status"]) == {"completed"}  # resumed from look 1's checkpoint
    checkpoints = study_dir(load_study(path)) / "tmp" / "checkpoints"
    assert not checkpoints.exists() or not any(checkpoints.iterdir())  # none is needed any more

    code, _, err = run_main(monkeypatch, capsys, "report", str(path), "--out", "report")
    assert code == 0, err
    summary = Path("report/summary.md").read_text()
    assert "## Looks over compute" in summary
    assert "stopped: broken at look 1; compute spent 54 of 72 (25% saved)" in summary
    assert re.search(r"^\| broken \| -[0-9.]+ \| \[-[0-9.]+, -[0-9.]+\] \| worse \|", summary, re.MULTILINE), summary
    assert "3 paused at a compute look" in summary
