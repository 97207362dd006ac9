"""Inspect AI logs: the fixture logs inspect-ai 0.3.285 wrote (tests/fixtures/eval_logs/inspect), read into rows.

The rows are checked against the logs' raw JSON read here by plain ``json`` / ``zipfile`` (not
inspect-ai's reader), against Inspect's own accuracy metric in each log, and by hand for two
questions. Bad input is made from a copy of a real log, edited as raw JSON."""

from __future__ import annotations

import json
import re
import sys
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai.log", reason="inspect-ai is not installed (pip install harness[inspect])")

from harness.errors import ConfigError
from harness.evallogs import inspect_logs

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "eval_logs" / "inspect" / "logs"
GREEDY, SAMPLED = LOGS / "greedy", LOGS / "sampled"
GREEDY_EVAL = next(GREEDY.glob("*.eval"))  # hf/smollm2, greedy
GREEDY_JSON = next(GREEDY.glob("*.json"))  # hf/smollm2_noised, greedy
QUESTIONS = LOGS.parents[1] / "questions.jsonl"


@pytest.fixture(scope="module")
def greedy():
    return inspect_logs.read(GREEDY, None)


@pytest.fixture(scope="module")
def sampled():
    return inspect_logs.read(SAMPLED, None)


def _raw_log(path: Path) -> tuple[dict, list[dict]]:
    """A log's header and samples as plain JSON, without inspect-ai."""
    if path.suffix == ".json":
        log = json.loads(path.read_text())
        return log, log["samples"]
    with zipfile.ZipFile(path) as archive:
        header = json.loads(archive.read("header.json"))
        names = [name for name in archive.namelist() if name.startswith("samples/")]
        return header, [json.loads(archive.read(name)) for name in names]


def _raw_rows(folder: Path) -> dict[tuple[str, str, int], float]:
    """(model, question id, epoch - 1) -> 1.0 where the raw score is Inspect's "C", 0.0 where "I"."""
    rows = {}
    for path in folder.iterdir():
        header, samples = _raw_log(path)
        for sample in samples:
            mark = sample["scores"]["match"]["value"]
            assert mark in ("C", "I")
            rows[header["eval"]["model"], sample["id"], sample["epoch"] - 1] = 1.0 if mark == "C" else 0.0
    return rows


def _reader_rows(rows) -> dict[tuple[str, str, int], float]:
    frame = rows.frame
    return dict(zip(zip(frame["run"], frame["prompt_id"], frame["sample"]), frame["value"]))


