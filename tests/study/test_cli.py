"""``harness validate`` and ``harness plan``."""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app, main
from harness.engine.spec import TrialResult
from harness.ground.exit_codes import EXIT_BAD_INPUT
from harness.study.expand import expand, study_dir, tuning_specs
from harness.study.load import load_study
from harness.study.plan import (
    RUN_START_S,
    SECONDS_PER_TOKEN,
    SFT_STEP_S,
    TRIAL_START_S,
    TRIAL_TURNOVER_S,
    format_duration,
    plan_study,
    trial_tokens,
)
from harness.tracking import records

REPO = Path(__file__).resolve().parents[2]
STUDIES = REPO / "studies"
QUICKSTART = STUDIES / "quickstart.yaml"
MALFORMED = Path(__file__).parent / "malformed"


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def small_study(folder: Path, extra: str = "") -> Path:
    path = folder / "small.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        name: small
        output_dir: {folder / "out"}
        control: grpo
        seeds: 3
        train: {{steps: 10, prompts_per_step: 2, max_new_tokens: 4, eval_every: 5, eval_samples: 1}}
        task: {{n_eval: 16}}
        arms:
          - {{name: grpo, algorithm: grpo}}
          - {{name: rloo, algorithm: rloo}}
        """)
        + extra
    )
    return path


T0 = 1_800_000_000.0  # started_at of every record below (epoch seconds)


def write_record(
    study_dir: Path, spec, wall: float, status: str = "completed", phase: str = "compare", start: float = 3.0
):
    """A record of ``wall`` seconds in the trial, ``start`` more from started_at to finished_at."""
    result = TrialResult(trial_id=spec.trial_id, status=status, final={"eval/accuracy": 0.5}, wall_time_s=wall)
    records.write_record(
        study_dir, records.make_record(spec, result, phase=phase, started_at=T0, finished_at=T0 + start + wall)
    )


# --------------------------------------------------------------------------------------------
# validate


def test_validate_shipped_studies():
    files = [str(STUDIES / f"{n}.yaml") for n in ("quickstart", "seven_algorithms", "grpo_normalisation", "tune_lr")]
    result = invoke("validate", *files)
    assert result.exit_code == 0, result.output
    assert result.stdout.count("ok: ") == 4
    assert "study quickstart: 3 arms, control grpo, 3 seeds (0..2) -> 9 trials" in result.stdout
    assert "study seven_algorithms: 7 arms, control grpo, 5 seeds (0..4) -> 35 trials" in result.stdout
    assert "tuning 8 trials/arm x 2 seeds (100..101) = 32 trials on lr" in result.stdout
    assert "task addition: 2000 train / 128 held-out prompts" in result.stdout
    assert result.stderr == ""


def test_validate_many_files_reports_each_bad_one_and_exits_2():
    good = str(STUDIES / "quickstart.yaml")
    bad = str(MALFORMED / "control_not_arm.yaml")
    result = invoke("validate", good, bad)
    assert result.exit_code == EXIT_BAD_INPUT
    assert "ok: " in result.stdout
    assert result.stderr.strip() == f"error: {bad}: control: 'ppo' is not an arm; arms: grpo, rloo"


def test_validate_prints_warnings_on_stderr(tmp_path):
    path = small_study(tmp_path)
    path.write_text(path.read_text().replace("seeds: 3", "seeds: 1"))
    result = invoke("validate", str(path))
    assert result.exit_code == 0
    assert "warning: " in result.stderr and "only 1 seed(s)" in result.stderr


def test_validate_builds_the_task(tmp_path):
    path = small_study(tmp_path, "")
    path.write_text(path.read_text().replace("task: {n_eval: 16}", "task: {n_eval: 16, n_train: 99999}"))
    result = invoke("validate", str(path))
    assert result.exit_code == EXIT_BAD_INPUT
    assert result.stderr.startswith("error: task: ")
    assert len(result.stderr.strip().splitlines()) == 1


def test_main_maps_errors_to_one_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["harness", "plan", str(MALFORMED / "unknown_override_key.yaml")])
    with pytest.raises(SystemExit) as info:
        main()
    assert info.value.code == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: arms[0].set.eps_hgh: unknown key")


# --------------------------------------------------------------------------------------------
# plan


def test_plan_quickstart_prints_the_design():
    result = invoke("plan", str(QUICKSTART))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "study quickstart" in out
    assert "seeds: 3 seeds (0..2), the same for every condition" in out
    for arm in ("grpo (control)", "dr_grpo", "rloo"):
        assert arm in out
    assert "comparisons vs control (2):" in out and "rloo vs grpo" in out
    assert "total: 9 trials (0 done, 9 to run)" in out
    assert "costs: the defaults" in out and f"x {SECONDS_PER_TOKEN:.2g} s/token" in out


def design_lines(out: str) -> list:
    """The plan's text up to its totals, less what records change: the table's ``done`` and
    ``est/trial`` columns (the rows are split into cells, so column widths do not matter)."""
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("condition "))
    tail = lines.index("", head)
    rows = [re.split(r" {2,}", line.strip()) for line in lines[head:tail]]
    total = next(i for i, line in enumerate(lines) if line.startswith("total: "))
    return lines[:head] + [row[:4] + row[5:6] for row in rows] + lines[tail:total]


def test_plan_quickstart_after_the_quickstart_ran_counts_its_records():
    """The README runs the quickstart, then the tests, from the same folder: a filled
    ``runs/quickstart/`` where the plan looks (the working folder) changes the counts only."""
    empty = invoke("plan", str(QUICKSTART))
    assert empty.exit_code == 0, empty.output
    study = load_study(QUICKSTART)
    folder = study_dir(study)
    assert not folder.is_absolute() and not Path.cwd().resolve().is_relative_to(REPO)
    specs = expand(study)
    assert len(specs) == 9
    for spec in specs:
        write_record(folder, spec, wall=30.0)
    result = invoke("plan", str(QUICKSTART))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert design_lines(out) == design_lines(empty.stdout)
    assert "total: 9 trials (9 done, 0 to run)" in out
    assert "measured from 9 completed record(s)" in out
    rows = [
        re.split(r" {2,}", line.strip()) for line in out.splitlines() if line.startswith(("grpo ", "dr_grpo ", "rloo "))
    ]
    assert [(row[0], row[4]) for row in rows] == [("grpo (control)", "3"), ("dr_grpo", "3"), ("rloo", "3")]


def test_plan_default_estimate_is_tokens_times_the_documented_rate(tmp_path):
    s = load_study(small_study(tmp_path))
    plan = plan_study(s)
    spec = expand(s)[0]
    # 10 steps x 2 prompts x 8 samples x 4 tokens + 3 evals x 16 prompts x 1 sample x 4 tokens
    assert trial_tokens(spec) == 10 * 2 * 8 * 4 + 3 * 16 * 1 * 4
    per_trial = TRIAL_START_S + trial_tokens(spec) * SECONDS_PER_TOKEN + TRIAL_TURNOVER_S
    assert plan.total_trials == 6 and plan.done_trials == 0
    assert plan.est_total_s == pytest.approx(6 * per_trial)
    assert plan.conditions[0].est_trial_s == pytest.approx(per_trial)
    warm = s.warmstart.steps * SFT_STEP_S  # not cached in this test's folder
    assert plan_study(s, workers=3).est_wall_s == pytest.approx(RUN_START_S + warm + 2 * per_trial)


def test_plan_uses_completed_records_when_present(tmp_path):
    s = load_study(small_study(tmp_path))
    specs = expand(s)
    tokens = trial_tokens(specs[0])
    write_record(tmp_path / "out", specs[0], wall=2.0)  # grpo, seed 0
    write_record(tmp_path / "out", specs[1], wall=4.0)  # rloo, seed 0
    write_record(tmp_path / "out", specs[2], wall=99.0, status="failed")  # ignored
    (tmp_path / "out" / "records" / "junk.json").write_text("{not json")  # skipped, with a warning
    with pytest.warns(UserWarning, match="junk.json"):
        plan = plan_study(s, records=records.read_records(tmp_path / "out"))
    by_name = {c.name: c for c in plan.conditions}
    # the measured start (3 s) + the per-arm rate x the same tokens + the turnover
    assert by_name["grpo"].est_trial_s == pytest.approx(3.0 + 2.0 + TRIAL_TURNOVER_S)
    assert by_name["rloo"].est_trial_s == pytest.approx(3.0 + 4.0 + TRIAL_TURNOVER_S)
    assert by_name["grpo"].done == 1 and by_name["rloo"].done == 1
    assert plan.done_trials == 2
    assert plan.est_remaining_s == pytest.approx(2 * (5.0 + TRIAL_TURNOVER_S) + 2 * (7.0 + TRIAL_TURNOVER_S))
    assert "measured from 2 completed record(s)" in plan.rate_source
    assert tokens > 0

    (tmp_path / "out" / "records" / "junk.json").unlink()
    result = invoke("plan", str(tmp_path / "small.yaml"), "--workers", "2")
    assert "total: 6 trials (2 done, 4 to run)" in result.stdout
    wall = RUN_START_S + s.warmstart.steps * SFT_STEP_S + plan.est_remaining_s / 2
    assert f"estimate: about {format_duration(wall)} on 2 workers" in result.stdout


def test_plan_of_a_tuned_study_shows_both_phases():
    result = invoke("plan", str(STUDIES / "tune_lr.yaml"))
    assert result.exit_code == 0, result.output
    assert "phase 1, tuning: 8 trials per arm x 2 seeds (100..101) = 32 trials" in result.stdout
    assert "search lr: log-uniform[3e-05, 0.001]" in result.stdout
    assert "phase 2, comparison: each arm's best configuration x 5 seeds (0..4)" in result.stdout
    assert "total: 42 trials" in result.stdout


def test_plan_json():
    result = invoke("plan", str(STUDIES / "grpo_normalisation.yaml"), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["total_trials"] == 20
    assert [c["name"] for c in data["conditions"]] == ["grpo", "no_std", "token_sum", "no_std_token_sum"]
    assert data["conditions"][1]["overrides"] == {"advantage": "group_mean", "aggregation": "seq_mean_token_mean"}
    assert data["est_wall_s"] == pytest.approx(data["run_start_s"] + data["warmstart_s"] + data["est_remaining_s"])
    assert [w["cached"] for w in data["warmstarts"]] == [False]  # one set-up, not built in this folder


def test_plan_bad_study_exits_2_with_one_line():
    result = invoke("plan", str(MALFORMED / "grid_unknown_key.yaml"))
    assert result.exit_code == EXIT_BAD_INPUT
    assert result.stderr.strip().startswith("error: grid.lrr: unknown key")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "seconds, text", [(0, "0s"), (7.4, "7s"), (95, "1m35s"), (3725, "1h02m"), (3 * 86400 + 7200, "3d02h")]
)
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def test_plan_of_a_tuned_study_counts_finished_tuning_trials(tmp_path):
    path = small_study(
        tmp_path,
        textwrap.dedent("""\
        tuning:
          n_trials: 2
          seeds: [100]
          search_space: {lr: {low: 1.0e-4, high: 1.0e-2, log: true}}
        """),
    )
    s = load_study(path)
    write_record(tmp_path / "out", tuning_specs(s, "grpo", {"lr": 0.001}, 100), wall=3.0, phase="tune")
    plan = plan_study(s, records=records.read_records(tmp_path / "out"))
    assert plan.tuning.trials == 4 and plan.tuning.done == 1
    assert plan.total_trials == 4 + 6 and plan.done_trials == 1
    grpo = plan.conditions[0]
    assert grpo.done == 0 and grpo.est_trial_s == pytest.approx(3.0 + 3.0 + TRIAL_TURNOVER_S)  # lr: same tokens
