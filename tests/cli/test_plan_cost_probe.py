"""``harness plan`` of a real model prices its trials by a short probe measured on this machine
(``harness.engine.cost_probe``, replaced here by a kept result: the probe itself is tested on the
tiny model in tests/engine/test_cost_probe.py), says which source it used, and reads a kept probe
without importing torch; completed records still win, and a tiny-model study never probes."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from cli_main import run_main

from harness.engine import cost_probe
from harness.engine.cost_probe import CostProbe, probe_costs
from harness.engine.spec import TrialResult
from harness.errors import ConfigError
from harness.study.expand import expand, study_dir
from harness.study.load import load_study
from harness.study.noop import noop_pairs
from harness.study.plan import TRIAL_START_S, TRIAL_TURNOVER_S, format_duration, probed_trial
from harness.tracking import records

QUICKSTART = Path(__file__).resolve().parents[2] / "studies" / "quickstart.yaml"
MODEL = "./models/my-model"
#: 135M parameters: 6 s to load, a step of 8 rows x 4 tokens in 3 + 2 s, an evaluation of 8 prompts x 2 rows in 4 s
PROBED = CostProbe(MODEL, 135_000_000, 6.0, 8, 4, 3.0, 2.0, 1, 8, 1, 4.0, 20.0, 0.3, 2)


def real_study(model: str = MODEL) -> Path:
    path = Path("real.yaml")
    path.write_text(
        textwrap.dedent(f"""\
        name: real
        control: grpo
        seeds: 2
        model: {{name: {model}}}
        warmstart: {{enabled: false}}
        train: {{steps: 10, prompts_per_step: 4, max_new_tokens: 4, eval_every: 5, eval_samples: 1}}
        task: {{n_eval: 16}}
        arms:
          - {{name: grpo, algorithm: grpo, set: {{group_size: 4}}}}
          - {{name: rloo, algorithm: rloo, set: {{group_size: 4}}}}
        """)
    )
    return path


@pytest.fixture
def probes(monkeypatch):
    """Every probe the CLI asks for, answered with ``PROBED`` (cached when asked again)."""
    asked = []

    def probe(spec, *, again=False):
        asked.append((spec, again))
        return PROBED if len(asked) == 1 or again else replace(PROBED, cached=True)

    monkeypatch.setattr(cost_probe, "probe_costs", probe)
    return asked


def test_a_real_model_is_priced_by_its_probe_and_the_plan_says_so(monkeypatch, capsys, probes):
    path = real_study()
    code, out, err = run_main(monkeypatch, capsys, "plan", str(path), "--cache-dir", "kept")
    assert code == 0, err
    [(spec, again)] = probes
    assert (spec.arm, spec.model.name, spec.cache_dir, again) == ("grpo", MODEL, "kept", False)
    assert (
        f"costs from a probe of {MODEL} (135M parameters) on this machine, measured now (20s): its load, one step "
        "of 8 rows and one evaluation of 8 prompts, scaled to each trial's rows" in out
    )
    # 16 rows a step: twice the probe's; 16 held-out prompts: twice its 8
    trial = probed_trial(PROBED, expand(load_study(path))[0])
    assert (trial.step_s, trial.eval_s, trial.evaluations) == (pytest.approx(10.0), pytest.approx(8.0), 3)
    per_trial = TRIAL_START_S + 6.0 + 10 * 10.0 + 3 * 8.0 + TRIAL_TURNOVER_S
    assert (
        f"per trial: {TRIAL_START_S:.1f}s to start its process + 6.0s to load the model + 10 steps x 10.0s + "
        f"3 evaluations x 8.0s + {TRIAL_TURNOVER_S:g}s to the next trial" in out
    )
    assert f"{format_duration(4 * per_trial)} of trials / 1 worker" in out
    assert "the default costs are the tiny testbed model's" not in out + err

    code, out, _ = run_main(monkeypatch, capsys, "plan", str(path), "--cache-dir", "kept")
    assert f"costs from a probe of {MODEL} (135M parameters) on this machine, cached from an earlier plan" in out
    run_main(monkeypatch, capsys, "plan", str(path), "--reprobe")
    assert probes[-1][1] is True
    code, out, _ = run_main(monkeypatch, capsys, "plan", str(path), "--json")
    plan = json.loads(out)
    assert plan["costs"]["probe"]["parameters"] == 135_000_000 and plan["probed"]["step_s"] == pytest.approx(10.0)


def test_a_probe_on_a_busy_machine_is_warned_about(monkeypatch, capsys):
    busy = replace(PROBED, load_average=7.0)
    monkeypatch.setattr(cost_probe, "probe_costs", lambda spec, again=False: busy)
    _, out, err = run_main(monkeypatch, capsys, "plan", str(real_study()))
    assert (
        "the cost probe of ./models/my-model ran while the machine was busy (load average 7.0 on 2 CPUs)" in out + err
    )


def test_completed_records_win_over_the_probe(monkeypatch, capsys, probes):
    study = load_study(real_study())
    spec = expand(study)[0]
    began = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    result = TrialResult(trial_id=spec.trial_id, final={"eval/accuracy": 0.5}, wall_time_s=100.0)
    record = records.make_record(spec, result, started_at=began, finished_at=began + dt.timedelta(seconds=104))
    records.write_record(study_dir(study), record)
    _, out, _ = run_main(monkeypatch, capsys, "plan", "real.yaml")
    assert probes == []
    assert "costs measured from 1 completed record(s)" in out


def test_a_tiny_model_study_never_probes(monkeypatch, capsys, probes):
    code, out, err = run_main(monkeypatch, capsys, "plan", str(QUICKSTART))
    assert code == 0, err
    assert probes == []
    assert "costs: the defaults, measured on the 2-core development machine with the tiny testbed model" in out


def test_no_probe_keeps_the_defaults_and_their_warning(monkeypatch, capsys, probes):
    _, out, err = run_main(monkeypatch, capsys, "plan", str(real_study()), "--no-probe")
    assert probes == []
    assert "model ./models/my-model: the default costs are the tiny testbed model's" in out + err


def test_a_model_the_probe_cannot_load_is_one_line_and_the_defaults(monkeypatch, capsys):
    def cannot(spec, again=False):
        raise ConfigError(f"model.name {spec.model.name!r}: no such model")

    monkeypatch.setattr(cost_probe, "probe_costs", cannot)
    code, out, err = run_main(monkeypatch, capsys, "plan", str(real_study()))
    assert code == 0
    assert (
        "plan: no cost probe of ./models/my-model (model.name './models/my-model': no such model); "
        "the estimate uses the testbed defaults" in err
    )
    assert "Traceback" not in err


SCRIPT = """
import sys
from typer.testing import CliRunner
from harness.cli import app
result = CliRunner().invoke(app, sys.argv[1:])
print(result.output)
print("loaded:", [m for m in ("torch", "transformers") if m in sys.modules])
"""


def test_a_kept_probe_is_read_without_torch(monkeypatch):
    study = load_study(real_study())
    noop_pairs(study)  # the arms' no-op probe, kept in .cache/harness/probe like the cost probe
    monkeypatch.setattr(cost_probe, "_measure", lambda spec: PROBED)
    probe_costs(expand(study)[0].model_copy(update={"cache_dir": "kept"}))
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, "plan", "real.yaml", "--cache-dir", "kept"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"},
    )
    assert done.returncode == 0, done.stderr
    assert "cached from an earlier plan" in done.stdout
    assert done.stdout.strip().endswith("loaded: []"), done.stdout
