"""Results from an MLflow experiment: its finished runs as the tidy rows ``harness decide`` reads.

Each finished run is one arm x seed. Its arm and its seed come from a tag (or, failing that, a
param) of each run, by default ``arm`` and ``seed`` (as ``harness mirror-to-mlflow`` tags a
study's trials); ``--arm-key`` / ``--seed-key`` name others. Runs without the seed key (none of
them may have it then) are numbered as seeds 0, 1, ... in start-time order within each arm, and
the rows' source line and the report say so: such seeds are not the same training randomness in
every arm, so comparisons do not pair on them (unless the settings say ``seed_matched``).

A run's value is either

* one number per run: its metric ``final/<metric>`` (as ``harness mirror-to-mlflow`` logs it), else
  ``<metric>`` (the last value logged); or
* a per-prompt table the run logged as an artifact with ``mlflow.log_table(data, artifact_file=FILE)``
  (``table=FILE``), columns ``prompt_id`` and ``value``, optionally ``benchmark``, and ``sample``
  (an index 0, 1, ... with several scored samples per prompt; the rows keep it, one per sample,
  for the per-sample handling of :mod:`harness.tracking.tidy_results`). Other columns (inputs,
  outputs) are ignored.

The table layout is MLflow's own (mlflow 3.17, ``mlflow/tracking/client.py``,
``MlflowClient.log_table`` -> ``write_to_file``): a ``.json`` artifact is
``data.to_json(orient="split", index=False)``, i.e. ``{"columns": [...], "data": [[...], ...]}``
(an ``"index"`` list, as pandas' split layout with an index writes it, is ignored), and a
``.parquet`` artifact ``data.to_parquet(index=False)``; ``MlflowClient._read_from_file`` reads them
back the same way. A second ``log_table`` to the same file appends rows to it.

A study's parent run (tag ``harness.role`` = ``study``) and its tuning trials (tag ``phase`` =
``tune``) are skipped. Every problem is one line naming the run (and the artifact): an unreadable
store, a run without the arm key, a seed key on some runs only, a tag and a param of one key that
disagree, a missing metric or artifact, a table that is not MLflow's layout, lacks a column or
holds a value that is not a finite number, a prompt scored twice in one run's table.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.errors import ConfigError, HarnessError
from harness.tracking.results import Results
from harness.tracking.tidy_results import JudgeSettings, results_from_table

#: the tags (or params) of an MLflow run that name its arm and seed; ``harness mirror-to-mlflow`` sets both tags
ARM_KEY, SEED_KEY = "arm", "seed"
#: the columns of a per-prompt table: required, then optional
TABLE_COLUMNS = ("prompt_id", "value")
TABLE_OPTIONAL = ("benchmark", "sample")
#: the trial warning code of runs whose seeds were numbered by start time
SEEDS_NUMBERED = "seeds_numbered"


@dataclass(frozen=True)
class MlflowRows:
    """The tidy rows of an experiment (columns ``arm, seed, [benchmark], prompt_id, [sample],
    value, run``; without a table ``arm, seed, value, run``), the one line saying where they came
    from and how their seeds were found, and whether the seeds were numbered by start time."""

    rows: pd.DataFrame
    source: str
    seeds_numbered: bool


def _run_key(run, key: str, where: str) -> str | None:
    """The run's tag ``key``, else its param ``key`` (None: neither); both, disagreeing, is an error."""
    tag, param = run.data.tags.get(key), run.data.params.get(key)
    if tag is not None and param is not None and tag != param:
        raise ConfigError(
            f"{where}: run {run.info.run_id} has tag {key}={tag!r} but param {key}={param!r}; make them agree"
        )
    return tag if tag is not None else param


def _search(experiment: str, tracking_uri: str, where: str):
    """The client and the experiment's finished runs, in start-time order."""
    import mlflow

    try:
        client = mlflow.MlflowClient(tracking_uri=tracking_uri)
        found = client.get_experiment_by_name(experiment)
        if found is None:
            raise ConfigError(f"{where}: no such experiment")
        runs = client.search_runs([found.experiment_id], "attributes.status = 'FINISHED'", max_results=50_000)
    except HarnessError:
        raise
    except Exception as err:  # noqa: BLE001 - an unreachable or damaged store is one line
        raise ConfigError(f"{where}: cannot read it ({_short(err)})") from None
    return client, sorted(runs, key=lambda r: (r.info.start_time or 0, r.info.run_id))


def _short(err: BaseException) -> str:
    return f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"


