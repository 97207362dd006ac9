"""harness report / compare / noise-floor print the report's numbers; bad names are ConfigErrors."""

import json

import pytest
from report_fakes import make_results
from typer.testing import CliRunner

from harness.cli import app, report_cmds
from harness.errors import ConfigError
from harness.report import analyze, noise_floor_table


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
    r = runner.invoke(app, ["report", "studies/x.yaml", "--out", str(out), "--correction", "bh"])
    assert r.exit_code == 0, r.output
    assert seen == ["studies/x.yaml"]
    assert (out / "index.html").exists() and (out / "plotly.min.js").exists()
    assert "bh" in (out / "summary.md").read_text()


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


def test_compare_text(cli):
    _, _, runner = cli
    r = runner.invoke(app, ["compare", "s.yaml", "null", "grpo"])
    assert r.exit_code == 0, r.output
    assert "null vs grpo on eval/accuracy (maximize), 4 vs 5 seeds" in r.output
    assert "verdict" in r.output and "robustness checks:" in r.output


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
    table = noise_floor_table(res).set_index("condition")
    assert got["metric"] == "eval/accuracy"
    for row in got["conditions"]:
        assert row["std"] == pytest.approx(table.loc[row["condition"], "std"])
        assert row["mde"] == pytest.approx(table.loc[row["condition"], "mde"])
    r = runner.invoke(app, ["noise-floor", "s.yaml"])
    assert r.exit_code == 0 and "noise floor of eval/accuracy" in r.output
    assert "seeds for a 1-sd effect" in r.output
