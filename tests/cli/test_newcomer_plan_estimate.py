"""``harness plan``'s estimate adds what a run spends besides tokens: its start, each trial's
process start and turnover, and the warm start when it is not cached (said either way); after a
run it shows what the records measured beside what the defaults said."""

from __future__ import annotations

import datetime as dt
import textwrap
from pathlib import Path

import pytest
from cli_main import run_main

from harness.engine.spec import TrialResult
from harness.engine.warmstart_key import MANIFEST_FILE, cache_folder
from harness.study.expand import expand, study_dir
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

QUICKSTART = Path(__file__).resolve().parents[2] / "studies" / "quickstart.yaml"
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def small(extra: str = "") -> Path:
    path = Path("small.yaml")
    path.write_text(
        textwrap.dedent("""\
        name: small
        control: grpo
        seeds: 3
        train: {steps: 10, prompts_per_step: 2, max_new_tokens: 4, eval_every: 5, eval_samples: 1}
        task: {n_eval: 16}
        warmstart: {steps: 300}
        arms:
          - {name: grpo, algorithm: grpo}
          - {name: rloo, algorithm: rloo}
        """)
        + extra
    )
    return path


def ran(spec, wall: float, start: float, at: float) -> records.TrialRecord:
    """A completed record: started ``at`` seconds after T0, ``start`` s to start, ``wall`` s in the trial."""
    result = TrialResult(trial_id=spec.trial_id, final={"eval/accuracy": 0.5}, wall_time_s=wall)
    began = T0 + dt.timedelta(seconds=at)
    return records.make_record(spec, result, started_at=began, finished_at=began + dt.timedelta(seconds=start + wall))


def test_the_quickstart_estimate_adds_the_run_start_the_warm_start_and_each_trials_start(monkeypatch, capsys):
    study = load_study(QUICKSTART)
    plan = plan_study(study, workers=2)
    per_trial = TRIAL_START_S + trial_tokens(expand(study)[0]) * SECONDS_PER_TOKEN + TRIAL_TURNOVER_S
    warm = study.warmstart.steps * SFT_STEP_S
    assert [w.cached for w in plan.warmstarts] == [False]  # nothing built in this test's folder
    assert plan.est_wall_s == pytest.approx(RUN_START_S + warm + 9 * per_trial / 2)
    assert plan.est_wall_s > 60  # a 2-core machine takes minutes, not the 49 s once estimated

    code, out, err = run_main(monkeypatch, capsys, "plan", str(QUICKSTART), "--workers", "2")
    assert code == 0, err
    assert (
        f"estimate: about {format_duration(plan.est_wall_s)} on 2 workers = {RUN_START_S:.1f}s to start + "
        f"at most {warm:.1f}s of warm start + {format_duration(9 * per_trial)} of trials / 2 workers"
    ) in out
    assert f"per trial: {TRIAL_START_S:.1f}s to start its process" in out
    folder = cache_folder(expand(study)[0])
    assert f"warm start: not cached ({folder}): built once before the trials that use it, at most 1000 SFT steps" in out


def test_a_cached_warm_start_costs_nothing_extra_and_is_said(monkeypatch, capsys):
    study = load_study(small())
    folder = cache_folder(expand(study)[0])
    folder.mkdir(parents=True)
    (folder / MANIFEST_FILE).write_text("{}")
    plan = plan_study(study)
    assert [(w.cached, w.est_s) for w in plan.warmstarts] == [(True, 0.0)]
    assert plan.est_wall_s == pytest.approx(RUN_START_S + plan.est_remaining_s)
    code, out, _ = run_main(monkeypatch, capsys, "plan", "small.yaml")
    assert f"warm start: cached in {folder}; each trial loads it" in out
    assert "of warm start" not in out


def test_a_half_built_cache_entry_is_not_cached():
    study = load_study(small())
    cache_folder(expand(study)[0]).mkdir(parents=True)  # no manifest: a build that did not finish
    assert [w.cached for w in plan_study(study).warmstarts] == [False]


def test_no_warm_start_no_warm_start_line(monkeypatch, capsys):
    path = small()
    path.write_text(path.read_text().replace("warmstart: {steps: 300}", "warmstart: {enabled: false}"))
    assert plan_study(load_study(path)).warmstarts == []
    _, out, _ = run_main(monkeypatch, capsys, "plan", str(path))
    assert "warm start" not in out


def test_records_replace_the_defaults_by_medians_and_are_compared_with_them(monkeypatch, capsys):
    study = load_study(small())
    grpo = [spec for spec in expand(study) if spec.arm == "grpo"]
    tokens = trial_tokens(grpo[0])
    # grpo: 2 s in the trial, 3 s to start, but the first one built the warm start (60 s)
    walls = [60.0, 2.0, 2.0]
    for i, (spec, wall) in enumerate(zip(grpo, walls)):
        records.write_record(study_dir(study), ran(spec, wall, 3.0, at=10.0 * i))
    plan = plan_study(study, workers=2, records=records.read_records(study_dir(study)))
    assert plan.costs.measured_from == 3 and plan.costs.start_s == pytest.approx(3.0)
    assert plan.costs.per_token["grpo"] == pytest.approx(2.0 / tokens)  # the median: not the build
    rloo = plan.conditions[1]
    assert rloo.done == 0 and rloo.est_trial_s == pytest.approx(3.0 + 2.0 + TRIAL_TURNOVER_S)  # the overall rate

    m = plan.measured
    assert (m.trials, m.median_s, m.total_s) == (3, pytest.approx(5.0), pytest.approx(63.0 + 5.0 + 5.0))
    assert m.span_s == pytest.approx(63.0)  # the first start (T0) to the last finish (the first trial's)
    assert m.default_median_s == pytest.approx(TRIAL_START_S + tokens * SECONDS_PER_TOKEN)

    code, out, err = run_main(monkeypatch, capsys, "plan", "small.yaml")
    assert code == 0, err
    assert "costs measured from 3 completed record(s) in runs/small/records" in out
    assert (
        f"measured: 3 completed trial(s), 5.0s each from start to finish (median; the defaults estimate "
        f"{m.default_median_s:.1f}s), 1m13s in all; 1m03s from the first start to the last finish"
    ) in out


def test_a_real_model_without_records_is_warned_about_the_defaults():
    path = small()
    path.write_text(path.read_text() + "model: {name: ./models/my-model}\n")
    warnings = plan_study(load_study(path)).warnings
    assert any(
        w.startswith("model ./models/my-model: the default costs are the tiny testbed model's") for w in warnings
    )


def test_arms_sampled_by_vllm_are_warned_that_the_defaults_price_the_in_process_sampler():
    path = small("rollout: {backend: vllm, vllm: {url: 'http://127.0.0.1:9'}}\n")
    path.write_text(
        path.read_text().replace(
            "{name: rloo, algorithm: rloo}", "{name: rloo, algorithm: rloo, set: {rollout.backend: hf}}"
        )
    )
    [warning] = [w for w in plan_study(load_study(path)).warnings if "rollout.backend vllm" in w]
    assert warning.startswith("grpo: rollout.backend vllm, priced as if the trial process sampled (hf)")
    path.write_text(path.read_text().replace("rollout: {backend: vllm, vllm: {url: 'http://127.0.0.1:9'}}\n", ""))
    assert not [w for w in plan_study(load_study(path)).warnings if "rollout.backend" in w]
