"""lighteval details (``--save-details``): one row per question and task, the score lighteval gave it.

The format, at lighteval 0.13.0. ``EvaluationTracker.save`` (``lighteval/logging/evaluation_tracker.py``)
writes, for a model and a run started at ``<timestamp>``:

* ``results/<model>/results_<timestamp>.json`` (``save_results``): ``config_general.model_name`` the
  model's name as given (``model_name=`` of the model args), aggregated scores, the tasks' configs.
  It records no lighteval version (``lighteval_sha`` is ``"?"`` outside a git checkout) and its
  ``versions`` stays empty (``VersionsLogger.log`` is never called);
* ``details/<model>/<timestamp>/details_<task>_<timestamp>.parquet`` (``save_details``), ``<model>``
  being ``model_name.strip("/")`` in both paths: one row per question, ``Dataset.from_list`` of
  ``DetailsLogger.Detail`` (``lighteval/logging/info_loggers.py``), columns ``doc`` (the ``Doc`` of
  ``lighteval/tasks/requests.py``: ``id``, ``task_name``, ``query``, ``choices``, ``num_samples``, ...),
  ``metric`` (the question's score under each of the task's metrics, a name -> number struct, in the
  task's metric order: ``Pipeline._compute_metrics`` and ``lighteval.metrics.apply_metric``) and
  ``model_response`` (``text``: the answers, ``num_samples`` of them).

Several samples per question: a sampling metric (``pass@k``, ``avg@n``, ``maj@n``, with its ``n``) makes
lighteval generate ``Doc.num_samples`` answers per question (``LightevalTask.__init__``/``get_docs``,
the transformers backend's ``num_return_sequences``), all in the one ``Detail``, and scores them
together: ``PassAtK.compute``, ``AvgAtN.compute`` and ``MajAtN.compute``
(``lighteval/metrics/metrics_sample.py``) score each answer inside and return one number per question
(pass@k by Chen et al.'s estimator, so ``pass@k:k=1&n=4`` is the question's fraction of correct
answers). The per-answer scores are not logged, so here every row is sample 0 and its value is the
question's score under that metric (``--score 'pass@k:k=4&n=4'`` judges lighteval's pass@4).

A row: ``run`` = ``config_general.model_name`` of the results file beside the details (else the
``<model>`` part of the details path), ``benchmark`` = the task's name (``addition|0``) made a
benchmark name, ``prompt_id`` = ``doc.id``, ``sample`` = 0, ``value`` = the metric's number.
``where`` = ``<file>:<N>``, the question's row (from 1) in the details file.
``doc.id`` is the question's index in the task's evaluation split (``LightevalTask._get_docs_from_split``
sets ``str(ix)``), the same in every run of the task on the same data; the rows themselves come in a
shuffled order. The score read is the one named, else each task's first metric.

This layout (``doc``, ``metric``, ``model_response``) is lighteval's since 0.11; lighteval 0.10 and
earlier wrote one column per field (``example``, ``predictions``, ``metrics``, ``specifics``, ...),
refused here as such.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.errors import ConfigError, one_line, squeeze
from harness.evallogs.rows import LOG_COLUMNS, LogRows, benchmark_name

TOOL = "lighteval 0.11+"
#: the columns of a details file as lighteval 0.11 to 0.13.0 write it
DETAILS_COLUMNS = ("doc", "metric", "model_response")
#: columns only lighteval 0.10 and earlier wrote (one per field of its older ``Detail``)
OLD_DETAILS_COLUMNS = ("example", "predictions", "metrics")
# details_<task>_<timestamp>.parquet, the timestamp being datetime.now().isoformat() with ":" made "-"
_DETAILS_NAME = re.compile(r"^details_(?P<task>.+)_(?P<stamp>\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?)\.parquet$")


@dataclass(frozen=True)
class DetailsFile:
    """One details file: where it is, the task it holds and the run (model) it belongs to."""

    path: Path
    task: str
    run: str


def looks_like(path: Path) -> bool:
    """Whether ``path`` is a lighteval details file (``details_<task>_<timestamp>.parquet``) or a folder
    holding one (lighteval's output folder, or a part of it)."""
    try:
        if path.is_dir():
            return next(_details_under(path), None) is not None
        return _DETAILS_NAME.match(path.name) is not None and path.is_file()
    except OSError:
        return False


def read(path: Path, score: str | None) -> LogRows:
    """Every scored question in the lighteval details at ``path`` (a details file, or a folder).

    ``score``: the metric read, which every details file must have (None: each task's first metric)."""
    files = [_details_file(file, match) for file, match in _details_paths(path)]
    rows: list[tuple[Any, ...]] = []
    first_seen: dict[tuple[str, str, str], str] = {}
    fields: dict[str, str] = {}  # benchmark -> the metric read
    for file in files:
        table = _read_table(file.path)
        field = score if score is not None else _first_metric(file.path, table)
        benchmark = benchmark_name(file.task)
        if fields.setdefault(benchmark, field) != field:
            raise ConfigError(
                f"{file.path}: task {file.task!r} has first metric {field!r} here but {fields[benchmark]!r} in "
                "another run; name the metric to read with --score"
            )
        for row in _question_rows(file, benchmark, table, field):
            _refuse_repeat(first_seen, row)
            rows.append(row)
    frame = pd.DataFrame(rows, columns=list(LOG_COLUMNS))
    return LogRows(frame=frame, tool=TOOL, score=_score_label(fields))


def _details_paths(path: Path) -> list[tuple[Path, re.Match[str]]]:
    """The details file at ``path``, or the details files under the folder ``path`` (in path order),
    each with its name's parts."""
    if path.is_dir():
        files = sorted(_details_under(path), key=lambda found: found[0])
    else:
        match = _DETAILS_NAME.match(path.name)
        files = [(path, match)] if match and path.is_file() else []
    if not files:
        raise ConfigError(
            f"{path}: no lighteval details here (details/<model>/<timestamp>/details_<task>_<timestamp>.parquet, "
            "as lighteval --save-details writes them)"
        )
    return files


def _details_under(folder: Path) -> Iterator[tuple[Path, re.Match[str]]]:
    for file in folder.rglob("details_*.parquet"):
        match = _DETAILS_NAME.match(file.name)
        if match and file.is_file():
            yield file, match


def _details_file(path: Path, match: re.Match[str]) -> DetailsFile:
    """The task (from the file's name) and the run of a details file."""
    return DetailsFile(path=path, task=match.group("task"), run=_run_name(path, match.group("stamp")))


def _run_name(path: Path, stamp: str) -> str:
    """The model name lighteval recorded for the run that wrote ``path``.

    lighteval puts the details at ``<out>/details/<model>/<stamp>/`` and the results at
    ``<out>/results/<model>/results_<stamp>.json`` (``<model>`` = ``model_name.strip("/")``, possibly with
    ``/`` in it): the results file's ``config_general.model_name`` is the name as given; without that
    file (moved, or written elsewhere by --results-path-template) the ``<model>`` part of the path."""
    stamp_folder = path.parent
    if stamp_folder.name != stamp:
        raise ConfigError(
            f"{path}: not in its run's folder (lighteval writes details/<model>/{stamp}/{path.name}), so its "
            "model is unknown; read it where lighteval wrote it"
        )
    model_folder = stamp_folder.parent
    details_roots = [folder for folder in model_folder.parents if folder.name == "details"]
    if model_folder.name == "details" or not details_roots:
        raise ConfigError(
            f"{path}: not under lighteval's details/<model>/<timestamp>/ folders, so its model is unknown; "
            "read it where lighteval wrote it"
        )
    for root in details_roots:  # nearest first; a model name may itself hold a folder named details
        model = model_folder.relative_to(root).as_posix()
        results = root.parent / "results" / model / f"results_{stamp}.json"
        if results.is_file():
            return _recorded_model_name(results, model)
    return model_folder.relative_to(details_roots[0]).as_posix()


def _recorded_model_name(results: Path, model: str) -> str:
    """``config_general.model_name`` of a results file, checked to be the run's (``model`` in its path)."""
    try:
        name = json.loads(results.read_text(encoding="utf-8"))["config_general"]["model_name"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
        raise ConfigError(
            f"{results}: not a readable lighteval results file ({one_line(err, 200)}); it should hold "
            "config_general.model_name: write it again or move it away"
        ) from err
    if not isinstance(name, str) or name.strip("/") != model:
        raise ConfigError(
            f"{results}: config_general.model_name is {squeeze(repr(name), 120)}, not the model {model!r} its "
            "path names; is it another run's file?"
        )
    return name


def _read_table(path: Path) -> pa.Table:
    """The ``doc`` and ``metric`` columns of a details file, refused when it is not lighteval 0.11+'s."""
    try:
        columns = pq.read_schema(path).names
    except (OSError, pa.ArrowException) as err:
        raise _unreadable(path, err) from err
    if not set(DETAILS_COLUMNS) <= set(columns):
        raise ConfigError(_not_details(path, columns))
    try:
        return pq.read_table(path, columns=["doc", "metric"])
    except (OSError, pa.ArrowException) as err:
        raise _unreadable(path, err) from err


def _unreadable(path: Path, err: Exception) -> ConfigError:
    return ConfigError(
        f"{path}: not a readable parquet file ({one_line(err, 200)}); is it cut short? Write it again "
        "(lighteval --save-details) or leave it out"
    )


def _not_details(path: Path, columns: list[str]) -> str:
    """Why a parquet file named like details is refused: an older lighteval's, or not lighteval's."""
    shown = ", ".join(columns[:8]) + (", ..." if len(columns) > 8 else "")
    if set(OLD_DETAILS_COLUMNS) <= set(columns):
        return (
            f"{path}: details written by lighteval 0.10 or earlier (columns {shown}), which are not supported: "
            f"this harness reads the details of lighteval 0.11 and later (columns {', '.join(DETAILS_COLUMNS)}; "
            "made with 0.13.0); evaluate again with lighteval 0.13"
        )
    return (
        f"{path}: not lighteval details (columns {shown}; lighteval 0.11 and later write {', '.join(DETAILS_COLUMNS)})"
    )


def _metric_names(table: pa.Table) -> list[str]:
    kind = table.schema.field("metric").type
    return [kind.field(i).name for i in range(kind.num_fields)] if pa.types.is_struct(kind) else []


def _first_metric(path: Path, table: pa.Table) -> str:
    names = _metric_names(table)
    if not names:
        raise ConfigError(f"{path}: no metric recorded for its questions; nothing to judge")
    return names[0]


def _question_rows(file: DetailsFile, benchmark: str, table: pa.Table, field: str) -> Iterator[tuple[Any, ...]]:
    """``(run, benchmark, prompt_id, sample, value, where)`` for each question of a details file."""
    names = _metric_names(table)
    if field not in names:
        available = ", ".join(repr(name) for name in names) or "none"
        raise ConfigError(
            f"{file.path}: no metric {field!r} for task {file.task!r} (its metrics: {available}); name one with "
            "--score, or read the files of the tasks that have it (a folder per setting)"
        )
    docs = table.column("doc").to_pylist()
    values = pc.struct_field(table.column("metric"), field).to_pylist()
    for number, (doc, value) in enumerate(zip(docs, values), start=1):
        where = f"{file.path}:{number}"
        yield file.run, benchmark, _prompt_id(doc, where), 0, _score_value(value, field, where, names), where


def _prompt_id(doc: Any, where: str) -> str:
    prompt_id = doc.get("id") if isinstance(doc, dict) else None
    if not isinstance(prompt_id, str) or not prompt_id:
        raise ConfigError(f"{where}: the question has no doc.id (lighteval sets it to the question's index)")
    return prompt_id


def _score_value(value: Any, field: str, where: str, names: list[str]) -> float:
    """The metric's value as a float (True/False as 1/0, as lighteval's own means count them)."""
    if isinstance(value, bool | int | float):
        number = float(value)
        if not math.isfinite(number):
            raise ConfigError(f"{where}: metric {field!r} is {number}, not a finite number")
        return number
    if value is None:
        raise ConfigError(f"{where}: metric {field!r} has no value for this question")
    raise ConfigError(
        f"{where}: metric {field!r} is {squeeze(repr(value), 120)}, not one number per question (a corpus-level "
        f"metric keeps its inputs here, scored only over the whole task); name a per-question one with --score "
        f"(the metrics: {', '.join(repr(name) for name in names)})"
    )


def _refuse_repeat(first_seen: dict[tuple[str, str, str], str], row: tuple[Any, ...]) -> None:
    """The same model's same question of the same task twice (two runs into one output folder, or a
    task evaluated on two splits, whose doc.ids both count from 0) would count it twice."""
    run, benchmark, prompt_id, _sample, _value, where = row
    key = (run, benchmark, prompt_id)
    if key not in first_seen:
        first_seen[key] = where
        return
    raise ConfigError(
        f"{where} repeats {first_seen[key]}: question {prompt_id!r} of task {benchmark!r} for model {run!r} "
        "twice (two runs of the model in one output folder, or a task on two splits, whose doc.ids both count "
        "from 0); read one run's details (lighteval keeps each run in details/<model>/<timestamp>/)"
    )


def _score_label(fields: dict[str, str]) -> str:
    """The metric read: its name, or each benchmark's where the tasks' first metrics differ."""
    if len(set(fields.values())) <= 1:
        return next(iter(fields.values()), "")
    return "; ".join(f"{benchmark}: {field}" for benchmark, field in fields.items())