def _split_layout(path: Path) -> tuple[list, list]:
    """The ``columns`` and ``data`` rows of a table file as ``log_table`` writes it (ValueError: not so)."""
    if path.suffix.lower() == ".parquet":
        frame = pd.read_parquet(path)
        return list(frame.columns), frame.astype(object).to_numpy().tolist()
    payload = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(payload, dict) or set(payload) - {"index"} != {"columns", "data"}:
        raise ValueError('not MLflow\'s table layout {"columns": [...], "data": [[...], ...]}')
    columns, data = payload["columns"], payload["data"]
    if not isinstance(columns, list) or not isinstance(data, list) or not all(isinstance(r, list) for r in data):
        raise ValueError('"columns" must be a list and "data" a list of rows (lists)')
    return columns, data


def _cell_error(column: str, value: Any) -> str | None:
    """What is wrong with one cell of a per-prompt table (None: nothing)."""
    if column == "value":
        if isinstance(value, (bool, np.bool_)):
            return None
        if not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
            return f"value {value!r} is not a finite number"
    elif column == "sample":
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
            return f"sample {value!r} is not an index 0, 1, ..."
    elif column == "prompt_id":
        named = isinstance(value, str) and value.strip()
        if isinstance(value, bool) or not (named or isinstance(value, numbers.Integral)):
            return f"prompt_id {value!r} is not a name or an integer"
    elif not (isinstance(value, str) and value.strip()):
        return f"{column} {value!r} is not a name"
    return None


def _table_frame(path: Path, problem: str) -> pd.DataFrame:
    """The checked per-prompt rows (``[benchmark], prompt_id, [sample], value``) of one run's table."""
    try:
        columns, data = _split_layout(path)
    except (ValueError, OSError) as err:
        raise ConfigError(f"{problem}: cannot read it as a table ({_short(err)})") from None
    if not all(isinstance(c, str) for c in columns) or len(set(columns)) != len(columns):
        raise ConfigError(f"{problem}: its columns must be distinct names; got {columns}")
    missing = [c for c in TABLE_COLUMNS if c not in columns]
    if missing:
        raise ConfigError(
            f"{problem}: no column {', '.join(missing)}; a per-prompt table has {', '.join(TABLE_COLUMNS)} "
            f"(optionally {', '.join(TABLE_OPTIONAL)}); columns there: {', '.join(columns) or 'none'}"
        )
    if not data:
        raise ConfigError(f"{problem}: no rows")
    kept = [c for c in ("benchmark", "prompt_id", "sample", "value") if c in columns]
    at = [columns.index(c) for c in kept]
    rows = []
    for i, row in enumerate(data, start=1):
        if len(row) != len(columns):
            raise ConfigError(f"{problem}: data row {i} has {len(row)} cells for {len(columns)} columns")
        cells = [row[j] for j in at]
        for column, value in zip(kept, cells):
            wrong = _cell_error(column, value)
            if wrong:
                raise ConfigError(f"{problem}: data row {i}: {wrong}")
        rows.append(cells)
    frame = pd.DataFrame(rows, columns=kept)
    frame["prompt_id"] = frame["prompt_id"].map(str)
    frame["value"] = frame["value"].astype(float)
    keys = [c for c in kept if c != "value"]
    repeated = np.flatnonzero(frame.duplicated(keys).to_numpy())
    if len(repeated):
        held = ", ".join(f"{k} {frame.loc[repeated[0], k]}" for k in keys)
        raise ConfigError(
            f"{problem}: data row {repeated[0] + 1} repeats {held}; one row per {', '.join(keys)}"
            + ("" if "sample" in keys else " (several samples per prompt: add a sample column 0, 1, ...)")
        )
    return frame


def _download(client, run_id: str, artifact: str, into: Path, problem: str) -> Path:
    """The run's artifact, downloaded into its own folder under ``into``."""
    try:
        return Path(client.download_artifacts(run_id, artifact, dst_path=str(into / run_id)))
    except Exception as err:  # noqa: BLE001 - a missing artifact, an unreachable artifact store
        raise ConfigError(
            f"{problem}: cannot download it ({_short(err)}); log it with mlflow.log_table(data, artifact_file=...)"
        ) from None


