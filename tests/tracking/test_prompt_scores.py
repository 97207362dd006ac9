"""Per-prompt evaluation scores: from a trial result into its (small) record, the results frame
and the MLflow artifact, exactly; damaged scores fail in one line naming the record."""

from __future__ import annotations

import base64
import csv
import gzip
import hashlib
import json
import re
import zlib
from pathlib import Path

import numpy as np
import pytest
import yaml

import harness
from harness.engine.spec import PromptScores, TrialResult
from harness.errors import HarnessError
from harness.study.expand import expand
from harness.study.load import load_study
from harness.tracking import prompt_scores, records
from harness.tracking.mlflow_mirror import Tracker
from harness.tracking.prompt_scores import (
    LONG_COLUMNS,
    PROMPT_METRICS,
    SAMPLE_VAR_SUFFIX,
    SAMPLES_SUFFIX,
    decode_scores,
    encode_scores,
    long_columns,
)
from harness.tracking.results import PROMPT_COLUMNS, load_results

IDS = [hashlib.sha256(f"{i:03d}+{i:03d}=".encode()).hexdigest()[:12] for i in range(1000)]


def realistic(seed: int, prompts: int = 8, steps: tuple[int, ...] = (0, 2, 4), k: int = 4) -> list[PromptScores]:
    """Scores of 0/1 rewards: greedy 0 or 1, sampled means in multiples of 1/k, ddof=1 variances."""
    rng = np.random.default_rng(seed)
    skill = rng.random(prompts)
    out = []
    for step in steps:
        greedy = (rng.random(prompts) < skill).astype(float)
        hits = (rng.random((prompts, k)) < skill[:, None]).astype(float)
        out.append(
            PromptScores(
                step=step,
                prompt_ids=IDS[:prompts],
                greedy=greedy.tolist(),
                sampled_mean=(hits.sum(1) / k).tolist(),
                sampled_var=hits.var(1, ddof=1).tolist(),
                samples=k,
            )
        )
    return out


def scored_record(spec, scores: list[PromptScores], **kw) -> records.TrialRecord:
    result = TrialResult(trial_id=spec.trial_id, final={"eval/accuracy": 0.5}, prompts=scores)
    return records.make_record(spec, result, started_at=0, finished_at=1, **kw)


def test_metric_names_are_the_eval_metrics_and_their_suffixes():
    assert PROMPT_METRICS == (
        "eval/accuracy",
        "eval/mean_reward",
        "eval/mean_reward" + SAMPLE_VAR_SUFFIX,
        "eval/mean_reward" + SAMPLES_SUFFIX,
    )
    assert (SAMPLE_VAR_SUFFIX, SAMPLES_SUFFIX) == (".sample_var", ".samples")


def test_record_round_trips_the_scores_exactly(tmp_path, make_spec):
    scores = realistic(0)
    record = scored_record(make_spec("grpo", 0), scores)
    assert record.prompt_scores.startswith("ps1:")
    path = records.write_record(tmp_path, record)
    back = records.read_record(path)
    assert decode_scores(back.prompt_scores, str(path)) == scores
    assert back.fingerprint() == record.fingerprint()
    assert json.loads(path.read_text())["prompt_scores"] == record.prompt_scores


def test_a_record_without_scores_dumps_as_before_the_field(tmp_path, make_record):
    record = make_record("grpo", 0)
    assert record.prompt_scores is None and "prompt_scores" not in record.model_dump_json()
    old = json.loads(record.model_dump_json())  # a record written before the field existed
    path = records.record_path(tmp_path, record.trial_id)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(old))
    back = records.read_record(path)
    assert back.prompt_scores is None and back.fingerprint() == record.fingerprint()


@pytest.mark.slow
def test_a_thousand_prompt_study_of_a_hundred_trials_stays_under_20_mb(tmp_path, make_spec):
    total = 0
    for seed in range(100):
        record = scored_record(make_spec("grpo", seed), realistic(seed, 1000, (0, 10, 20, 30, 40, 50, 60)))
        total += records.write_record(tmp_path, record).stat().st_size
    assert total < 20_000_000


def write_study(folder: Path, **changes) -> Path:
    data = {
        "name": "prompts",
        "output_dir": str(folder / "out"),
        "control": "grpo",
        "seeds": 2,
        "train": {"steps": 4, "eval_every": 2},
        "arms": [{"name": "grpo", "algorithm": "grpo"}, {"name": "rloo", "algorithm": "rloo"}],
        **changes,
    }
    path = folder / "prompts.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def study(tmp_path):
    """Current design: grpo s0/s1 scored, rloo s0 scored, rloo s1 an old record without scores;
    plus a tuning record and grpo trials of an earlier design, both scored (never in the frame)."""
    first = load_study(write_study(tmp_path, arms=[{"name": "grpo", "algorithm": "grpo", "set": {"lr": 3.0e-4}}]))
    out = first.output_dir
    for spec in expand(first):
        records.write_record(out, scored_record(spec, realistic(50 + spec.seed)))
    current = load_study(write_study(tmp_path))
    scored = {}
    for spec in expand(current):
        if (spec.arm, spec.seed) == ("rloo", 1):
            records.write_record(out, records.make_record(spec, TrialResult(trial_id=spec.trial_id)))
        else:
            scored[spec.trial_id] = (spec, realistic(spec.seed + (10 if spec.arm == "rloo" else 0)))
            records.write_record(out, scored_record(spec, scored[spec.trial_id][1]))
    tune = next(s for s in expand(current) if s.arm == "grpo").model_copy(update={"seed": 100})
    records.write_record(out, scored_record(tune, realistic(7), phase="tune"))
    return tmp_path / "prompts.yaml", out, scored


