"""How a trial record is laid out in MLflow: the tags that find its runs again and mark them
complete, metric and param keys and values within MLflow's limits, and the history and per-prompt
scores as artifact files (``harness.tracking.mlflow_mirror`` writes them)."""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from typing import Any

from harness.ground.spreadsheet import safe_cell
from harness.tracking import mlflow_env  # noqa: F401 - MLflow's environment, before mlflow_key imports it
from harness.tracking.prompt_scores import LONG_COLUMNS, decode_scores, long_columns
from harness.tracking.records import TrialRecord, flatten, iso_to_ms

ROLE_TAG = "harness.role"
SYNCED_TAG = "harness.synced"
RECORD_SHA_TAG = "harness.record_sha"
PARENT_TAG = "mlflow.parentRunId"
FINAL_PREFIX = "final/"
REPORT_ARTIFACTS = "report"  # the parent run's folder for the files of ``harness report``

MAX_PARAM_VALUE = 6000  # MLflow's MAX_PARAM_VAL_LENGTH
MAX_TAG_VALUE = 8000  # MLflow's MAX_TAG_VAL_LENGTH
PARAMS_PER_BATCH = 100  # MLflow's MAX_PARAMS_TAGS_PER_BATCH
METRICS_PER_BATCH = 1000  # MLflow's MAX_METRICS_PER_BATCH
_TRUNCATED = "...[truncated; full value in config.json]"


def mlflow_key(name: str) -> str:
    """``name`` as MLflow accepts a metric or param key: characters it rejects become ``_``
    (``eval/pass@1`` -> ``eval/pass_1``; ``^`` reads "hat", so ``eval/pass^1`` -> ``eval/pass_hat_1``
    stays apart from pass@1); valid names are unchanged."""
    try:
        from mlflow.utils.validation import (
            path_not_unique,
            validate_param_and_metric_name,
        )
    except ImportError:  # pragma: no cover - MLflow moved its validators
        return name
    if validate_param_and_metric_name(name) and not path_not_unique(name):
        return name
    cleaned = re.sub(r"[^\w\-. /]", "_", name.replace("^", "_hat_"))
    cleaned = "/".join(part if part not in {"", ".", ".."} else "_" for part in cleaned.split("/"))
    return cleaned[:250]


def param_items(spec: dict[str, Any]) -> dict[str, str]:
    """The flattened spec as MLflow params: strings, JSON for lists, cut to MLflow's limit."""
    out = {}
    for key, value in flatten(spec).items():
        if isinstance(value, (list, dict)):
            text = json.dumps(value, sort_keys=True)
        else:
            text = str(value)
        if len(text) > MAX_PARAM_VALUE:
            text = text[: MAX_PARAM_VALUE - len(_TRUNCATED)] + _TRUNCATED
        out[mlflow_key(key)[:250]] = text
    return out


def trial_tags(record: TrialRecord) -> dict[str, str]:
    """The tags of a trial's child run (everything but the completeness marker)."""
    tags = {
        ROLE_TAG: "trial",
        "study": record.study,
        "arm": record.arm,
        "seed": str(record.seed),
        "trial_id": record.trial_id,
        "config_hash": record.config_hash,
        "git_commit": record.git_commit or "unknown",
        "harness_version": record.harness_version,
        "harness_path": record.harness_path or "unknown",
        "device": record.device,
        "host": record.host,
        "status": record.status,
        "phase": record.phase,
        "attempt": str(record.attempt),
        "started_at": record.started_at,
        "finished_at": record.finished_at,
        RECORD_SHA_TAG: record.fingerprint(),
    }
    if record.git_commit:
        tags["mlflow.source.git.commit"] = record.git_commit
    if record.error:
        tags["error"] = record.error[:MAX_TAG_VALUE]
    return tags


def history_timestamps(record: TrialRecord) -> dict[int, int]:
    """A wall-clock time (ms) per history step: cumulative ``time/step_s`` when logged,
    else spread evenly between the trial's start and finish."""
    start, end = iso_to_ms(record.started_at), iso_to_ms(record.finished_at)
    steps = []
    for index, row in enumerate(record.history):
        try:
            steps.append(int(row.get("step", index)))
        except (TypeError, ValueError):
            steps.append(index)
    out: dict[int, int] = {}
    if record.history and all(isinstance(r.get("time/step_s"), (int, float)) for r in record.history):
        elapsed = 0.0
        for step, row in zip(steps, record.history):
            elapsed += float(row["time/step_s"])
            out.setdefault(step, start + int(elapsed * 1000))
        return out
    n = max(len(steps), 1)
    for index, step in enumerate(steps):
        out.setdefault(step, start + int((end - start) * (index + 1) / n))
    return out


def history_csv(record: TrialRecord) -> str:
    keys: list[str] = []
    for row in record.history:
        for key in row:
            if key not in keys:
                keys.append(key)
    if "step" in keys:
        keys.remove("step")
    keys = ["step", *keys]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(map(safe_cell, keys))  # a program names its metrics: no formula reaches a spreadsheet
    for index, row in enumerate(record.history):
        cells = {"step": row.get("step", index), **{k: v for k, v in row.items() if k != "step"}}
        writer.writerow(safe_cell(cells.get(key, "")) for key in keys)
    return buf.getvalue()


def prompt_scores_csv_gz(record: TrialRecord, where: str) -> bytes:
    """The record's per-prompt scores as gzipped CSV (floats in full: they read back exactly)."""
    cols = long_columns(decode_scores(record.prompt_scores, where))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(LONG_COLUMNS)
    writer.writerows(map(safe_cell, row) for row in zip(*(cols[c] for c in LONG_COLUMNS)))  # prompt ids: a dataset's
    return gzip.compress(buf.getvalue().encode("utf-8"), mtime=0)
