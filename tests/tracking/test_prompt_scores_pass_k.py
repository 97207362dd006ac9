"""pass@k / pass^k rows in the per-prompt long layout, the primary-metric check and the MLflow key."""

from __future__ import annotations

import pytest

from harness.engine.spec import PromptScores
from harness.errors import ConfigError
from harness.study.load import parse_study
from harness.tracking.mlflow_layout import mlflow_key
from harness.tracking.prompt_scores import PROMPT_METRICS, decode_scores, encode_scores, long_columns


def _scores(rates=None):
    return PromptScores(
        step=3,
        prompt_ids=["a", "b"],
        greedy=[1.0, 0.0],
        sampled_mean=[0.5, 0.25],
        sampled_var=[1 / 3, 0.25],
        samples=4,
        pass_rates=rates,
    )


def test_pass_rows_follow_the_standard_metrics_and_round_trip():
    rates = {"eval/pass@2": [0.8333, 0.5], "eval/pass^2": [0.1667, 0.0]}
    scores = _scores(rates)
    cols = long_columns(decode_scores(encode_scores([scores]), "r"))
    assert cols["metric"] == [m for m in PROMPT_METRICS for _ in "ab"] + ["eval/pass@2"] * 2 + ["eval/pass^2"] * 2
    assert cols["value"][-4:] == [0.8333, 0.5, 0.1667, 0.0]


def test_a_record_without_pass_rates_is_stored_as_before():
    blob = encode_scores([_scores()])
    assert "pass_rates" not in decode_scores(blob, "r")[0].model_dump(exclude_none=True)
    assert long_columns([_scores()])["metric"] == [m for m in PROMPT_METRICS for _ in "ab"]


def test_pass_metrics_can_be_primary_when_scored():
    base = {"name": "p", "seeds": 2, "arms": [{"name": "g", "algorithm": "grpo"}]}
    s = parse_study({**base, "primary_metric": "eval/pass^2", "train": {"eval_samples": 4, "eval_pass_k": [2]}})
    assert s.primary_metric == "eval/pass^2"
    with pytest.raises(ConfigError, match=r"train.eval_pass_k includes 8"):
        parse_study({**base, "primary_metric": "eval/pass@8"})
    with pytest.raises(ConfigError, match="eval_pass_k asks for k=8"):
        parse_study({**base, "train": {"eval_samples": 4, "eval_pass_k": [8]}})


def test_mlflow_keys_of_pass_at_and_pass_hat_stay_apart():
    assert mlflow_key("eval/pass@4") == "eval/pass_4"
    assert mlflow_key("eval/pass^4") == "eval/pass_hat_4"