def test_results_prompts_holds_the_current_designs_comparison_scores(study):
    path, _, scored = study
    res = harness.results(path)
    assert len(res.earlier) == 2  # the earlier grpo design: scored, never in the frame
    frame = res.prompts
    assert list(frame.columns) == PROMPT_COLUMNS == ["trial_id", "arm", "seed", *LONG_COLUMNS]
    assert LONG_COLUMNS == ["step", "prompt_id", "metric", "value"]
    assert set(frame["trial_id"]) == set(scored)
    assert (frame["seed"].dtype, frame["step"].dtype, frame["value"].dtype) == ("int64", "int64", "float64")
    assert len(frame) == sum(3 * 4 * 8 for _ in scored)
    for trial_id, (spec, scores) in scored.items():
        rows = frame[frame["trial_id"] == trial_id]
        assert set(rows["arm"]) == {spec.arm} and set(rows["seed"]) == {spec.seed}
        for evaluation in scores:
            at = rows[rows["step"] == evaluation.step]
            for metric, values in zip(
                PROMPT_METRICS,
                (
                    evaluation.greedy,
                    evaluation.sampled_mean,
                    evaluation.sampled_var,
                    [4.0] * 8,
                ),
            ):
                got = at[at["metric"] == metric]
                assert got["prompt_id"].tolist() == evaluation.prompt_ids
                assert got["value"].tolist() == values
    assert res.prompts is frame  # built once


def test_phase_none_keeps_the_tuning_scores_too(study):
    path, _, scored = study
    frame = load_results(path, phase=None).prompts
    assert len(set(frame["trial_id"])) == len(scored) + 1


@pytest.mark.parametrize(
    "blob, says",
    [
        ("ps1:!!not base64!!", "damaged"),
        ("ps1:" + base64.b64encode(b"not zlib").decode(), "damaged"),
        ("ps1:" + base64.b64encode(zlib.compress(b'[{"step": 0}]')).decode(), "damaged"),
        ("ps9:" + base64.b64encode(zlib.compress(b"[]")).decode(), "not in format 'ps1'"),
        ("garbage", "not in format 'ps1'"),
    ],
)
def test_damaged_scores_are_one_line_naming_the_record(blob, says):
    with pytest.raises(HarnessError) as err:
        decode_scores(blob, "trial record runs/x/records/t.json")
    text = str(err.value)
    assert "\n" not in text and text.startswith("trial record runs/x/records/t.json: prompt_scores")
    assert says in text and "remove the prompt_scores field" in text


def test_a_decompression_bomb_is_refused_before_it_fills_memory(monkeypatch):
    monkeypatch.setattr(prompt_scores, "MAX_DECODED_BYTES", 1000)
    blob = "ps1:" + base64.b64encode(zlib.compress(b"[" + b" " * 5000 + b"]")).decode()
    with pytest.raises(HarnessError, match="decompresses to more than 1000 bytes"):
        decode_scores(blob, "trial record t.json")


def test_a_damaged_record_fails_only_when_prompts_are_asked_for(study):
    path, out, scored = study
    victim = records.record_path(out, next(iter(scored)))
    data = json.loads(victim.read_text())
    data["prompt_scores"] = data["prompt_scores"][:-20] + "A" * 20
    del data["checksum"]  # as a record written before records had one (with one, it is set aside when read)
    victim.write_text(json.dumps(data))
    res = load_results(path)  # the trials and curves do not need the scores
    assert len(res.trials)
    with pytest.raises(HarnessError, match=re.escape(f"trial record {victim}: prompt_scores is damaged")):
        _ = res.prompts  # reading the frame decodes the scores


def test_mirror_attaches_the_scores_as_an_artifact_that_reads_back_exactly(study_dir, make_spec):
    scores = realistic(3)
    record = scored_record(make_spec("grpo", 0), scores)
    records.write_record(study_dir, record)
    tracker = Tracker(None, study_dir, "demo")
    assert tracker.log_record(record) is True
    run = tracker.find_trial_run(record.trial_id)
    folder = Path(tracker.client.download_artifacts(run.info.run_id, "", dst_path=str(study_dir / "dl")))
    with gzip.open(folder / "prompt_scores.csv.gz", "rt", newline="") as fh:
        rows = list(csv.DictReader(fh))
    expected = long_columns(scores)
    assert list(rows[0]) == LONG_COLUMNS
    assert [int(r["step"]) for r in rows] == expected["step"]
    assert [r["prompt_id"] for r in rows] == expected["prompt_id"]
    assert [r["metric"] for r in rows] == expected["metric"]
    assert [float(r["value"]) for r in rows] == expected["value"]


def test_no_scores_no_blob():
    assert encode_scores([]) is None
