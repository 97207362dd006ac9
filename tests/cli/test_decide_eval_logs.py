"""``harness decide`` on the logs evaluation tools wrote (committed under tests/fixtures/eval_logs,
made by the tools themselves: see each tool's README there) and on a per-sample JSONL table: two
arms judged on pass@1 and pass@k, each metric with its own report, the counts checked against the
logs read by a different route."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from cli_main import run_main

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "eval_logs"


def _inspect_correct(folder: Path) -> dict[str, dict[str, list[float]]]:
    """model -> question -> its epochs' 0/1 scores, read from the .eval archives' JSON directly."""
    out: dict[str, dict[str, list[float]]] = {}
    for log in sorted(folder.glob("*.eval")):
        with zipfile.ZipFile(log) as archive:
            model = json.loads(archive.read("header.json"))["eval"]["model"].rsplit("/", 1)[-1]
            for name in archive.namelist():
                if name.startswith("samples/"):
                    sample = json.loads(archive.read(name))
                    value = next(iter(sample["scores"].values()))["value"]
                    out.setdefault(model, {}).setdefault(str(sample["id"]), []).append(1.0 if value == "C" else 0.0)
    return out


def _verdict(out: str, metric: str, control: str = "smollm2") -> float:
    """The difference printed under ``metric:`` for the one comparison."""
    block = out.split(f"{metric}:\n", 1)[1]
    line = next(line for line in block.splitlines() if f" vs {control}: " in line)
    return float(line.rsplit("difference ", 1)[1].rstrip(")"))


def test_inspect_logs_are_judged_on_pass_at_1_and_pass_at_4(monkeypatch, capsys):
    folder = LOGS / "inspect" / "logs" / "sampled"
    code, out, err = run_main(
        monkeypatch, capsys, "decide", str(folder), "--control", "smollm2", "--pass-k", "1,4", "--out", "judged"
    )
    assert code == 0, err
    assert out.startswith(f"read inspect-ai 0.3.285 logs in {folder} (score: match)")
    correct = _inspect_correct(folder)
    assert {len(v) for scores in correct.values() for v in scores.values()} == {4}
    mean = {m: sum(sum(v) for v in q.values()) / sum(len(v) for v in q.values()) for m, q in correct.items()}
    any_right = {m: sum(max(v) for v in q.values()) / len(q) for m, q in correct.items()}
    assert _verdict(out, "eval/pass@1") == pytest.approx(mean["smollm2_noised"] - mean["smollm2"], abs=5e-5)
    assert _verdict(out, "eval/pass@4") == pytest.approx(any_right["smollm2_noised"] - any_right["smollm2"], abs=5e-5)
    assert out.count("Read 4 samples per prompt (20 prompt rows, one per run and prompt).") == 2
    summary = Path("judged/summary.md").read_text()
    assert "eval/pass@1" in summary and "Read 4 samples per prompt" in summary
    assert "eval/pass@4" in Path("judged/pass_at_4/summary.md").read_text()


def test_lm_eval_logs_are_judged_on_pass_at_1_and_pass_at_4(monkeypatch, capsys):
    """lm-eval scores one answer per question and run; the sampling task's four seeded runs are a
    question's four samples. The scores are counted here from each samples file's own
    exact_match field, per model folder."""
    folder = LOGS / "lm_eval" / "logs" / "sampled"
    code, out, err = run_main(
        monkeypatch, capsys, "decide", str(folder), "--control", "smollm2", "--pass-k", "1,4", "--out", "judged"
    )
    assert code == 0, err
    read = f"lm-evaluation-harness 0.4.13 logs in {folder} (score: exact_match,last_number)"
    assert out.startswith(f"read {read}\n"), out
    assert f"- **Read from:** {read}" in Path("judged/summary.md").read_text()
    correct: dict[str, dict[int, list[float]]] = {}
    for samples in folder.glob("*/samples_*.jsonl"):
        arm = samples.parent.name.rsplit("__", 1)[-1]
        for line in samples.read_text().splitlines():
            row = json.loads(line)
            correct.setdefault(arm, {}).setdefault(row["doc_id"], []).append(float(row["exact_match"]))
    assert {len(v) for q in correct.values() for v in q.values()} == {4}
    mean = {m: sum(sum(v) for v in q.values()) / 40 for m, q in correct.items()}
    any_right = {m: sum(max(v) for v in q.values()) / 10 for m, q in correct.items()}
    assert _verdict(out, "eval/pass@1") == pytest.approx(mean["smollm2_noised"] - mean["smollm2"], abs=5e-5)
    assert _verdict(out, "eval/pass@4") == pytest.approx(any_right["smollm2_noised"] - any_right["smollm2"], abs=5e-5)


def test_lighteval_details_are_judged_on_its_own_per_question_pass_at_k(monkeypatch, capsys):
    """lighteval logs one number per question for its sampled metrics (its pass@k over n = 4
    samples), so its pass@1 and pass@4 are read as they are: its results file says 0.4 and 0.9 for
    smollm2, 0.225 and 0.5 for smollm2_noised."""
    folder = LOGS / "lighteval" / "logs" / "sampled"
    for score, metric, diff in (
        ("pass@k:k=1&n=4", "eval/pass_1", 0.225 - 0.4),
        ("pass@k:k=4&n=4", "eval/pass_4", -0.4),
    ):
        code, out, err = run_main(
            monkeypatch, capsys, "decide", str(folder), "--control", "smollm2", "--score", score, "--metric", metric
        )
        assert code == 0, err
        assert f"(score: {score})" in out.splitlines()[0]
        assert float(out.rsplit("difference ", 1)[1].split(")")[0]) == pytest.approx(diff, abs=5e-5)


def test_a_per_sample_jsonl_is_judged_on_pass_at_1_and_pass_at_2(monkeypatch, capsys, tmp_path):
    rows = [
        {"arm": arm, "prompt_id": f"q{p}", "sample": s, "value": float((p * s + p) % (2 if arm == "new" else 3) == 0)}
        for arm in ("base", "new")
        for p in range(8)
        for s in range(3)
    ]
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    code, out, err = run_main(
        monkeypatch, capsys, "decide", str(path), "--control", "base", "--pass-k", "1,2", "--out", "judged"
    )
    assert code == 0, err
    frame = pd.DataFrame(rows)
    c = frame.groupby(["arm", "prompt_id"])["value"].sum()
    pass2 = 1 - (3 - c) * (2 - c) / 6  # 1 - C(3 - c, 2) / C(3, 2) for c = 0..3
    want = pass2["new"].mean() - pass2["base"].mean()
    assert want != 0 and _verdict(out, "eval/pass@2", "base") == pytest.approx(want, abs=5e-5)
    assert "Read 3 samples per prompt (16 prompt rows, one per run and prompt)." in out
