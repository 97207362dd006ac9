"""harness report / compare / noise-floor print the report's numbers; bad names are ConfigErrors."""

import json

import pytest
from report_fakes import make_results
from typer.testing import CliRunner

from harness.cli import app, report_cmds
from harness.decide.analysis import analyze
from harness.errors import ConfigError


@pytest.fixture
def cli(monkeypatch):
    res = make_results()
    seen = []

    def fake_load(study):
        seen.append(study)
        return res

    monkeypatch.setattr(report_cmds, "_load", fake_load)
    return res, seen, CliRunner()


def test_report_command_writes_to_out(cli, tmp_path):
    res, seen, runner = cli
    out = tmp_path / "rep"
    r = runner.invoke(app, ["report", "studies/x.yaml", "--out", str(out), "--correction", "none"])
    assert r.exit_code == 0, r.output
    assert seen == ["studies/x.yaml"]
    assert (out / "index.html").exists() and (out / "plotly.min.js").exists()
    assert "**Correction:** none" in (out / "summary.md").read_text()


def test_report_command_default_folder(cli, tmp_path, monkeypatch):
    _, _, runner = cli
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["report", "runs/synthetic"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "reports" / "synthetic" / "index.html").exists()


def test_compare_json_matches_report(cli):
    res, _, runner = cli
    r = runner.invoke(app, ["compare", "s.yaml", "big", "grpo", "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    row = analyze(res).verdicts.set_index("condition").loc["big"]
    for key in ("diff", "ci_low", "ci_high", "p_value", "p_adjusted", "hedges_g", "pair_correlation"):
        assert got[key] == pytest.approx(row[key]), key
    assert got["verdict"] == row["verdict"] and got["paired"] is True
    assert {c["check"] for c in got["robustness"]} >= {"mann_whitney", "yuen", "permutation"}
    assert "paired_t" not in {c["check"] for c in got["robustness"]}  # the verdict's own test is not repeated


def test_compare_min_effect_option(cli):
    _, _, runner = cli
    r = runner.invoke(app, ["compare", "s.yaml", "null", "grpo", "--min-effect", "0.1", "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    assert got["min_effect"] == 0.1 and got["verdict"] == "equivalent"
    r = runner.invoke(app, ["compare", "s.yaml", "null", "grpo", "--min-effect", "0"])
    assert isinstance(r.exception, ConfigError) and "min_effect must be a finite number > 0" in str(r.exception)


def test_compare_text(cli):
    _, _, runner = cli
    r = runner.invoke(app, ["compare", "s.yaml", "null", "grpo"])
    assert r.exit_code == 0, r.output
    assert "null vs grpo on eval/accuracy (maximize), paired over 4 seeds" in r.output
    assert "verdict         inconclusive" in r.output and "robustness checks:" in r.output
    assert "failed trials   1 vs 0" in r.output and "min_effect      not set" in r.output


def test_compare_unknown_names(cli):
    _, _, runner = cli
    r = runner.invoke(app, ["compare", "s.yaml", "nope", "grpo"])
    assert isinstance(r.exception, ConfigError)
    assert "unknown arm 'nope'; valid: big, grpo, null" in str(r.exception)
    r = runner.invoke(app, ["compare", "s.yaml", "big", "grpo", "--metric", "eval/acc"])
    assert isinstance(r.exception, ConfigError) and "eval/accuracy" in str(r.exception)
    r = runner.invoke(app, ["noise-floor", "s.yaml", "--metric", "zzz"])
    assert isinstance(r.exception, ConfigError) and "unknown metric 'zzz'" in str(r.exception)


def test_noise_floor_command(cli):
    res, _, runner = cli
    r = runner.invoke(app, ["noise-floor", "s.yaml", "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    table = analyze(res).noise_floor.set_index("condition")
    assert got["metric"] == "eval/accuracy" and got["level"] == pytest.approx(0.975)
    for row in got["conditions"]:
        assert row["std"] == pytest.approx(table.loc[row["condition"], "std"])
        assert row["seeds_needed"] == table.loc[row["condition"], "seeds_needed"]
    r = runner.invoke(app, ["noise-floor", "s.yaml", "--min-effect", "0.05"])
    assert r.exit_code == 0 and "noise floor of eval/accuracy" in r.output
    assert "seeds to decide" in r.output and "bonett" in r.output
