"""lighteval details: the fixture logs lighteval 0.13.0 wrote (tests/fixtures/eval_logs/lighteval), read into rows.

The rows are checked against the answers in the details themselves, scored here by a parse of our own
(the task's rule: the answer's last number equals the gold), against lighteval's own aggregates in the
results files, and by hand for named questions. Bad input is made from copies of the real files."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.errors import ConfigError
from harness.evallogs import lighteval

EVAL_LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "eval_logs"
LOGS = EVAL_LOGS / "lighteval" / "logs"
GREEDY, SAMPLED = LOGS / "greedy", LOGS / "sampled"
QUESTIONS = EVAL_LOGS / "questions.jsonl"
RUNS = {"smollm2", "smollm2_noised"}


def _details(folder: Path, model: str) -> Path:
    return next((folder / "details" / model).glob("*/details_*.parquet"))


def _results(folder: Path, model: str) -> dict:
    return json.loads(next((folder / "results" / model).glob("results_*.json")).read_text())


def _own_correct(text: str, gold: str) -> int:
    """The task's rule, parsed here: the answer's last integer is the gold."""
    numbers = re.findall(r"-?\d+", text)
    return int(bool(numbers) and numbers[-1] == gold)


def _own_counts(file: Path) -> dict[str, tuple[int, int]]:
    """doc.id -> (correct answers, answers), from the details' raw answers and golds."""
    counts = {}
    for doc, response in zip(*pd.read_parquet(file, columns=["doc", "model_response"]).T.values):
        gold = doc["choices"][doc["gold_index"]]
        texts = list(response["text"])
        counts[doc["id"]] = (sum(_own_correct(text, gold) for text in texts), len(texts))
    return counts


@pytest.fixture(scope="module")
def greedy():
    return lighteval.read(GREEDY, None)


@pytest.fixture(scope="module")
def sampled():
    return lighteval.read(SAMPLED, None)


def _values(rows, run: str) -> dict[str, float]:
    frame = rows.frame[rows.frame["run"] == run]
    return dict(zip(frame["prompt_id"], frame["value"]))


def test_greedy_rows_are_each_question_scored_once_per_model(greedy):
    frame = greedy.frame
    assert greedy.score == "em_number" and greedy.tool.startswith("lighteval")
    assert set(frame["run"]) == RUNS and set(frame["benchmark"]) == {"addition_0"}
    assert (frame.groupby("run")["prompt_id"].apply(sorted) == [[str(i) for i in range(10)]] * 2).all()
    assert set(frame["sample"]) == {0}
    for run in RUNS:
        counts = _own_counts(_details(GREEDY, run))
        assert _values(greedy, run) == {pid: float(correct) for pid, (correct, n) in counts.items()}
        assert {n for _, n in counts.values()} == {1}
        own_mean = frame[frame["run"] == run]["value"].mean()
        assert own_mean == pytest.approx(_results(GREEDY, run)["results"]["addition|0"]["em_number"])


def test_greedy_by_hand(greedy):
    # smollm2 answered q0 "6 + 1 = 7" (right) and q5 "7 + 6 = 12 ..." (13 is right)
    values = _values(greedy, "smollm2")
    assert (values["0"], values["5"]) == (1.0, 0.0)


def test_sampled_rows_are_lightevals_per_question_pass_at_k(sampled):
    assert sampled.score == "pass@k:k=1&n=4"
    assert set(sampled.frame["benchmark"]) == {"addition_sampled_0"}
    pass4 = lighteval.read(SAMPLED, "pass@k:k=4&n=4")
    for run in RUNS:
        counts = _own_counts(_details(SAMPLED, run))
        assert {n for _, n in counts.values()} == {4}  # four sampled answers per question, in one row
        assert _values(sampled, run) == {pid: correct / 4 for pid, (correct, _) in counts.items()}
        assert _values(pass4, run) == {pid: float(correct > 0) for pid, (correct, _) in counts.items()}
        aggregate = _results(SAMPLED, run)["results"]["addition_sampled|0"]
        assert pass4.frame[pass4.frame["run"] == run]["value"].mean() == pytest.approx(aggregate["pass@k:k=4&n=4"])


def test_sampled_by_hand(sampled):
    # smollm2 on q9: '"8 + 4 = 12"', 'To find 8 + 4 using only the number.', '8 + 4 = 12', '8 + 4 is 12.'
    assert _values(sampled, "smollm2")["9"] == 0.75
    # smollm2_noised on q6: '9 + 5 = 13', '7', '9 + 5 = 12.', '... "9 + 5 = 1': none is 14
    assert _values(sampled, "smollm2_noised")["6"] == 0.0


def test_prompt_ids_are_the_questions_index_in_every_run():
    """doc.id is the question's index in the dataset, whatever the (shuffled) order of the rows."""
    order = [json.loads(line)["id"] for line in QUESTIONS.read_text().splitlines()]
    for file in LOGS.rglob("details_*.parquet"):
        docs = pd.read_parquet(file, columns=["doc"])["doc"]
        assert {doc["id"]: doc["specific"]["question_id"] for doc in docs} == {str(i): q for i, q in enumerate(order)}


def test_the_whole_output_folder_names_each_tasks_first_metric():
    rows = lighteval.read(LOGS, None)
    assert rows.score == "addition_0: em_number; addition_sampled_0: pass@k:k=1&n=4"
    assert rows.frame.groupby(["run", "benchmark"]).size().to_dict() == {
        (run, bench): 10 for run in RUNS for bench in ("addition_0", "addition_sampled_0")
    }


