"""An MLflow experiment's finished runs as tidy rows: several runs per arm as seeds (from a tag or
param, or numbered by start time), per-prompt tables logged with ``mlflow.log_table``, and one line
naming the run (and the artifact) for every kind of bad input. One sqlite store serves the module."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_main import run_main
from scipy import stats

from harness.decide.analysis import analyze
from harness.decide.rules import ReadOptions
from harness.errors import ConfigError
from harness.tracking.mlflow_results import load_mlflow, read_mlflow, results_of
from harness.tracking.tidy_results import JudgeSettings

SETTINGS = JudgeSettings(control="base", min_effect=0.05)
#: (arm, seed, value) of the "seeds" experiment: every seed of new about 0.2 above base's
SEEDED = [("base", 0, 0.40), ("base", 1, 0.43), ("base", 2, 0.41), ("new", 0, 0.61), ("new", 1, 0.62), ("new", 2, 0.60)]
#: (arm, start time, value) of the "numbered" experiment, logged in this (not start-time) order
NUMBERED = [("new", 3000, 0.62), ("base", 2000, 0.41), ("base", 1000, 0.40), ("new", 1500, 0.61), ("base", 5000, 0.43)]
NUMBERED += [("new", 4000, 0.60)]
PROMPTS = 12


def _prompt_scores() -> tuple[np.ndarray, np.ndarray]:
    """Per-prompt scores (not 0/1) of base and new, new about 0.1 higher with noise."""
    rng = np.random.default_rng(3)
    base = rng.uniform(0.2, 0.7, PROMPTS).round(3)
    return base, (base + 0.1 + rng.normal(0, 0.05, PROMPTS)).round(3)


class Store:
    """The module's sqlite store: its URI, and the run ids of the runs the failure tests name."""

    def __init__(self, folder: Path, template: Path):
        from mlflow import MlflowClient

        shutil.copy(template, folder / "mlflow.db")
        self.uri = f"sqlite:///{folder / 'mlflow.db'}"
        self.artifacts = folder / "artifacts"
        self.client = MlflowClient(tracking_uri=self.uri)
        self.ids: dict[str, str] = {}

    def experiment(self, name: str) -> str:
        return self.client.create_experiment(name, artifact_location=(self.artifacts / name).as_uri())

    def run(self, exp: str, *, tags=None, params=None, metrics=None, start=None, finish=True) -> str:
        from mlflow.entities import Metric, Param

        run_id = self.client.create_run(exp, tags=tags or {}, start_time=start).info.run_id
        if params or metrics:
            self.client.log_batch(
                run_id,
                metrics=[Metric(k, v, 0, 0) for k, v in (metrics or {}).items()],
                params=[Param(k, v) for k, v in (params or {}).items()],
            )
        if finish:
            self.client.set_terminated(run_id)
        return run_id


