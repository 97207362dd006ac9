"""An eval-subset evaluation's strata in the stored record and the long layout."""

from __future__ import annotations

import base64
import json
import zlib

from harness.engine.spec import PromptScores
from harness.tracking.prompt_scores import (
    STRATUM_METRIC,
    STRATUM_SIZE_METRIC,
    decode_scores,
    encode_scores,
    long_columns,
)

PLAIN = PromptScores(
    step=2, prompt_ids=["a", "b"], greedy=[1.0, 0.0], sampled_mean=[0.5, 0.0], sampled_var=[0.5, 0.0], samples=2
)


def test_strata_round_trip_and_become_rows_of_the_long_layout():
    labelled = PLAIN.model_copy(update={"strata": [1, 0], "stratum_sizes": [3, 5]})
    assert decode_scores(encode_scores([labelled]), "r") == [labelled]
    cols = long_columns([labelled])
    rows = [
        (p, m, v) for p, m, v in zip(cols["prompt_id"], cols["metric"], cols["value"]) if m.startswith("eval/stratum")
    ]
    assert rows == [
        ("a", STRATUM_METRIC, 1.0),
        ("b", STRATUM_METRIC, 0.0),
        ("a", STRATUM_SIZE_METRIC, 5.0),
        ("b", STRATUM_SIZE_METRIC, 3.0),
    ]


def test_an_evaluation_without_strata_is_stored_as_before():
    blob = encode_scores([PLAIN]).partition(":")[2]
    [stored] = json.loads(zlib.decompress(base64.b64decode(blob)))
    assert set(stored) == {"step", "prompt_ids", "greedy", "sampled_mean", "sampled_var", "samples"}
    assert not any(m.startswith("eval/stratum") for m in long_columns([PLAIN])["metric"])