def test_one_details_file_takes_its_model_from_the_results_file(tmp_path):
    rows = lighteval.read(_details(GREEDY, "smollm2_noised"), None)
    assert set(rows.frame["run"]) == {"smollm2_noised"} and len(rows.frame) == 10
    out = _copy(tmp_path)
    shutil.rmtree(out / "results")
    assert set(lighteval.read(out, None).frame["run"]) == RUNS  # the path's <model> without results files


def test_looks_like():
    assert lighteval.looks_like(LOGS) and lighteval.looks_like(GREEDY)
    assert lighteval.looks_like(_details(SAMPLED, "smollm2"))
    assert not lighteval.looks_like(next((GREEDY / "results").rglob("*.json")))
    assert not lighteval.looks_like(QUESTIONS)
    for other in EVAL_LOGS.glob("*/logs"):  # the other tools' fixture logs
        if other.parent.name != "lighteval":
            assert not lighteval.looks_like(other)


def test_looks_like_is_false_on_tables(tmp_path):
    (tmp_path / "results.csv").write_text("arm,seed,value\na,0,1\n")
    (tmp_path / "rows.jsonl").write_text('{"arm": "a", "seed": 0, "value": 1}\n')
    assert not lighteval.looks_like(tmp_path / "results.csv")
    assert not lighteval.looks_like(tmp_path / "rows.jsonl")
    assert not lighteval.looks_like(tmp_path)
    assert not lighteval.looks_like(tmp_path / "missing.parquet")


def _copy(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(GREEDY, out)
    return out


def test_a_cut_short_details_file_is_named(tmp_path):
    file = _details(_copy(tmp_path), "smollm2")
    file.write_bytes(file.read_bytes()[:5000])
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(file))}: not a readable parquet file .*cut short"):
        lighteval.read(file, None)


def _with_metric(file: Path, values: list) -> None:
    """Rewrites a details file with ``em_number`` = ``values`` (one per row; None: the row has no metric)."""
    table = pq.read_table(file)
    metric = pa.array([None if value is None else {"em_number": value} for value in values])
    pq.write_table(table.set_column(table.schema.get_field_index("metric"), "metric", metric), file)


@pytest.mark.parametrize(
    ("bad", "message"),
    [(float("nan"), "metric 'em_number' is nan, not a finite number"), (None, "metric 'em_number' has no value")],
)
def test_a_score_that_is_no_number_is_named_with_its_row(tmp_path, bad, message):
    file = _details(_copy(tmp_path), "smollm2")
    _with_metric(file, [1.0, bad] + [1.0] * (pq.read_metadata(file).num_rows - 2))
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(file))}:2: {message}"):
        lighteval.read(file, None)


def test_a_corpus_level_metrics_inputs_are_no_score(tmp_path):
    file = _details(_copy(tmp_path), "smollm2")
    _with_metric(file, [{"golds": [1], "preds": [0]}] * pq.read_metadata(file).num_rows)
    with pytest.raises(ConfigError, match=r":1: metric 'em_number' is \{.*not one number per question .*corpus-level"):
        lighteval.read(file, None)


def test_an_older_lightevals_details_are_refused_as_such(tmp_path):
    stamp = "2024-05-01T10-00-00.000000"
    file = tmp_path / "details" / "model" / stamp / f"details_custom|addition|0_{stamp}.parquet"
    file.parent.mkdir(parents=True)
    old = {"example": ["q"], "full_prompt": ["q"], "predictions": [["7"]], "gold": [["7"]], "metrics": [{"em": 1}]}
    pd.DataFrame(old).to_parquet(file)
    assert lighteval.looks_like(tmp_path)
    with pytest.raises(ConfigError, match="lighteval 0.10 or earlier .* not supported: .* lighteval 0.11 and later"):
        lighteval.read(tmp_path, None)


def test_an_unknown_score_lists_the_metrics_there_are():
    with pytest.raises(ConfigError, match=r"no metric 'acc' .*its metrics: 'pass@k:k=1&n=4', 'pass@k:k=4&n=4'"):
        lighteval.read(SAMPLED, "acc")
    with pytest.raises(ConfigError, match=r"no metric 'em_number' for task 'addition_sampled\|0'"):
        lighteval.read(LOGS, "em_number")  # the sampled task has no em_number


def test_a_run_read_twice_is_refused(tmp_path):
    out = _copy(tmp_path)
    file = _details(out, "smollm2")
    stamp, again = file.parent.name, "2026-01-01T00-00-00.000000"
    (out / "details" / "smollm2" / again).mkdir()
    shutil.copy(file, out / "details" / "smollm2" / again / file.name.replace(stamp, again))
    with pytest.raises(ConfigError, match=r"repeats .*question '\d' of task 'addition_0' for model 'smollm2' twice"):
        lighteval.read(out, None)


def test_a_results_file_of_another_model_is_refused(tmp_path):
    out = _copy(tmp_path)
    results = next((out / "results" / "smollm2").glob("*.json"))
    record = json.loads(results.read_text())
    record["config_general"]["model_name"] = "other"
    results.write_text(json.dumps(record))
    with pytest.raises(ConfigError, match=r"model_name is 'other', not the model 'smollm2' its path names"):
        lighteval.read(out, None)


def test_a_details_file_out_of_its_folders_is_refused(tmp_path):
    moved = tmp_path / _details(GREEDY, "smollm2").name
    shutil.copy(_details(GREEDY, "smollm2"), moved)
    with pytest.raises(ConfigError, match="not in its run's folder"):
        lighteval.read(moved, None)


def test_a_folder_without_details_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="no lighteval details here"):
        lighteval.read(tmp_path, None)
