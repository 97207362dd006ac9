"""``harness decide FILE``: results from anywhere get the same report and verdicts as a study;
``harness tidy STUDY`` writes a study's results as that table. Bad input is one line, exit 2."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_main import run_main
from scipy import special

from harness.engine.spec import PromptScores, TrialResult
from harness.study.expand import expand
from harness.study.load import load_study
from harness.tracking import records

ARMS = {"grpo": 0.0, "big": 2.0, "same": 0.0}


def stored_study(seeds: int, primary: str = "eval/accuracy", prompts: int = 40, k: int = 4) -> Path:
    """``studies/scored.yaml`` and a completed record of every trial with per-prompt scores
    (greedy 0/1 and the mean and variance of k sampled rewards), written directly: no trial runs."""
    path = Path("studies") / "scored.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(
        textwrap.dedent(f"""\
            name: scored
            control: grpo
            seeds: {seeds}
            primary_metric: {primary}
            min_effect: 0.05
            train: {{steps: 2, prompts_per_step: 2, max_new_tokens: 4, eval_every: 1, eval_samples: {k}}}
            task: {{n_eval: {prompts}}}
            arms:
              - {{name: grpo, algorithm: grpo}}
              - {{name: big, algorithm: rloo}}
              - {{name: same, algorithm: dr_grpo}}
            """)
    )
    study = load_study(path)
    rng = np.random.default_rng(8)
    difficulty = rng.normal(0, 1.5, prompts)
    ids = [f"p{i}" for i in range(prompts)]
    for i, spec in enumerate(expand(study)):
        q = special.expit(difficulty + ARMS[spec.arm] + rng.normal(0, 0.1))
        greedy = (rng.random(prompts) < q).astype(float)
        draws = (rng.random((prompts, k)) < q[:, None]).astype(float)
        scores = PromptScores(
            step=2,
            prompt_ids=ids,
            greedy=greedy.tolist(),
            sampled_mean=draws.mean(axis=1).tolist(),
            sampled_var=draws.var(axis=1, ddof=1).tolist(),
            samples=k,
        )
        final = {"eval/accuracy": float(greedy.mean()), "eval/mean_reward": float(draws.mean()), "tokens/total": 100.0}
        result = TrialResult(trial_id=spec.trial_id, final=final, wall_time_s=2.0 + i, prompts=[scores])
        records.write_record(Path("runs") / study.name, records.make_record(spec, result, finished_at=1.8e9 + i))
    return path


def tables(summary: Path) -> dict[str, list[str]]:
    """The Markdown tables of a summary.md by their section title (table rows only)."""
    out: dict[str, list[str]] = {}
    title = None
    for line in summary.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            title = line[3:]
        elif line.startswith("|") and title:
            out.setdefault(title, []).append(line)
    return out


@pytest.mark.parametrize(
    ("seeds", "primary"),
    [(3, "eval/accuracy"), (3, "eval/mean_reward"), (1, "eval/accuracy"), (1, "eval/mean_reward")],
)
def test_decide_on_a_study_s_tidy_table_gives_the_study_s_verdicts(monkeypatch, capsys, seeds, primary):
    stored_study(seeds, primary)
    code, out, err = run_main(monkeypatch, capsys, "report", "scored", "--out", "study_report")
    assert code == 0, err
    code, out, err = run_main(monkeypatch, capsys, "tidy", "scored", "--out", "scored.csv")
    assert code == 0, err
    tidy = pd.read_csv("scored.csv", keep_default_na=False)
    assert len(tidy) == 3 * seeds * 40
    assert ("samples" in tidy) == (primary == "eval/mean_reward")
    code, out, err = run_main(
        monkeypatch, capsys, "decide", "scored.csv", "--control", "grpo", "--metric", primary,
        "--min-effect", "0.05", "--out", "judged",
    )  # fmt: skip
    assert code == 0, err
    study, judged = tables(Path("study_report/summary.md")), tables(Path("judged/summary.md"))
    for section in ("Verdicts", "Verdicts in full", "Noise by source", "What more budget buys"):
        assert judged[section] == study[section], section
    said = re.findall(r"^(big|same) vs grpo: (.+) \(difference", out, re.M)
    assert [arm for arm, _ in said] == ["big", "same"], out
    for _, label in said:  # one run per arm: eval-only labels; more: seed-level ones
        assert label.endswith("(eval-only)") == (seeds == 1), out
        assert f"| {label} |" in "".join(judged["Verdicts"])


def test_options_override_the_config_file_and_the_report_lands_under_its_name(monkeypatch, capsys):
    stored_study(3)
    assert run_main(monkeypatch, capsys, "tidy", "scored", "--out", "t.parquet")[0] == 0
    Path("decide.yaml").write_text("name: mine\ncontrol: big\nmetric: eval/accuracy\nmin_effect: 0.05\n")
    code, out, err = run_main(
        monkeypatch, capsys, "decide", "t.parquet", "--config", "decide.yaml", "--control", "grpo"
    )
    assert code == 0, err
    assert Path("reports/mine/index.html").is_file() and Path("reports/mine/summary.md").is_file()
    assert "big vs grpo" in out and "grpo vs big" not in out


@pytest.mark.parametrize(
    ("files", "args", "message"),
    [
        (
            {"t.csv": "arm,score\ngrpo,0.1\n"},
            ["t.csv", "--control", "grpo"],
            "t.csv: missing column value; a tidy table",
        ),
        (
            {"t.csv": "arm,seed,value\ngrpo,0,0.1\nnew,0,0.2\ngrpo,0,0.3\n"},
            ["t.csv", "--control", "grpo"],
            "t.csv line 4: duplicates line 2 (arm grpo, seed 0); one row per arm, seed",
        ),
        ({"t.csv": "arm,seed,value\ngrpo,0,nan\n"}, ["t.csv", "--control", "grpo"], "t.csv line 2: value"),
        (
            {"t.csv": "arm,seed,value\ngrpo,0,0.1\ngrpo,1,-1e308\nb,0,0.1\nb,1,0.2\n"},
            ["t.csv", "--control", "grpo"],
            "t.csv line 3: value -1e+308 is too large to compute with (with 4 rows, sums of squares and fourth",
        ),
        (
            {"t.csv": "arm,seed,value\ngrpo,0,1e200\ngrpo,1,-1e200\nb,0,3e200\nb,1,1e199\n"},
            ["t.csv", "--control", "grpo"],
            "t.csv line 4: value 3e+200 is too large to compute with",
        ),
        ({"t.csv": "arm,seed,value\ngrpo,0,0.1\n"}, ["t.csv", "--control", "base"], "the control 'base' has no rows"),
        ({"t.csv": "arm,seed,value\n"}, ["t.csv"], "no control arm: give --control ARM"),
        ({}, ["absent.csv", "--control", "a"], "absent.csv: no such file"),
        ({"j.yaml": "control: a\nmetrc: x\n"}, ["t.csv", "--config", "j.yaml"], "--config j.yaml: metrc"),
        ({"j.yaml": "control: [a\n"}, ["t.csv", "--config", "j.yaml"], "--config j.yaml: not valid YAML"),
        ({"j.yaml": "- a\n"}, ["t.csv", "--config", "j.yaml"], "--config j.yaml: must be a mapping"),
        ({}, ["--control", "a"], "give either a FILE (a table or a tool's logs) or --mlflow-experiment NAME"),
        ({}, ["t.csv", "--mlflow-experiment", "x", "--control", "a"], "give either a FILE"),
        ({}, ["--mlflow-experiment", "x", "--control", "a"], "--mlflow-experiment needs --tracking-uri"),
        ({}, ["t.csv", "--control", "a", "--direction", "up"], "direction"),
        ({"t.csv": "arm,value\na,1\n"}, ["t.csv", "--control", "a", "--from", "excel"], "--from 'excel': give one of"),
        ({"t.csv": "arm,value\na,1\n"}, ["t.csv", "--control", "a", "--pass-k", "0"], "each k must be >= 1"),
        ({"t.csv": "arm,value\na,1\n"}, ["t.csv", "--control", "a", "--pass-k", "x"], "give whole numbers"),
        ({"t.csv": "arm,value\na,1\n"}, ["t.csv", "--control", "a", "--column", "arm"], "give TIDY=YOURS"),
        ({"t.csv": "arm,value\na,1\n"}, ["t.csv", "--control", "a", "--runs", "x"], "--score and --runs read"),
        ({"t.txt": "x"}, ["t.txt", "--control", "a"], "t.txt: not a tidy table"),
        ({}, ["absent", "--control", "a"], "absent: no such file or folder"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(monkeypatch, capsys, files, args, message):
    monkeypatch.delenv("HARNESS_TRACKING_URI", raising=False)
    for name, text in files.items():
        Path(name).write_text(text)
    code, out, err = run_main(monkeypatch, capsys, "decide", *args)
    assert code == 2, (out, err)
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert not Path("reports").exists()


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_values_at_the_size_limit_are_decided_with_finite_numbers(monkeypatch, capsys):
    """The largest values the check lets through (float max ** (1/4) / (2 x rows)) keep every sum
    of squares and fourth power finite: the comparison is tested, not "untested: zero variance"
    after an overflow (nor any overflow warning on the way)."""
    limit = float(np.finfo(float).max ** 0.25 / (2 * 6))
    values = {"grpo": [limit, -limit, 0.5 * limit], "big": [-limit, limit, -0.5 * limit]}
    rows = [{"arm": arm, "seed": seed, "value": repr(x)} for arm, xs in values.items() for seed, x in enumerate(xs)]
    pd.DataFrame(rows).to_csv("t.csv", index=False)
    differences = np.subtract(values["big"], values["grpo"])
    assert np.isfinite(np.sum(differences**4)) and np.isfinite(np.sum(np.square(values["grpo"] + values["big"]) ** 2))
    code, out, err = run_main(monkeypatch, capsys, "decide", "t.csv", "--control", "grpo", "--out", "judged")
    assert code == 0, err
    said = re.search(r"^big vs grpo: (.+) \(difference (.+)\)$", out, re.M)
    assert said, out
    assert "untested" not in said[1] and np.isfinite(float(said[2])), out


def test_tidy_refuses_an_unknown_suffix(monkeypatch, capsys):
    stored_study(1)
    code, _, err = run_main(monkeypatch, capsys, "tidy", "scored", "--out", "t.json")
    assert code == 2 and "give a .csv or .parquet file" in err


@pytest.mark.slow
def test_decide_on_a_testbed_study_s_records_gives_its_verdicts(monkeypatch, capsys):
    """A real (tiny) testbed study, run end to end: its tidy table judged = its own report."""
    Path("studies").mkdir()
    Path("studies/tiny.yaml").write_text(
        textwrap.dedent("""\
            name: tiny
            control: grpo
            seeds: 2
            min_effect: 0.05
            task: {name: addition, max_digits: 2, n_train: 300, n_eval: 24}
            model: {name: tiny, tiny: {hidden_size: 32, layers: 1, heads: 2, intermediate_size: 64}}
            warmstart: {steps: 20, batch_size: 16, lr: 0.003}
            train: {steps: 2, prompts_per_step: 4, max_new_tokens: 4, eval_every: 0, eval_samples: 2}
            checks: {seeds: false}
            arms:
              - {name: grpo, algorithm: grpo}
              - {name: rloo, algorithm: rloo}
            """)
    )
    code, _, err = run_main(monkeypatch, capsys, "run", "studies/tiny.yaml", "--workers", "1", "--no-tracking")
    assert code == 0, err
    assert run_main(monkeypatch, capsys, "report", "tiny", "--out", "a")[0] == 0
    assert run_main(monkeypatch, capsys, "tidy", "tiny", "--out", "tiny.csv")[0] == 0
    code, _, err = run_main(
        monkeypatch, capsys, "decide", "tiny.csv", "--control", "grpo", "--min-effect", "0.05", "--out", "b"
    )
    assert code == 0, err
    study, judged = tables(Path("a/summary.md")), tables(Path("b/summary.md"))
    assert judged["Verdicts in full"] == study["Verdicts in full"]


@pytest.mark.slow
def test_decide_and_tidy_import_no_torch_and_no_mlflow():
    """Like the commands of ``test_startup``: judging a file trains nothing and talks to no MLflow."""
    stored_study(2)
    script = textwrap.dedent("""\
        import json, sys
        from typer.testing import CliRunner
        from harness.cli import app
        for args in (["tidy", "scored", "--out", "t.csv"], ["decide", "t.csv", "--control", "grpo", "--out", "r"]):
            result = CliRunner().invoke(app, args)
            assert result.exit_code == 0, result.output
        print(json.dumps([m for m in ("torch", "transformers", "peft", "mlflow") if m in sys.modules]))
        """)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []
