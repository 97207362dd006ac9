"""The lm-evaluation-harness reader on the logs lm-eval 0.4.13 wrote (tests/fixtures/eval_logs/lm_eval).

The expected scores are worked out another way: from each answer lm-eval logged (``resps``), the
last number compared with the question's answer, not from the ``exact_match`` lm-eval logged.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.evallogs import lm_eval

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "eval_logs"
LOGS = FIXTURES / "lm_eval" / "logs"
REPEATS = FIXTURES / "lm_eval" / "repeats"
BASE, NOISED = "/work/evalckpt/smollm2", "/work/evalckpt/smollm2_noised"
GREEDY = LOGS / "greedy" / "__work__evalckpt__smollm2"  # the base model's folders
SAMPLED = LOGS / "sampled" / "__work__evalckpt__smollm2"


def _answers_scored_by_hand() -> dict[tuple[str, str, int, str], float]:
    """(model, task, seed, doc_id) -> 1.0 where the answer's last number is the question's answer."""
    scored = {}
    for results in LOGS.rglob("results_*.json"):
        run = json.loads(results.read_text())
        time = results.name.removeprefix("results_").removesuffix(".json")
        for task in run["configs"]:
            for line in results.with_name(f"samples_{task}_{time}.jsonl").read_text().splitlines():
                sample = json.loads(line)
                numbers = re.findall(r"-?\d+", sample["resps"][0][0])
                correct = bool(numbers) and numbers[-1] == sample["doc"]["answer"]
                key = (run["model_name"], task, run["config"]["torch_seed"], str(sample["doc_id"]))
                scored[key] = 1.0 if correct else 0.0
    return scored


def _copy(tmp_path: Path, model_folder: Path) -> Path:
    folder = tmp_path / model_folder.name
    shutil.copytree(model_folder, folder)
    return folder


def _first(folder: Path, pattern: str) -> Path:
    return sorted(folder.glob(pattern))[0]


def test_reads_both_models_every_task_and_each_seeded_run_as_a_sample():
    rows = lm_eval.read(LOGS, None)
    frame = rows.frame
    assert rows.tool == "lm-evaluation-harness 0.4.13"
    assert rows.score == "exact_match,last_number"
    assert set(frame["run"]) == {BASE, NOISED}
    assert set(frame["benchmark"]) == {"addition_greedy", "addition_sampled"}
    sizes = frame.groupby(["run", "benchmark", "sample"]).size()
    for run in (BASE, NOISED):
        assert sizes[(run, "addition_greedy", 0)] == 10
        assert [sizes[(run, "addition_sampled", sample)] for sample in range(4)] == [10, 10, 10, 10]
    assert len(frame) == 2 * (10 + 4 * 10)
    assert sorted(frame["prompt_id"].unique(), key=int) == [str(doc) for doc in range(10)]


def test_every_value_is_the_answer_scored_another_way():
    """Samples are numbered by seed: the fixture's sampled runs have seeds 0, 1, 2, 3."""
    frame = lm_eval.read(LOGS, "exact_match").frame
    read = {(row.run, row.benchmark, row.sample, row.prompt_id): row.value for row in frame.itertuples(index=False)}
    assert read == _answers_scored_by_hand()


def test_two_questions_worked_by_hand():
    frame = lm_eval.read(LOGS, None).frame
    greedy = frame[frame["benchmark"] == "addition_greedy"].set_index(["run", "prompt_id"])["value"]
    # q1 "What is 1 + 5?": both answered "1 + 5 = 6"; q5 "What is 7 + 6?": "7 + 6 = 13" / "The answer is 14."
    assert (greedy[(BASE, "1")], greedy[(NOISED, "1")]) == (1.0, 1.0)
    assert (greedy[(BASE, "5")], greedy[(NOISED, "5")]) == (1.0, 0.0)
    assert greedy.groupby(level="run").sum().to_dict() == {BASE: 5.0, NOISED: 6.0}


def test_one_samples_file_or_one_results_file_reads_only_that():
    samples = _first(GREEDY, "samples_addition_greedy_*.jsonl")
    frame = lm_eval.read(samples, None).frame
    assert set(frame["benchmark"]) == {"addition_greedy"} and set(frame["sample"]) == {0}
    assert len(frame) == 10 and frame["where"].iloc[0] == f"{samples}:1"
    results = _first(SAMPLED, "results_*.json")  # one of the four sampled runs
    frame = lm_eval.read(results, None).frame
    assert frame.groupby(["benchmark", "sample"]).size().to_dict() == {("addition_sampled", 0): 10}
    assert len(lm_eval.read(SAMPLED, None).frame) == 40


def test_looks_like():
    assert lm_eval.looks_like(LOGS)
    assert lm_eval.looks_like(SAMPLED)
    assert lm_eval.looks_like(_first(GREEDY, "samples_*.jsonl"))
    assert lm_eval.looks_like(_first(GREEDY, "results_*.json"))


def test_looks_like_is_false_on_other_files(tmp_path):
    table = tmp_path / "scores.csv"
    table.write_text("arm,seed,value\na,0,1\n")
    alone = tmp_path / "results_2026-12-05T06-01-08.415830.json"  # a results file, no lm-eval samples beside
    alone.write_text('{"config_general": {}}')
    renamed = tmp_path / "samples_x_2026-12-05T06-01-08.415830.jsonl"  # the name, not the content
    renamed.write_text('{"id": "q0"}\n')
    for path in (FIXTURES / "questions.jsonl", table, alone, renamed, tmp_path, tmp_path / "missing"):
        assert not lm_eval.looks_like(path), path


@pytest.mark.parametrize("tool", ["lighteval", "inspect"])
def test_looks_like_is_false_on_the_other_tools_logs(tool):
    folder = FIXTURES / tool / "logs"
    if not folder.is_dir():
        pytest.skip(f"no {tool} fixture logs in this checkout ({folder})")
    files = [found for found in folder.rglob("*") if found.is_file()]
    assert files and not any(lm_eval.looks_like(found) for found in [folder, *files])


def test_truncated_line_is_named_by_file_and_line(tmp_path):
    samples = _first(_copy(tmp_path, GREEDY), "samples_addition_greedy_*.jsonl")
    text = samples.read_text()
    samples.write_text(text[: len(text) - 200])  # the last line cut
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(samples))}:10: not a JSON line"):
        lm_eval.read(samples, None)
    results = _first(samples.parent, "results_*.json")
    results.write_text("\n".join(results.read_text().splitlines()[:40]))
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(results))}:\d+: not valid JSON"):
        lm_eval.read(results, None)


def test_a_missing_question_and_a_changed_score_are_refused(tmp_path):
    samples = _first(_copy(tmp_path, GREEDY), "samples_addition_greedy_*.jsonl")
    lines = samples.read_text().splitlines(keepends=True)
    samples.write_text("".join(lines[:-1]))
    with pytest.raises(ConfigError, match="9 questions under filter 'last_number', but its results file counts 10"):
        lm_eval.read(samples, None)
    first = json.loads(lines[0])
    assert first["exact_match"] == 0.0
    samples.write_text(json.dumps({**first, "exact_match": 1.0}) + "\n" + "".join(lines[1:]))
    with pytest.raises(ConfigError, match="average 0.6, but its results file says 0.5"):
        lm_eval.read(samples, None)
    samples.write_text(lines[0].replace('"exact_match": 0.0', '"exact_match": NaN') + "".join(lines[1:]))
    with pytest.raises(ConfigError, match=rf"{re.escape(str(samples))}:1: exact_match is nan, not a finite number"):
        lm_eval.read(samples, None)


def test_unsupported_version_is_named_with_the_supported_ones(tmp_path):
    results = _first(_copy(tmp_path, GREEDY), "results_*.json")
    run = json.loads(results.read_text())
    results.write_text(json.dumps({**run, "lm_eval_version": "0.3.0"}))
    with pytest.raises(ConfigError, match=r"lm-eval 0.3.0 is not supported \(supported: lm-eval 0.4.9 to 0.4.x\)"):
        lm_eval.read(results, None)


def test_unknown_score_lists_the_available_ones():
    available = r"its scores \(metric,filter\): exact_match,last_number$"
    with pytest.raises(ConfigError, match=rf"has no score 'acc'; {available}"):
        lm_eval.read(LOGS, "acc")


def test_samples_file_without_its_results_file_is_refused(tmp_path):
    folder = _copy(tmp_path, GREEDY)
    samples = _first(folder, "samples_addition_greedy_*.jsonl")
    samples.with_name(samples.name.replace("samples_addition_greedy_", "results_").replace(".jsonl", ".json")).unlink()
    for path in (samples, tmp_path):
        with pytest.raises(ConfigError, match=r"no results_.*\.json beside it .*: the model's name, the lm-eval"):
            lm_eval.read(path, None)


def _rerun(folder: Path, time: str, **config) -> None:
    """A copy of the seed-1 sampled run as if lm-eval had run it again at ``time``."""
    results = sorted(folder.glob("results_*.json"))[1]
    run = json.loads(results.read_text())
    assert list(run["configs"]) == ["addition_sampled"] and run["config"]["torch_seed"] == 1
    run["config"].update(config)
    (folder / f"results_{time}.json").write_text(json.dumps(run))
    old = results.name.removeprefix("results_").removesuffix(".json")
    shutil.copy(folder / f"samples_addition_sampled_{old}.jsonl", folder / f"samples_addition_sampled_{time}.jsonl")


def test_the_same_seeds_twice_are_refused_and_new_seeds_are_one_more_sample(tmp_path):
    folder = _copy(tmp_path, SAMPLED)
    _rerun(folder, "2026-12-06T00-00-00.000000")
    with pytest.raises(ConfigError, match=r"ran twice with the same seeds \(1, 1, 1, 1\)"):
        lm_eval.read(folder, None)
    _rerun(folder, "2026-12-06T00-00-00.000000", random_seed=9, numpy_seed=9, torch_seed=9, fewshot_seed=9)
    frame = lm_eval.read(folder, None).frame
    assert sorted(frame[frame["benchmark"] == "addition_sampled"]["sample"].unique()) == [0, 1, 2, 3, 4]


