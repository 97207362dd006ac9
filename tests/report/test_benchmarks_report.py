"""End to end: a small study with two held-out benchmarks runs its trials, and its report shows
the per-benchmark and overall verdicts, the aggregates and the benchmark figures."""

from __future__ import annotations

import textwrap

import pytest
import torch
from typer.testing import CliRunner

from harness.cli.app import app
from harness.engine.trial import run_trial
from harness.study.expand import expand, study_dir
from harness.study.load import load_study
from harness.tracking.records import make_record, write_record
from harness.tracking.results import load_results

STUDY = """\
name: bench_small
output_dir: {out}
control: grpo
seeds: 3
min_effect: 0.05
task: {{name: addition, max_digits: 2, n_train: 300, n_eval: 24, reward: partial_match}}
model: {{name: tiny, tiny: {{hidden_size: 32, layers: 1, heads: 2, intermediate_size: 64}}}}
warmstart: {{steps: 20, batch_size: 16, lr: 3.0e-3}}
train: {{steps: 2, prompts_per_step: 4, max_new_tokens: 4, eval_every: 0, eval_samples: 2}}
benchmarks:
  - name: add_2digit
    task: {{name: addition, min_digits: 2, max_digits: 2, n_train: 1, n_eval: 20, reward: partial_match}}
  - name: add_3digit
    task: {{name: addition, min_digits: 3, max_digits: 3, n_train: 1, n_eval: 12, reward: partial_match}}
    min_effect: 0.02
arms:
  - {{name: grpo, algorithm: grpo}}
  - {{name: rloo, algorithm: rloo}}
"""


@pytest.mark.slow
def test_a_study_with_benchmarks_reports_per_benchmark_and_overall_verdicts(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    path = tmp_path / "bench_small.yaml"
    path.write_text(textwrap.dedent(STUDY.format(out=tmp_path / "out")))
    study = load_study(path)
    for spec in expand(study):
        spec = spec.model_copy(update={"cache_dir": str(tmp_path / "cache")})
        write_record(study_dir(study), make_record(spec, run_trial(spec)))

    results = load_results(path)
    assert results.meta.to_dict()["benchmarks"] == [
        {"name": "add_2digit", "metric": "eval/add_2digit/accuracy", "min_effect": None},
        {"name": "add_3digit", "metric": "eval/add_3digit/accuracy", "min_effect": 0.02},
    ]
    assert {"eval/add_2digit/accuracy", "eval/add_3digit/mean_reward"} <= set(results.trials.columns)
    assert {"eval/add_2digit/accuracy", "eval/add_3digit/mean_reward.sample_var"} <= set(results.prompts["metric"])

    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(app, ["report", str(path)])
    assert out.exit_code == 0, out.output
    summary = (tmp_path / "reports" / "bench_small" / "summary.md").read_text()
    page = (tmp_path / "reports" / "bench_small" / "index.html").read_text()
    table = summary[summary.index("## Verdicts by benchmark") : summary.index("## Aggregates across benchmarks")]
    rows = [line for line in table.splitlines() if line.startswith("| add_") or line.startswith("| overall")]
    assert [r.split(" | ")[0] for r in rows] == ["| add_2digit", "| add_3digit"]  # the overall verdicts: apart
    assert "| benchmark | metric | min_effect | rloo vs grpo |" in table
    assert "Intervals at 97.5% (Bonferroni over the 2 testable comparisons x benchmarks" in table
    for row in rows:
        assert any(v in row for v in ("better", "worse", "equivalent", "inconclusive"))
    overall = summary[summary.index("## Overall verdicts") : summary.index("## Verdicts by benchmark")]
    assert "| rloo | grpo |" in overall and "Intervals at 95% (Bonferroni over the 1 testable comparison," in overall
    assert "IQM" in summary and "P(improvement)" in summary
    assert 'id="fig-bench-forest"' in page and 'id="fig-bench-profile"' in page
    # the primary verdict table stays about the primary metric
    verdicts = summary[summary.index("## Verdicts\n") : summary.index("## Verdicts in full")]
    assert "rloo" in verdicts and "add_2digit" not in verdicts
