"""The cost probe: one trial's start, one step and one evaluation at a small shape, measured on
the tiny model here (the real model's is the same code), scaled by the plan to a trial's counts,
and kept in the checked cache so a second plan does not probe again."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from harness.algorithms import resolve_algorithm
from harness.engine import cost_probe
from harness.engine.cost_probe import (
    PROBE_EVAL_PROMPTS,
    PROBE_FOLDER,
    PROBE_PROMPTS,
    RESULT_FILE,
    CostProbe,
    CostProbeWarning,
    probe_costs,
    probe_key,
)
from harness.engine.spec import TrialSpec
from harness.study.plan import probed_trial

SHAPE = {"steps": 6, "prompts_per_step": 2 * PROBE_PROMPTS, "eval_every": 3, "eval_samples": 2, "max_new_tokens": 4}
HELD_OUT = {"n_eval": 2 * PROBE_EVAL_PROMPTS}


def test_the_probe_measures_a_small_step_and_evaluation_and_the_plan_scales_them(make_spec, tmp_path):
    spec = make_spec(overrides={"group_size": 2}, train=SHAPE, task=HELD_OUT).model_copy(
        update={"cache_dir": str(tmp_path)}
    )
    probe = probe_costs(spec)

    assert not probe.cached and probe.model == "tiny" and probe.parameters > 0
    assert (probe.step_rows, probe.row_tokens, probe.epochs) == (PROBE_PROMPTS * 2, 4, 1)
    assert (probe.eval_prompts, probe.eval_samples) == (PROBE_EVAL_PROMPTS, 2)
    assert min(probe.load_s, probe.sample_s, probe.update_s, probe.eval_s) > 0
    assert probe.probe_s >= probe.load_s + probe.eval_s and probe.cpus >= 1 and probe.load_average >= 0

    trial = probed_trial(probe, spec)
    assert (trial.steps, trial.evaluations) == (6, 3)  # at the start, after step 3, after step 6
    assert trial.step_s == pytest.approx((probe.sample_s + probe.update_s) * 2)  # twice the probe's rows
    assert trial.eval_s == pytest.approx(probe.eval_s * 2)  # twice its held-out prompts
    assert trial.total_s == pytest.approx(probe.load_s + 6 * trial.step_s + 3 * trial.eval_s)


def test_the_plan_scales_a_probe_by_rows_budget_and_epochs():
    probe = CostProbe("m", 135_000_000, 5.0, 8, 16, 2.0, 3.0, 1, 8, 2, 1.5, 15.0, 0.5, 2)
    base = {"steps": 10, "prompts_per_step": 8, "max_new_tokens": 16, "eval_every": 5, "eval_samples": 2}

    def spec(train=None, **algorithm):
        return TrialSpec(
            arm="a",
            algorithm=resolve_algorithm("grpo", {"group_size": 4, **algorithm}),
            task={"name": "addition", "n_eval": 64},
            train={**base, **(train or {})},
        )

    one = probed_trial(probe, spec())
    assert one.step_s == pytest.approx(4 * (2.0 + 3.0))  # 32 rows against the probe's 8
    assert one.eval_s == pytest.approx(8 * 1.5)  # 64 prompts against 8, the same samples each
    assert one.evaluations == 3 and one.total_s == pytest.approx(5.0 + 10 * 20.0 + 3 * 12.0)
    longer = probed_trial(probe, spec({"max_new_tokens": 32}))
    assert longer.step_s == pytest.approx(2 * one.step_s) and longer.eval_s == pytest.approx(2 * one.eval_s)
    assert probed_trial(probe, spec(epochs=2)).step_s == pytest.approx(4 * (2.0 + 2 * 3.0))  # the updates twice
    assert probed_trial(probe, spec({"eval_samples": 5})).eval_s == pytest.approx(8 * 1.5 * 6 / 3)


def test_a_probe_on_a_busy_machine_says_so_before_it_starts(make_spec, tmp_path, monkeypatch, capsys):
    spec = make_spec(train=SHAPE).model_copy(update={"cache_dir": str(tmp_path)})
    monkeypatch.setattr(cost_probe.os, "getloadavg", lambda: (64.0, 64.0, 64.0))
    monkeypatch.setattr(cost_probe.os, "cpu_count", lambda: 2)
    probe = probe_costs(spec)
    assert (probe.load_average, probe.cpus) == (64.0, 2)
    assert "plan: the machine is busy (load average 64.0 on 2 CPUs)" in capsys.readouterr().err


def test_a_second_probe_reads_the_cache_and_measures_nothing(make_spec, tmp_path, monkeypatch):
    spec = make_spec(train=SHAPE).model_copy(update={"cache_dir": str(tmp_path)})
    first = probe_costs(spec)

    def no_second_probe(_spec):
        raise AssertionError("probed again")

    monkeypatch.setattr(cost_probe, "_measure", no_second_probe)
    again = probe_costs(spec)
    assert again.cached and again == replace(first, cached=True)
    # what the seconds do not depend on (the number of steps, evaluations) reads the same entry
    more_steps = spec.model_copy(update={"train": spec.train.model_copy(update={"steps": 60, "eval_every": 20})})
    assert probe_costs(more_steps).cached
    # what they do depend on is another entry
    for other in (
        spec.model_copy(update={"train": spec.train.model_copy(update={"threads": 2})}),
        spec.model_copy(update={"train": spec.train.model_copy(update={"max_new_tokens": 8})}),
        spec.model_copy(update={"model": spec.model.model_copy(update={"dtype": "bfloat16"})}),
    ):
        assert probe_key(other) != probe_key(spec)


def test_an_edited_result_is_probed_again(make_spec, tmp_path, monkeypatch):
    spec = make_spec(train=SHAPE).model_copy(update={"cache_dir": str(tmp_path)})
    measured = CostProbe("tiny", 1000, 1.0, 4, 4, 0.5, 0.5, 1, 8, 2, 0.25, 2.0, 0.5, 2)
    calls = []
    monkeypatch.setattr(cost_probe, "_measure", lambda s: calls.append(s) or measured)
    assert probe_costs(spec) == measured and len(calls) == 1
    result = tmp_path / PROBE_FOLDER / probe_key(spec) / RESULT_FILE
    result.write_text(json.dumps({**json.loads(result.read_text()), "load_s": 0.001}))
    with pytest.warns(CostProbeWarning, match=f"{RESULT_FILE} does not match its sha256"):
        assert probe_costs(spec) == measured
    assert len(calls) == 2
    assert probe_costs(spec, again=True) == measured and len(calls) == 3  # --reprobe: measured whatever is kept