@pytest.fixture(scope="module")
def store(tmp_path_factory, mlflow_template) -> Store:
    s = Store(tmp_path_factory.mktemp("mlflow-results"), mlflow_template)
    exp = s.experiment("seeds")
    s.run(exp, tags={"harness.role": "study"})  # a study's parent run: skipped
    s.run(exp, tags={"arm": "new", "seed": "5", "phase": "tune"}, metrics={"eval/accuracy": 0.0})  # tuning: skipped
    for arm, seed, value in SEEDED:
        s.run(exp, tags={"arm": arm}, params={"seed": str(seed)}, metrics={"final/eval/accuracy": value})
    s.run(exp, tags={"arm": "new", "seed": "9"}, metrics={"eval/accuracy": 0.0}, finish=False)  # running: not read

    exp = s.experiment("numbered")
    for arm, start, value in NUMBERED:
        s.ids[f"{arm}@{start}"] = s.run(exp, tags={"variant": arm}, metrics={"eval/accuracy": value}, start=start)

    exp = s.experiment("tables")
    base, new = _prompt_scores()
    order = np.random.default_rng(1).permutation(PROMPTS)  # new's rows in another order: paired by prompt_id
    for arm, scores, rows in (("base", base, np.arange(PROMPTS)), ("new", new, order)):
        run_id = s.run(exp, tags={"arm": arm}, params={"seed": "7"}, finish=False)
        ids = [f"q{i}" for i in rows]
        # two calls: log_table appends to a table the run already logged
        s.client.log_table(run_id, {"prompt_id": ids[:5], "value": scores[rows[:5]].tolist()}, "scores.json")
        s.client.log_table(run_id, pd.DataFrame({"prompt_id": ids[5:], "value": scores[rows[5:]]}), "scores.json")
        s.client.set_terminated(run_id)
        s.ids[arm] = run_id

    exp = s.experiment("sampled")
    for arm in ("base", "new"):
        run_id = s.run(exp, tags={"arm": arm, "seed": "0"}, finish=False)
        frame = pd.DataFrame(
            {"benchmark": "gsm8k", "prompt_id": [1, 1, 2, 2], "sample": [0, 1, 0, 1], "value": [1, 0, 1, 1]}
        )
        s.client.log_table(run_id, frame.assign(output="text"), "samples.parquet")
        s.client.set_terminated(run_id)

    exp = s.experiment("broken")
    run_id = s.run(exp, tags={"arm": "base", "seed": "0"}, finish=False)
    s.ids["broken"] = run_id
    s.client.log_dict(run_id, [{"prompt_id": "q1", "value": 1.0}], "records.json")  # a list of records
    s.client.log_text(run_id, '{"columns": ["prompt_id", "value"], "data": [["q1", 1.0], ["q2", NaN]]}', "nan.json")
    s.client.log_table(run_id, {"prompt_id": ["q1", "q2"], "value": [1.0, None]}, "null.json")
    s.client.log_table(run_id, {"prompt_id": ["q1", "q2"], "score": [1.0, 0.0]}, "nocolumn.json")
    s.client.log_table(run_id, {"prompt_id": ["q1", "q1"], "value": [1.0, 0.0]}, "twice.json")
    s.client.log_text(run_id, '{"columns": ["prompt_id", "value"], "data": [["q1", 1.0], ["q2"]]}', "ragged.json")
    s.client.log_text(run_id, "prompt_id,value\nq1,1\n", "text.json")
    s.client.set_terminated(run_id)

    exp = s.experiment("columns-differ")
    plain = {"prompt_id": ["q1"], "value": [1.0]}
    for start, arm, table in ((1, "base", plain), (2, "new", {"benchmark": ["b"], **plain})):
        run_id = s.run(exp, tags={"arm": arm, "seed": "0"}, start=start, finish=False)
        s.client.log_table(run_id, table, "scores.json")
        s.client.set_terminated(run_id)
        s.ids[f"differ-{arm}"] = run_id

    s.ids["no-arm"] = s.run(s.experiment("no-arm"), tags={"seed": "3"}, metrics={"eval/accuracy": 0.5})
    exp = s.experiment("some-seeds")
    s.ids["seeded"] = s.run(exp, tags={"arm": "a", "seed": "0"}, metrics={"eval/accuracy": 0.5}, start=1)
    s.ids["unseeded"] = s.run(exp, tags={"arm": "a"}, metrics={"eval/accuracy": 0.5}, start=2)
    exp = s.experiment("clash")
    s.ids["clash"] = s.run(exp, tags={"arm": "a", "seed": "1"}, params={"seed": "2"}, metrics={"eval/accuracy": 0.5})
    s.run(s.experiment("unfinished"), tags={"arm": "a", "seed": "0"}, finish=False)
    return s


def _verdict(results, condition: str = "new") -> pd.Series:
    verdicts = analyze(results, ReadOptions()).verdicts
    return verdicts.set_index("condition").loc[condition]


# ----------------------------------------------------------------------------- seeds


def test_several_runs_per_arm_are_seeds_and_decide(store):
    read = read_mlflow("seeds", store.uri, "eval/accuracy")
    assert list(read.rows.columns) == ["arm", "seed", "value", "run"]
    assert sorted(zip(read.rows["arm"], read.rows["seed"].astype(int), read.rows["value"])) == sorted(SEEDED)
    assert not read.seeds_numbered and "seeds from the 'seed' tag or param" in read.source
    res = load_mlflow("seeds", store.uri, SETTINGS)
    assert res.meta.seed_matched and res.meta.source == read.source
    row = _verdict(res)
    assert row["verdict"] == "better" and row["paired"] and row["n"] == 3
    base = np.array([v for a, _, v in sorted(SEEDED) if a == "base"])
    new = np.array([v for a, _, v in sorted(SEEDED) if a == "new"])
    assert row["diff"] == pytest.approx(float(np.mean(new - base)))