@pytest.mark.parametrize("folder", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
def test_rows_are_the_raw_scores_of_every_sample(folder, greedy, sampled):
    rows = greedy if folder == GREEDY else sampled
    assert _reader_rows(rows) == _raw_rows(folder)
    assert len(rows.frame) == len(_raw_rows(folder))  # no row twice
    assert list(rows.frame.columns) == ["run", "benchmark", "prompt_id", "sample", "value", "where"]
    assert rows.tool == "inspect-ai 0.3.285"
    assert rows.score == "match"


def test_greedy_reads_the_eval_and_the_json_log(greedy):
    by_run = greedy.frame.groupby("run")
    assert sorted(by_run.groups) == ["hf/smollm2", "hf/smollm2_noised"]
    files = {run: {where.split(" sample ")[0] for where in group["where"]} for run, group in by_run}
    assert files == {"hf/smollm2": {str(GREEDY_EVAL)}, "hf/smollm2_noised": {str(GREEDY_JSON)}}
    assert set(greedy.frame["benchmark"]) == {"addition"}
    assert set(greedy.frame["sample"]) == {0}
    ids = [json.loads(line)["id"] for line in QUESTIONS.read_text().splitlines()]
    for _run, group in by_run:
        assert sorted(group["prompt_id"]) == sorted(ids)


def test_two_questions_by_hand(greedy):
    """q0 asks 6 + 1; hf/smollm2 answered "The answer is 6." (wrong); q1 asks 1 + 5, answered "1 + 5 = 6"."""
    values = _reader_rows(greedy)
    assert values["hf/smollm2", "q0", 0] == 0.0
    assert values["hf/smollm2", "q1", 0] == 1.0


@pytest.mark.parametrize("folder", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
def test_each_runs_mean_is_inspects_own_accuracy(folder, greedy, sampled):
    """Inspect's accuracy (the mean over questions of each question's mean over epochs) equals the mean of
    the rows here: every question has the same number of epochs."""
    means = (greedy if folder == GREEDY else sampled).frame.groupby("run")["value"].mean()
    for path in folder.iterdir():
        header, _samples = _raw_log(path)
        accuracy = header["results"]["scores"][0]["metrics"]["accuracy"]["value"]
        assert means[header["eval"]["model"]] == pytest.approx(accuracy)
    # worked from the logs: 5 and 6 of 10 right greedily; 9 and 7 of 40 sampled
    expected = {GREEDY: (0.5, 0.6), SAMPLED: (9 / 40, 7 / 40)}[folder]
    assert tuple(means[["hf/smollm2", "hf/smollm2_noised"]]) == pytest.approx(expected)


def test_epochs_are_the_samples(sampled):
    counts = sampled.frame.groupby(["run", "prompt_id"])["sample"].apply(sorted)
    assert len(counts) == 2 * 10
    assert all(samples == [0, 1, 2, 3] for samples in counts)


def test_looks_like_the_logs_and_not_other_files(tmp_path):
    assert inspect_logs.looks_like(GREEDY_EVAL)
    assert inspect_logs.looks_like(GREEDY_JSON)
    assert inspect_logs.looks_like(LOGS)
    (tmp_path / "results.csv").write_text("arm,seed,value\na,0,1\n")
    (tmp_path / "rows.jsonl").write_text('{"arm": "a", "seed": 0, "value": 1}\n')
    (tmp_path / "results.json").write_text('{"results": {"addition": {"acc": 0.5}}, "version": 2}')
    (tmp_path / "empty").mkdir()
    for path in ("results.csv", "rows.jsonl", "results.json", "empty", "missing.eval"):
        assert not inspect_logs.looks_like(tmp_path / path), path
    assert not inspect_logs.looks_like(QUESTIONS)
    assert not inspect_logs.looks_like(tmp_path)


def _edited_json(tmp_path: Path, edit, name: str = "log.json") -> Path:
    """A copy of the greedy .json log, edited as raw JSON by ``edit(log)``."""
    log = json.loads(GREEDY_JSON.read_text())
    edit(log)
    path = tmp_path / name
    path.write_text(json.dumps(log, indent=2))
    return path


def _with_q0_value(tmp_path: Path, value) -> Path:
    """The greedy .json log with sample q0's score value set to ``value``."""

    def set_q0(log):
        next(s for s in log["samples"] if s["id"] == "q0")["scores"]["match"]["value"] = value

    return _edited_json(tmp_path, set_q0)


def _refusal(path: Path, score: str | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        inspect_logs.read(path, score)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_cut_json_log_is_refused_naming_file_and_line(tmp_path):
    text = GREEDY_JSON.read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) // 2])
    line = text[: len(text) // 2].count("\n") + 1  # where the text stops
    message = _refusal(cut)
    assert message.startswith(f"{cut}:{line}: inspect-ai could not read this Inspect log")


def test_a_cut_eval_log_is_refused_naming_the_file(tmp_path):
    cut = tmp_path / "cut.eval"
    cut.write_bytes(GREEDY_EVAL.read_bytes()[:5000])
    assert inspect_logs.looks_like(cut)
    assert _refusal(cut).startswith(f"{cut}: inspect-ai could not read this Inspect log")


@pytest.mark.parametrize("version", [1, 3])
def test_an_unsupported_json_log_version_is_named(tmp_path, version):
    path = _edited_json(tmp_path, lambda log: log.update(version=version))
    message = _refusal(path)
    assert f"{path}: Inspect log format version {version} is not supported" in message
    assert "reads version 2" in message


def test_an_unsupported_eval_log_version_is_named(tmp_path):
    path = tmp_path / "v3.eval"
    with zipfile.ZipFile(GREEDY_EVAL) as source, zipfile.ZipFile(path, "w") as target:
        for name in source.namelist():
            data = source.read(name)
            if name == "header.json":
                data = json.dumps({**json.loads(data), "version": 3}).encode()
            target.writestr(name, data)
    assert f"{path}: Inspect log format version 3 is not supported" in _refusal(path)


@pytest.mark.parametrize(
    ("status", "what"),
    [("error", "ended in an error (RuntimeError: boom)"), ("cancelled", "was cancelled"), ("started", "is unfinished")],
)
def test_a_log_that_did_not_finish_is_refused(tmp_path, status, what):
    def stop(log):
        log["status"] = status
        if status == "error":  # where inspect-ai writes it: after stats, before the samples
            keys = list(log)
            tail = {key: log.pop(key) for key in keys[keys.index("stats") + 1 :]}
            log["error"] = {"message": "RuntimeError: boom", "traceback": "", "traceback_ansi": ""}
            log.update(tail)

    path = _edited_json(tmp_path, stop)
    message = _refusal(path)
    assert message.startswith(f"{path}: this Inspect eval {what}")
    assert "inspect eval-retry" in message


def test_a_sample_with_an_error_is_refused_naming_file_and_sample(tmp_path):
    def fail_q3(log):
        sample = next(s for s in log["samples"] if s["id"] == "q3")
        sample["error"] = {"message": "ValueError: scorer failed", "traceback": "", "traceback_ansi": ""}
        del sample["scores"]

    path = _edited_json(tmp_path, fail_q3)
    message = _refusal(path)
    assert message.startswith(f"{path} sample q3 epoch 1: the sample ended in an error (ValueError: scorer failed)")


def test_an_unknown_score_lists_the_scores_there():
    message = _refusal(GREEDY_EVAL, "accuracy")
    assert "no score 'accuracy' (its scores: 'match'); name one with --score" in message


def test_logs_whose_first_scorers_differ_ask_for_a_score(tmp_path):
    (tmp_path / GREEDY_EVAL.name).write_bytes(GREEDY_EVAL.read_bytes())
    _edited_json(tmp_path, lambda log: log["results"]["scores"][0].update(scorer="includes"))
    message = _refusal(tmp_path)
    assert message.startswith("the Inspect logs' first scorers differ")
    assert "name the one to read with --score" in message
    assert len(inspect_logs.read(tmp_path, "match").frame) == 20  # named, both are read


@pytest.mark.parametrize(
    ("value", "expected"),
    [("P", 0.5), ("N", 0.0), ("yes", 1.0), ("FALSE", 0.0), (True, 1.0), (0.25, 0.25), ("0.75", 0.75)],
)
def test_values_map_as_inspects_value_to_float(tmp_path, value, expected):
    """Inspect's default marks: C 1, P 0.5, I and N 0; yes/true 1, no/false 0; numbers as they are."""

    rows = inspect_logs.read(_with_q0_value(tmp_path, value), None)
    assert _reader_rows(rows)["hf/smollm2_noised", "q0", 0] == expected


@pytest.mark.parametrize(("value", "shown"), [("maybe", "'maybe'"), ({"a": 1}, "{'a': 1}"), ([1, 0], "[1, 0]")])
def test_a_value_inspect_maps_to_no_number_is_refused(tmp_path, value, shown):
    path = _with_q0_value(tmp_path, value)
    message = _refusal(path)
    assert message.startswith(f"{path} sample q0 epoch 1: score 'match' is {shown}, not one value Inspect maps")


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_value_that_is_not_finite_is_refused(tmp_path, value):
    path = _with_q0_value(tmp_path, value)
    assert _refusal(path) == f"{path} sample q0 epoch 1: score 'match' is {value}, not a finite number"


def test_the_same_sample_in_two_logs_is_refused():
    message = _refusal(LOGS)
    assert re.search(r"sample q0 epoch 1 repeats .* both logs hold model 'hf/smollm2' on task 'addition'", message)


def test_a_path_without_inspect_logs_is_refused(tmp_path):
    (tmp_path / "results.json").write_text('{"results": {}}')
    assert _refusal(tmp_path).startswith(f"{tmp_path}: no Inspect log here")
    assert _refusal(QUESTIONS).startswith(f"{QUESTIONS}: no Inspect log here")


def test_without_inspect_ai_the_reader_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)  # import inspect_ai.log raises ImportError
    assert _refusal(GREEDY_EVAL) == "install harness[inspect] (inspect-ai) to read Inspect logs"