def test_a_greedy_task_run_twice_is_not_two_samples(tmp_path):
    folder = _copy(tmp_path, GREEDY)
    results = _first(folder, "results_*.json")
    time = results.name.removeprefix("results_").removesuffix(".json")
    again = "2026-12-06T00-00-00.000000"
    shutil.copy(results, folder / f"results_{again}.json")
    shutil.copy(folder / f"samples_addition_greedy_{time}.jsonl", folder / f"samples_addition_greedy_{again}.jsonl")
    with pytest.raises(ConfigError, match="'addition_greedy' .* answers greedily .* they are not samples"):
        lm_eval.read(folder, None)


def test_no_version_and_no_samples_files_are_refused(tmp_path):
    results = _first(_copy(tmp_path, SAMPLED), "results_*.json")
    run = json.loads(results.read_text())
    results.write_text(json.dumps({key: value for key, value in run.items() if key != "lm_eval_version"}))
    with pytest.raises(ConfigError, match=r"no lm_eval_version \(supported: lm-eval 0.4.9 to 0.4.x\)"):
        lm_eval.read(results, None)
    results.write_text(json.dumps(run))
    time = results.name.removeprefix("results_").removesuffix(".json")
    (results.parent / f"samples_addition_sampled_{time}.jsonl").unlink()
    with pytest.raises(ConfigError, match=r"no samples_addition_sampled_.* run it with --log_samples"):
        lm_eval.read(results, None)


def test_output_path_ending_in_json_names_the_results_file_after_it(tmp_path):
    """lm-eval --output_path scores.json writes scores_<time>.json with the samples files beside it."""
    results = _first(GREEDY, "results_*.json")
    time = results.name.removeprefix("results_").removesuffix(".json")
    shutil.copy(results, tmp_path / f"scores_{time}.json")
    shutil.copy(GREEDY / f"samples_addition_greedy_{time}.jsonl", tmp_path)
    assert lm_eval.looks_like(tmp_path / f"scores_{time}.json")
    assert len(lm_eval.read(tmp_path, None).frame) == 10
    assert len(lm_eval.read(tmp_path / f"samples_addition_greedy_{time}.jsonl", None).frame) == 10


def _repeats_scored_by_hand() -> dict[str, dict[str, float]]:
    """filter -> doc_id -> score of the four answers: the first's, the majority vote's, all four's mean."""
    (samples,) = REPEATS.rglob("samples_addition_repeats_*.jsonl")
    scored: dict[str, dict[str, float]] = {"first": {}, "majority": {}, "all_four": {}}
    for line in samples.read_text().splitlines():
        sample = json.loads(line)
        if sample["filter"] != "first":
            continue
        numbers = [re.findall(r"-?\d+", answer) for answer in sample["resps"][0]]
        picked = [found[-1] if found else "[invalid]" for found in numbers]
        assert len(picked) == 4
        correct = [answer == sample["doc"]["answer"] for answer in picked]
        doc = str(sample["doc_id"])
        scored["first"][doc] = float(correct[0])
        scored["majority"][doc] = float(Counter(picked).most_common(1)[0][0] == sample["doc"]["answer"])
        scored["all_four"][doc] = sum(correct) / 4
    return scored


def test_repeats_are_scored_once_per_question_and_filter():
    """lm-eval's `repeats: 4`: one row per question under the chosen filter, never one per answer."""
    scored = _repeats_scored_by_hand()
    default = lm_eval.read(REPEATS, None)
    assert default.score == "exact_match,first"
    assert set(default.frame["sample"]) == {0} and set(default.frame["run"]) == {BASE}
    for name in ("first", "majority", "all_four"):
        frame = lm_eval.read(REPEATS, f"exact_match,{name}").frame
        assert dict(zip(frame["prompt_id"], frame["value"], strict=True)) == pytest.approx(scored[name]), name
    several = "has 'exact_match' under several filters; give one as metric,filter: exact_match,first, "
    with pytest.raises(ConfigError, match=several):
        lm_eval.read(REPEATS, "exact_match")


def test_runs_of_different_task_configs_are_not_samples(tmp_path):
    folder = _copy(tmp_path, SAMPLED)
    time = "2026-12-06T00-00-00.000000"
    _rerun(folder, time, random_seed=9, numpy_seed=9, torch_seed=9, fewshot_seed=9)
    results = folder / f"results_{time}.json"
    run = json.loads(results.read_text())
    run["configs"]["addition_sampled"]["generation_kwargs"]["temperature"] = 0.2
    results.write_text(json.dumps(run))
    with pytest.raises(ConfigError, match="'addition_sampled' of /work/evalckpt/smollm2 has different configs in"):
        lm_eval.read(folder, None)
