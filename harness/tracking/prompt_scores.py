"""Per-prompt evaluation scores in a trial record: one compressed text field, decoded on demand.

A trial's scores (prompts x evaluations) would outweigh the rest of its record many times as
plain JSON, and every report reads every record; so they are kept as ``ps1:`` followed by
base64(zlib(compact JSON)), and decoded only for the per-prompt frame and the MLflow artifact.
The tag names the layout, so a later one can be told apart. The long layout (one row per
prompt, evaluation and metric) and its metric names are defined here, once; an evaluation that
scored pass@k and pass^k (``train.eval_pass_k``) adds their rows after :data:`PROMPT_METRICS`.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib

from pydantic import TypeAdapter, ValidationError

from harness.engine.spec import GREEDY_METRIC, SAMPLED_METRIC, PromptScores, metric_name
from harness.errors import HarnessError, one_line

FORMAT = "ps1"
#: ``eval/mean_reward`` + suffix: the sample variance (ddof=1) of a prompt's k rewards, and k.
SAMPLE_VAR_SUFFIX = ".sample_var"
SAMPLES_SUFFIX = ".samples"
#: under ``eval_subset``: each scored prompt's stratum, and the held-out prompts of its stratum
#: (``PromptScores.strata``, ``stratum_sizes``), as rows of the long layout after the scores
STRATUM_METRIC = "eval/stratum"
STRATUM_SIZE_METRIC = "eval/stratum.size"
#: the metrics of the long layout, in row order
PROMPT_METRICS = (GREEDY_METRIC, SAMPLED_METRIC, SAMPLED_METRIC + SAMPLE_VAR_SUFFIX, SAMPLED_METRIC + SAMPLES_SUFFIX)
LONG_COLUMNS = ["step", "prompt_id", "metric", "value"]


def samples_metric(metric: str) -> str:
    """The metric whose ``.samples`` rows hold the k behind ``metric``: pass@k and pass^k are
    scored from the same sampled answers as the sampled mean."""
    return SAMPLED_METRIC if metric.startswith(("eval/pass@", "eval/pass^")) else metric


_SCORES = TypeAdapter(list[PromptScores])
#: the most decompressed bytes a record's scores may take (a 10,000-prompt x 50-evaluation trial
#: is ~60 MB of JSON); more is a damaged or hostile record, refused before it fills memory
MAX_DECODED_BYTES = 256 * 1024 * 1024


def _inflate(data: bytes) -> bytes:
    inflater = zlib.decompressobj()
    out = inflater.decompress(data, MAX_DECODED_BYTES)
    if inflater.unconsumed_tail:
        raise ValueError(f"decompresses to more than {MAX_DECODED_BYTES} bytes")
    return out


def encode_scores(scores: list[PromptScores]) -> str | None:
    """The text a record stores for ``scores`` (None when there are none)."""
    if not scores:
        return None
    # exclude_none: the study task's scores (no benchmark) without pass rates are stored exactly as
    # before either field existed
    payload = json.dumps([s.model_dump(exclude_none=True) for s in scores], separators=(",", ":")).encode("utf-8")
    return f"{FORMAT}:" + base64.b64encode(zlib.compress(payload, 9)).decode("ascii")


def decode_scores(blob: str, where: str) -> list[PromptScores]:
    """The scores held in ``blob``; a damaged one is a HarnessError naming ``where`` (the record)."""
    tag, sep, body = blob.partition(":")
    if not sep or tag != FORMAT:
        raise HarnessError(
            f"{where}: prompt_scores is not in format {FORMAT!r} (starts {blob[:8]!r}); if a newer "
            "harness wrote it, read it with that version, else remove the prompt_scores field"
        )
    try:
        return _SCORES.validate_python(json.loads(_inflate(base64.b64decode(body, validate=True))))
    except (binascii.Error, zlib.error, ValueError, ValidationError) as err:
        raise HarnessError(
            f"{where}: prompt_scores is damaged ({one_line(err)}); restore the file from its MLflow run's "
            "record.json or the shared storage, or remove the prompt_scores field to keep the rest"
        ) from err


def long_columns(scores: list[PromptScores]) -> dict[str, list]:
    """``scores`` in the long layout: step, prompt_id, metric (:data:`PROMPT_METRICS`, then any
    pass@k / pass^k; a benchmark's named ``eval/<benchmark>/...``; under ``eval_subset`` each prompt's
    :data:`STRATUM_METRIC` and :data:`STRATUM_SIZE_METRIC`), value; rows by evaluation, then metric,
    then prompt (the task's eval order)."""
    cols: dict[str, list] = {c: [] for c in LONG_COLUMNS}
    for evaluation in scores:
        n = len(evaluation.prompt_ids)
        values = (evaluation.greedy, evaluation.sampled_mean, evaluation.sampled_var, [float(evaluation.samples)] * n)
        strata = (
            {}
            if evaluation.strata is None
            else {
                STRATUM_METRIC: [float(h) for h in evaluation.strata],
                STRATUM_SIZE_METRIC: [float(evaluation.stratum_sizes[h]) for h in evaluation.strata],
            }
        )
        for name, column in [*zip(PROMPT_METRICS, values), *(evaluation.pass_rates or {}).items(), *strata.items()]:
            cols["step"] += [evaluation.step] * n
            cols["prompt_id"] += evaluation.prompt_ids
            cols["metric"] += [metric_name(name, evaluation.benchmark)] * n
            cols["value"] += column
    return cols