def test_runs_without_a_seed_are_numbered_by_start_time_and_said_so(store):
    read = read_mlflow("numbered", store.uri, "eval/accuracy", arm_key="variant")
    assert read.seeds_numbered
    assert "no run has a 'seed' tag or param, so each arm's runs are numbered as seeds 0, 1, ..." in read.source
    assert "in start-time order" in read.source and "\n" not in read.source
    want = {}
    for arm in ("base", "new"):
        starts = sorted(start for a, start, _ in NUMBERED if a == arm)
        want.update({store.ids[f"{arm}@{start}"]: (arm, seed) for seed, start in enumerate(starts)})
    assert {r: (a, s) for r, a, s in zip(read.rows["run"], read.rows["arm"], read.rows["seed"])} == want
    res = load_mlflow("numbered", store.uri, SETTINGS, arm_key="variant")
    # numbered seeds are not the same training randomness in both arms: no pairing on them
    assert not res.meta.seed_matched
    assert res.trials["warnings"].str.startswith("seeds_numbered: ").all()
    analysis = analyze(res, ReadOptions())
    row = analysis.verdicts.set_index("condition").loc["new"]
    assert row["verdict"] == "better" and not row["paired"]
    assert any(line.startswith("WARNING seeds_numbered in completed trials") for line in analysis.header["state"])
    paired = load_mlflow("numbered", store.uri, SETTINGS.model_copy(update={"seed_matched": True}), arm_key="variant")
    assert paired.meta.seed_matched  # the user's word wins


# ----------------------------------------------------------------------------- per-prompt tables


def test_one_run_per_arm_with_per_prompt_tables_is_tested_as_by_hand(store):
    read = read_mlflow("tables", store.uri, "eval/accuracy", table="scores.json")
    assert list(read.rows.columns) == ["arm", "seed", "prompt_id", "value", "run"]
    assert len(read.rows) == 2 * PROMPTS and set(read.rows["seed"]) == {"7"}
    assert "values from per-prompt table scores.json" in read.source
    row = _verdict(load_mlflow("tables", store.uri, SETTINGS, table="scores.json"))
    assert row["verdict"] != "untested" and row["n"] == 1
    base, new = _prompt_scores()
    by_hand = stats.ttest_rel(new, base).confidence_interval(row["ci_level"])
    assert row["ci_level"] == pytest.approx(0.95)
    assert row["diff"] == pytest.approx(float(np.mean(new - base)))
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((by_hand.low, by_hand.high))
    assert row["verdict"] == "better (eval-only)" and by_hand.low > 0


def test_a_table_with_benchmark_and_samples_keeps_one_row_per_sample(store):
    """A .parquet table (log_table writes one for a .parquet name); other columns are ignored."""
    read = read_mlflow("sampled", store.uri, "eval/accuracy", table="samples.parquet")
    assert list(read.rows.columns) == ["arm", "seed", "benchmark", "prompt_id", "sample", "value", "run"]
    base = read.rows[read.rows["arm"] == "base"]
    assert base[["benchmark", "prompt_id", "sample", "value"]].values.tolist() == [
        ["gsm8k", "1", 0, 1.0],
        ["gsm8k", "1", 1, 0.0],
        ["gsm8k", "2", 0, 1.0],
        ["gsm8k", "2", 1, 1.0],
    ]
    # the per-sample rows are judged as one row per prompt: the mean and pass@2 of its two answers
    settings = JudgeSettings(control="base", metric="eval/pass@2")
    results = results_of(read, "sampled", settings)
    prompts = results.prompts[results.prompts["metric"] == "eval/pass@2"]
    assert prompts[prompts["arm"] == "base"]["value"].tolist() == [1.0, 1.0]  # 1 of 2 and 2 of 2 correct
    assert results.meta.input_notes == ["Read 2 samples per prompt (4 prompt rows, one per run and prompt)."]


# ----------------------------------------------------------------------------- bad input


def _one_line(experiment: str, store: Store, metric: str = "eval/accuracy", **kwargs) -> str:
    with pytest.raises(ConfigError) as err:
        read_mlflow(experiment, store.uri, metric, **kwargs)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"MLflow experiment {experiment!r} at sqlite:///")
    return text