def read_mlflow(
    experiment: str,
    tracking_uri: str,
    metric: str,
    *,
    arm_key: str = ARM_KEY,
    seed_key: str = SEED_KEY,
    table: str | None = None,
) -> MlflowRows:
    """The tidy rows of an MLflow experiment's finished runs (see the module's docstring): one
    per run from its metric, or with ``table`` one per row of the per-prompt table each run
    logged as that artifact."""
    from harness.ground.urls import redact_url
    from harness.tracking.mlflow_layout import FINAL_PREFIX, ROLE_TAG, mlflow_key
    from harness.tracking.mlflow_mirror import quiet_mlflow

    quiet_mlflow()
    where = f"MLflow experiment {experiment!r} at {redact_url(tracking_uri)}"
    client, runs = _search(experiment, tracking_uri, where)
    runs = [r for r in runs if r.data.tags.get(ROLE_TAG) != "study" and r.data.tags.get("phase") != "tune"]
    if not runs:
        raise ConfigError(f"{where}: no finished runs")
    arms, seeds = [], []
    for run in runs:
        arm = _run_key(run, arm_key, where)
        if arm is None:
            raise ConfigError(
                f"{where}: run {run.info.run_id} has no {arm_key!r} tag or param; tag every run with its arm "
                "(or name the key that holds it with --arm-key)"
            )
        arms.append(arm)
        seeds.append(_run_key(run, seed_key, where))
    numbered = all(s is None for s in seeds)
    if numbered:
        count: dict[str, int] = {}
        for i, arm in enumerate(arms):
            seeds[i], count[arm] = count.get(arm, 0), count.get(arm, 0) + 1
    elif None in seeds:
        lacking = runs[seeds.index(None)].info.run_id
        having = next(r.info.run_id for r, s in zip(runs, seeds) if s is not None)
        raise ConfigError(
            f"{where}: run {lacking} has no {seed_key!r} tag or param but run {having} has; give every run its "
            "seed, or none (then each arm's runs are numbered as seeds 0, 1, ... in start-time order)"
        )
    parts = []
    with tempfile.TemporaryDirectory(prefix="harness-mlflow-") as scratch:
        for run, arm, seed in zip(runs, arms, seeds):
            run_id = run.info.run_id
            named = f"{where}: run {run_id} (arm {arm}, seed {seed})"
            if table is None:
                metrics = run.data.metrics
                value = metrics.get(mlflow_key(FINAL_PREFIX + metric), metrics.get(mlflow_key(metric)))
                if value is None:
                    raise ConfigError(f"{named} logged no metric {metric!r}")
                parts.append(pd.DataFrame({"arm": [arm], "seed": [seed], "value": [value], "run": [run_id]}))
                continue
            problem = f"{named}, artifact {table}"
            rows = _table_frame(_download(client, run_id, table, Path(scratch), problem), problem)
            if parts and set(rows.columns) != set(parts[0].columns) - {"arm", "seed", "run"}:
                first = parts[0]["run"].iloc[0]
                raise ConfigError(
                    f"{problem}: columns {', '.join(rows.columns)}, but run {first}'s table has "
                    f"{', '.join(c for c in parts[0].columns if c not in ('arm', 'seed', 'run'))}; "
                    "every run's table needs the same columns"
                )
            parts.append(rows.assign(arm=arm, seed=seed, run=run_id))
    frame = pd.concat(parts, ignore_index=True)
    order = ["arm", "seed", *(c for c in ("benchmark", "prompt_id", "sample") if c in frame), "value", "run"]
    how = (
        f"no run has a {seed_key!r} tag or param, so each arm's runs are numbered as seeds 0, 1, ... "
        "in start-time order (not matched across arms)"
        if numbered
        else f"seeds from the {seed_key!r} tag or param"
    )
    values = f"per-prompt table {table}" if table else f"metric {metric}"
    source = f"{where}: {len(runs)} runs, arms from the {arm_key!r} tag or param, {how}; values from {values}"
    return MlflowRows(frame[order], source, numbered)


def results_of(read: MlflowRows, experiment: str, settings: JudgeSettings, *, seed_key: str = SEED_KEY) -> Results:
    """``results_from_table`` of the runs ``read_mlflow`` read. Its source line is the results'
    ``meta.source``; seeds numbered by start time are not seed-matched (unless
    ``settings.seed_matched`` says so) and each such trial carries a ``seeds_numbered`` warning,
    which the report's header states."""
    if read.seeds_numbered and settings.seed_matched is None:
        settings = settings.model_copy(update={"seed_matched": False})
    results = results_from_table(read.rows, settings, where=f"MLflow experiment {experiment!r}", unit="run")
    if read.seeds_numbered:
        results.trials["warnings"] = (
            f"{SEEDS_NUMBERED}: the MLflow runs have no {seed_key!r} tag or param, so each arm's runs are "
            "numbered as seeds 0, 1, ... in start-time order"
        )
    return dataclasses.replace(results, meta=dataclasses.replace(results.meta, source=read.source))


def load_mlflow(
    experiment: str,
    tracking_uri: str,
    settings: JudgeSettings,
    *,
    arm_key: str = ARM_KEY,
    seed_key: str = SEED_KEY,
    table: str | None = None,
) -> Results:
    """The ``Results`` of an MLflow experiment's runs: :func:`read_mlflow`, then :func:`results_of`."""
    read = read_mlflow(experiment, tracking_uri, settings.metric, arm_key=arm_key, seed_key=seed_key, table=table)
    return results_of(read, experiment, settings, seed_key=seed_key)
