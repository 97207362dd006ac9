"""``harness tidy`` of a study with held-out benchmarks, then ``harness decide`` on that table: the
same primary, per-benchmark and overall verdicts as the study's own report (records written
directly: no trial runs)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_main import run_main
from scipy import special
from test_decide import tables

from harness.engine.spec import PromptScores, TrialResult
from harness.study.expand import expand
from harness.study.load import load_study
from harness.tracking import records
from harness.tracking.tidy_results import TASK_SET

#: each arm's logit lift on the task's own set and on each benchmark
LIFT = {"grpo": 0.0, "big": 1.5, "same": 0.0}
SETS = {None: 40, "gsm": 30, "overall_math": 24}  # None: the study task's own held-out set


def stored_benchmark_study(seeds: int, primary: str = "eval/accuracy", k: int = 4) -> Path:
    """``studies/bench.yaml`` (a task and two benchmarks, one with its own min_effect) and a
    completed record of every trial with per-prompt scores on every set."""
    path = Path("studies") / "bench.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(
        textwrap.dedent(f"""\
            name: bench
            control: grpo
            seeds: {seeds}
            primary_metric: {primary}
            min_effect: 0.05
            train: {{steps: 2, prompts_per_step: 2, max_new_tokens: 4, eval_every: 1, eval_samples: {k}}}
            task: {{n_eval: {SETS[None]}}}
            benchmarks:
              - {{name: gsm, task: {{name: addition, min_digits: 2, max_digits: 2, n_train: 1, n_eval: {SETS["gsm"]}}}}}
              - name: overall_math
                task: {{name: addition, min_digits: 1, max_digits: 1, n_train: 1, n_eval: {SETS["overall_math"]}}}
                min_effect: 0.1
            arms:
              - {{name: grpo, algorithm: grpo}}
              - {{name: big, algorithm: rloo}}
              - {{name: same, algorithm: dr_grpo}}
            """)
    )
    study = load_study(path)
    rng = np.random.default_rng(3)
    difficulty = {name: rng.normal(0, 1.5, n) for name, n in SETS.items()}
    for i, spec in enumerate(expand(study)):
        final, scores = {"tokens/total": 100.0}, []
        for name, n in SETS.items():
            q = special.expit(difficulty[name] + LIFT[spec.arm] + rng.normal(0, 0.1))
            greedy = (rng.random(n) < q).astype(float)
            draws = (rng.random((n, k)) < q[:, None]).astype(float)
            scores.append(
                PromptScores(
                    step=2,
                    prompt_ids=[f"p{j}" for j in range(n)],
                    greedy=greedy.tolist(),
                    sampled_mean=draws.mean(axis=1).tolist(),
                    sampled_var=draws.var(axis=1, ddof=1).tolist(),
                    samples=k,
                    benchmark=name,
                )
            )
            prefix = "eval/" if name is None else f"eval/{name}/"
            final |= {prefix + "accuracy": float(greedy.mean()), prefix + "mean_reward": float(draws.mean())}
        result = TrialResult(trial_id=spec.trial_id, final=final, wall_time_s=2.0 + i, prompts=scores)
        records.write_record(Path("runs") / study.name, records.make_record(spec, result, finished_at=1.8e9 + i))
    return path


SECTIONS = (
    "Verdicts",
    "Verdicts in full",
    "Noise by source",
    "Overall verdicts across benchmarks",
    "Verdicts by benchmark",
    "Aggregates across benchmarks",
)


@pytest.mark.parametrize(("seeds", "primary"), [(3, "eval/accuracy"), (1, "eval/accuracy"), (3, "eval/mean_reward")])
def test_decide_on_a_benchmark_study_s_tidy_table_gives_the_study_s_verdicts(monkeypatch, capsys, seeds, primary):
    stored_benchmark_study(seeds, primary)
    code, _, err = run_main(monkeypatch, capsys, "report", "bench", "--out", "study_report")
    assert code == 0, err
    code, _, err = run_main(monkeypatch, capsys, "tidy", "bench", "--out", "bench.csv")
    assert code == 0, err
    tidy = pd.read_csv("bench.csv", keep_default_na=False)
    assert list(dict.fromkeys(tidy["benchmark"])) == [TASK_SET, "gsm", "overall_math"]
    assert len(tidy) == 3 * seeds * sum(SETS.values())
    Path("decide.yaml").write_text(
        f"control: grpo\nmetric: {primary}\nmin_effect: 0.05\nbenchmark_min_effect: {{overall_math: 0.1}}\n"
    )
    code, out, err = run_main(monkeypatch, capsys, "decide", "bench.csv", "--config", "decide.yaml", "--out", "judged")
    assert code == 0, err
    study, judged = tables(Path("study_report/summary.md")), tables(Path("judged/summary.md"))
    for section in SECTIONS:
        assert judged[section] == study[section], section
    by_benchmark = "".join(judged["Verdicts by benchmark"])
    assert "| gsm |" in by_benchmark and "| overall_math |" in by_benchmark and TASK_SET not in by_benchmark
    said = re.findall(r"^(overall|primary|gsm|overall_math)\b[^:]*: (big|same) vs grpo: (.+) \(difference", out, re.M)
    assert [(where, arm) for where, arm, _ in said] == [
        (where, arm) for where in ("overall", "primary", "gsm", "overall_math") for arm in ("big", "same")
    ], out
    for _, _, label in said:
        assert label.endswith("(eval-only)") == (seeds == 1), out


def test_decide_metric_naming_a_benchmark_makes_it_primary(monkeypatch, capsys):
    stored_benchmark_study(3)
    assert run_main(monkeypatch, capsys, "tidy", "bench", "--out", "bench.csv")[0] == 0
    code, out, err = run_main(
        monkeypatch, capsys, "decide", "bench.csv", "--control", "grpo", "--metric", "eval/gsm/accuracy",
        "--min-effect", "0.05", "--out", "judged",
    )  # fmt: skip
    assert code == 0, err
    assert "**Primary metric:** eval/gsm/accuracy (maximize)" in Path("judged/summary.md").read_text()
    code, _, err = run_main(
        monkeypatch, capsys, "decide", "bench.csv", "--control", "grpo", "--metric", "eval/aime/accuracy"
    )
    assert code == 2 and "names benchmark 'aime', which has no rows; benchmarks there: gsm, overall_math" in err


def test_tidy_with_a_task_metric_exports_every_set_of_that_kind_and_refuses_mixed_kinds(monkeypatch, capsys):
    path = stored_benchmark_study(1)
    assert run_main(monkeypatch, capsys, "tidy", "bench", "--out", "m.csv", "--metric", "eval/mean_reward")[0] == 0
    tidy = pd.read_csv("m.csv", keep_default_na=False)
    assert list(dict.fromkeys(tidy["benchmark"])) == [TASK_SET, "gsm", "overall_math"] and "samples" in tidy
    assert run_main(monkeypatch, capsys, "tidy", "bench", "--out", "g.csv", "--metric", "eval/gsm/accuracy")[0] == 0
    assert "benchmark" not in pd.read_csv("g.csv").columns  # one benchmark's metric: that set alone
    path.write_text(path.read_text().replace("min_effect: 0.1", "min_effect: 0.1\n    metric: mean_reward"))
    code, _, err = run_main(monkeypatch, capsys, "tidy", "bench", "--out", "x.csv")
    assert code == 2 and "metrics of different kinds" in err and "give --metric eval/accuracy" in err


@pytest.mark.slow
def test_a_real_benchmark_study_s_tidy_table_judges_as_its_report(monkeypatch, capsys):
    """A tiny testbed study with two benchmarks, its trials run (seconds): report, tidy, decide."""
    import torch

    from harness.engine.trial import run_trial
    from harness.study.expand import study_dir

    torch.set_num_threads(1)
    path = Path("studies") / "real.yaml"
    path.parent.mkdir()
    path.write_text(
        textwrap.dedent("""\
            name: real
            control: grpo
            seeds: 2
            min_effect: 0.05
            task: {name: addition, max_digits: 2, n_train: 300, n_eval: 24, reward: partial_match}
            model: {name: tiny, tiny: {hidden_size: 32, layers: 1, heads: 2, intermediate_size: 64}}
            warmstart: {steps: 20, batch_size: 16, lr: 3.0e-3}
            train: {steps: 2, prompts_per_step: 4, max_new_tokens: 4, eval_every: 0, eval_samples: 2}
            benchmarks:
              - name: add_2digit
                task: {name: addition, min_digits: 2, max_digits: 2, n_train: 1, n_eval: 20, reward: partial_match}
              - name: add_3digit
                task: {name: addition, min_digits: 3, max_digits: 3, n_train: 1, n_eval: 12, reward: partial_match}
                min_effect: 0.02
            arms:
              - {name: grpo, algorithm: grpo}
              - {name: rloo, algorithm: rloo}
            """)
    )
    study = load_study(path)
    for spec in expand(study):
        spec = spec.model_copy(update={"cache_dir": str(Path("cache").resolve())})
        records.write_record(study_dir(study), records.make_record(spec, run_trial(spec)))
    assert run_main(monkeypatch, capsys, "report", str(path), "--out", "a")[0] == 0
    assert run_main(monkeypatch, capsys, "tidy", str(path), "--out", "real.csv")[0] == 0
    Path("decide.yaml").write_text("control: grpo\nmin_effect: 0.05\nbenchmark_min_effect: {add_3digit: 0.02}\n")
    code, _, err = run_main(monkeypatch, capsys, "decide", "real.csv", "--config", "decide.yaml", "--out", "b")
    assert code == 0, err
    study_tables, judged = tables(Path("a/summary.md")), tables(Path("b/summary.md"))
    for section in SECTIONS:
        assert judged[section] == study_tables[section], section