@pytest.mark.parametrize(
    ("artifact", "problem"),
    [
        ("absent.json", "cannot download it (MlflowException"),
        ("records.json", 'not MLflow\'s table layout {"columns": [...], "data": [[...], ...]}'),
        ("nan.json", "data row 2: value nan is not a finite number"),
        ("null.json", "data row 2: value None is not a finite number"),
        ("nocolumn.json", "no column value; a per-prompt table has prompt_id, value"),
        ("twice.json", "data row 2 repeats prompt_id q1; one row per prompt_id (several samples per prompt: add"),
        ("ragged.json", "data row 2 has 1 cells for 2 columns"),
        ("text.json", "cannot read it as a table (JSONDecodeError"),
    ],
)
def test_a_bad_table_is_one_line_naming_the_run_and_the_artifact(store, artifact, problem):
    text = _one_line("broken", store, table=artifact)
    assert f"run {store.ids['broken']} (arm base, seed 0), artifact {artifact}: " in text
    assert problem in text


@pytest.mark.parametrize(
    ("experiment", "kwargs", "problem"),
    [
        ("absent", {}, "no such experiment"),
        ("unfinished", {}, "no finished runs"),
        ("no-arm", {}, "run {no-arm} has no 'arm' tag or param; tag every run with its arm (or name the key"),
        ("seeds", {"arm_key": "variant"}, "has no 'variant' tag or param"),
        ("some-seeds", {}, "run {unseeded} has no 'seed' tag or param but run {seeded} has; give every run its seed"),
        ("clash", {}, "run {clash} has tag seed='1' but param seed='2'; make them agree"),
        ("seeds", {"metric": "eval/reward"}, "(arm base, seed 0) logged no metric 'eval/reward'"),
        ("columns-differ", {"table": "scores.json"}, "run {differ-new} (arm new, seed 0), artifact scores.json: "),
    ],
)
def test_bad_runs_are_one_line_naming_the_run(store, experiment, kwargs, problem):
    text = _one_line(experiment, store, **kwargs)
    assert problem.format(**store.ids) in text
    if experiment == "columns-differ":
        assert f"but run {store.ids['differ-base']}'s table has prompt_id, value; every run's table" in text


# ----------------------------------------------------------------------------- the command


def test_decide_reads_seeds_and_tables_from_mlflow(monkeypatch, capsys, store):
    code, out, err = run_main(
        monkeypatch, capsys, "decide", "--mlflow-experiment", "numbered", "--tracking-uri", store.uri,
        "--arm-key", "variant", "--control", "base", "--min-effect", "0.05", "--out", "numbered",
    )  # fmt: skip
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("read MLflow experiment 'numbered' at sqlite:///") and "start-time order" in lines[0]
    assert "new vs base: better" in out
    assert "seeds_numbered" in Path("numbered/summary.md").read_text(encoding="utf-8")
    code, out, err = run_main(
        monkeypatch, capsys, "decide", "--mlflow-experiment", "tables", "--tracking-uri", store.uri,
        "--mlflow-table", "scores.json", "--seed-key", "seed", "--control", "base", "--out", "tables",
    )  # fmt: skip
    assert code == 0, err
    assert "values from per-prompt table scores.json" in out and "new vs base: better" in out
    code, out, err = run_main(
        monkeypatch, capsys, "decide", "--mlflow-experiment", "seeds", "--tracking-uri", store.uri,
        "--control", "base", "--out", "seeds",
    )  # fmt: skip
    assert code == 0, err
    assert "seeds from the 'seed' tag or param" in out.splitlines()[0] and "new vs base: better" in out
    rows = [line for line in Path("seeds/summary.md").read_text(encoding="utf-8").splitlines() if "| 3 pairs |" in line]
    assert rows and "| new | base | 3 pairs |" in rows[0] and "paired_t" in rows[0]
    code, out, err = run_main(monkeypatch, capsys, "decide", "t.csv", "--control", "a", "--mlflow-table", "s.json")
    assert code == 2 and err.strip().endswith(
        "--arm-key, --seed-key and --mlflow-table go with --mlflow-experiment NAME"
    )
    assert len(err.strip().splitlines()) == 1
