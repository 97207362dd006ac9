"""Inspect AI logs (``.eval`` / ``.json``), read with inspect-ai's own reader: one row per sample and epoch.

The format, at inspect-ai 0.3.285: ``inspect_ai/log/_log.py`` defines the log (``EvalLog``:
``version``, ``status``, ``eval`` with ``task``, ``model`` and ``packages``, ``results.scores``;
``EvalSample``: ``id``, ``epoch``, ``scores`` by scorer name, ``error``, ``invalidation``);
``inspect_ai/log/_recorders/eval.py`` (``EvalRecorder``) writes a ``.eval`` log, a zip of
``header.json`` (``_journal/start.json`` until the eval ends) and one ``samples/<id>_epoch_<n>.json``
per sample; ``inspect_ai/log/_recorders/json.py`` (``JSONRecorder``) writes a ``.json`` log, one
object whose first keys are ``version``, ``status`` and ``eval``. Both are read back by
``inspect_ai.log.read_eval_log`` (the header alone first, to refuse a log before its samples are
read), the supported way; inspect-ai is an optional dependency (``harness[inspect]``), imported
only here.

A row: ``run`` = ``eval.model`` as recorded (``hf/smollm2``), ``benchmark`` = the task's name,
``prompt_id`` = ``str(sample.id)``, ``sample`` = ``epoch - 1`` (``--epochs 4``: samples 0-3),
``value`` = the score's value made a float by ``inspect_ai.scorer.value_to_float``
(``inspect_ai/scorer/_metric.py``), the mapping Inspect's own metrics use: ``C`` 1, ``P`` 0.5,
``I`` and ``N`` 0, yes/true 1, no/false 0, numbers as they are. The score read is the one named,
else the task's first scorer (``results.scores[0]``, as Inspect itself names a lone scorer).

Only complete logs are read (``status`` success): an errored or cancelled eval may lack any of
its samples, and which ones went missing is not chance (the slow, the long), so its rows would
bias the comparison; ``inspect eval-retry`` completes such a log. A sample that ended in an error,
or was invalidated, has no score to judge, and is refused the same way.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pandas as pd

from harness.errors import ConfigError, one_line, squeeze
from harness.evallogs.rows import LOG_COLUMNS, LogRows, benchmark_name

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample

TOOL = "inspect-ai"
#: the log format versions read (``EvalLog.version``): what inspect-ai 0.3.285 writes
SUPPORTED_LOG_VERSIONS = (2,)
INSTALL_HINT = "install harness[inspect] (inspect-ai) to read Inspect logs"

# a .json Inspect log starts with its version, status and eval (EvalLog's field order is the format)
_JSON_HEAD = re.compile(rb'\A\s*\{\s*"version"\s*:\s*(\d+)\s*,\s*"status"\s*:\s*"\w+"\s*,\s*"eval"\s*:')
_HEAD_BYTES = 1024
# the parts of a sample no score needs, left unread in a .eval log (inspect-ai reads a .json log whole)
_UNREAD_SAMPLE_FIELDS = {"messages", "events", "store", "attachments"}
_AT_LINE = re.compile(r"\bat line (\d+)\b")
_WORDS_TO_FLOAT = ("yes", "no", "true", "false")  # value_to_float's words, matched in lower case


def looks_like(path: Path) -> bool:
    """Whether ``path`` is an Inspect log (a ``.eval`` file, or a ``.json`` file that starts as one)
    or a folder holding one."""
    if path.is_dir():
        return next(_logs_under(path), None) is not None
    return _is_log_file(path)


def read(path: Path, score: str | None) -> LogRows:
    """Every scored sample of the Inspect logs at ``path`` (a log, or a folder of them).

    ``score``: the scorer whose values are read (None: each log's first scorer, which must then be
    the same in every log)."""
    files = _log_files(path)
    log_api, scorer_api = _inspect_modules()
    headers = [_checked_header(file, log_api) for file in files]
    field = score if score is not None else _first_scorer(files, headers)
    rows: list[tuple[Any, ...]] = []
    first_seen: dict[tuple[str, str, str, int], str] = {}
    for file in files:
        log = _read_log(file, log_api, header_only=False)
        for row in _sample_rows(file, log, field, scorer_api):
            _refuse_repeat(first_seen, row)
            rows.append(row)
    versions = sorted({header.eval.packages.get("inspect_ai", "unknown") for header in headers})
    frame = pd.DataFrame(rows, columns=list(LOG_COLUMNS))
    return LogRows(frame=frame, tool=f"{TOOL} {', '.join(versions)}", score=field)


def _log_files(path: Path) -> list[Path]:
    """The log at ``path``, or the logs under the folder ``path`` (in name order)."""
    files = sorted(_logs_under(path)) if path.is_dir() else [path] if _is_log_file(path) else []
    if not files:
        raise ConfigError(
            f"{path}: no Inspect log here (a .eval file, or a .json file that starts with "
            '"version", "status" and "eval", as inspect eval --log-format json writes it)'
        )
    return files


def _logs_under(folder: Path) -> Iterator[Path]:
    for file in folder.rglob("*"):
        if _is_log_file(file):
            yield file


def _is_log_file(path: Path) -> bool:
    """A ``.eval`` file (no other tool writes one: a damaged one is still this reader's, to say so),
    or a ``.json`` file whose first bytes are an Inspect log's."""
    if path.suffix == ".eval":
        return path.is_file()
    return path.suffix == ".json" and _json_log_version(path) is not None


def _json_log_version(path: Path) -> int | None:
    """The format version a ``.json`` Inspect log starts with (None: not an Inspect log)."""
    try:
        with path.open("rb") as handle:
            match = _JSON_HEAD.match(handle.read(_HEAD_BYTES))
    except OSError:
        return None
    return int(match.group(1)) if match else None


def _inspect_modules() -> tuple[ModuleType, ModuleType]:
    try:
        import inspect_ai.log as log_api
        import inspect_ai.scorer as scorer_api
    except ImportError as err:
        raise ConfigError(INSTALL_HINT) from err
    return log_api, scorer_api


def _read_log(file: Path, log_api: ModuleType, header_only: bool) -> EvalLog:
    """``read_eval_log``, its failure as one line naming the file (and the line, where the JSON
    parser gave one)."""
    try:
        return log_api.read_eval_log(
            str(file),
            header_only=header_only,
            exclude_fields=None if header_only else _UNREAD_SAMPLE_FIELDS,
        )
    except Exception as err:  # inspect-ai's reader raises many kinds: each is one line here
        line = _AT_LINE.search(str(err))
        where = f"{file}:{line.group(1)}" if line and file.suffix == ".json" else str(file)
        raise ConfigError(
            f"{where}: inspect-ai could not read this Inspect log ({one_line(err, 300)}); "
            "is it cut short or damaged? Write it again (inspect eval) or leave it out"
        ) from err


def _checked_header(file: Path, log_api: ModuleType) -> EvalLog:
    """The log's header, refused when its format version is not one read here or the eval did not
    finish (status other than success)."""
    # a .json log's version is taken from its first bytes, before inspect-ai reads it: inspect-ai
    # refuses a newer one in words of its own and records an older one as the current one
    if file.suffix == ".json":
        _check_version(file, _json_log_version(file))
    header = _read_log(file, log_api, header_only=True)
    if file.suffix == ".eval":
        _check_version(file, header.version)
    if header.status != "success":
        raise ConfigError(f"{file}: {_unfinished(header)}")
    return header


def _check_version(file: Path, version: int | None) -> None:
    if version not in SUPPORTED_LOG_VERSIONS:
        supported = ", ".join(str(v) for v in SUPPORTED_LOG_VERSIONS)
        raise ConfigError(
            f"{file}: Inspect log format version {version} is not supported (this harness reads version "
            f"{supported}, which inspect-ai 0.3.285 writes); convert it with a matching inspect-ai "
            "(inspect log convert) or leave it out"
        )


def _unfinished(header: EvalLog) -> str:
    """Why a log whose status is not success is refused, and what to do."""
    what = {
        "error": "ended in an error" + (f" ({squeeze(header.error.message, 200)})" if header.error else ""),
        "cancelled": "was cancelled",
        "started": "is unfinished (status started: still running, or stopped before it closed the log)",
    }.get(header.status, f"has status {header.status!r}")
    return (
        f"this Inspect eval {what}, so it may lack some of its samples; only complete logs (status success) "
        "are read: complete it with inspect eval-retry, or leave it out"
    )


def _first_scorer(files: list[Path], headers: list[EvalLog]) -> str:
    """The first scorer of each log, which must be the same in all of them."""
    firsts = {}
    for file, header in zip(files, headers):
        scores = header.results.scores if header.results else []
        if not scores:
            raise ConfigError(f"{file}: this Inspect log has no scores (no scorer ran); score it with inspect score")
        firsts.setdefault(scores[0].scorer, file)
    if len(firsts) > 1:
        listed = "; ".join(f"{name!r} in {file}" for name, file in firsts.items())
        raise ConfigError(f"the Inspect logs' first scorers differ ({listed}): name the one to read with --score")
    return next(iter(firsts))


def _sample_rows(file: Path, log: EvalLog, field: str, scorer_api: ModuleType) -> Iterator[tuple[Any, ...]]:
    """``(run, benchmark, prompt_id, sample, value, where)`` for each of the log's samples."""
    run, benchmark = log.eval.model, benchmark_name(log.eval.task)
    to_float = scorer_api.value_to_float()
    for sample in log.samples or []:
        where = f"{file} sample {sample.id} epoch {sample.epoch}"
        value = _score_value(sample, field, where, scorer_api)
        number = to_float(value)
        if not math.isfinite(number):
            raise ConfigError(f"{where}: score {field!r} is {number}, not a finite number")
        yield run, benchmark, str(sample.id), sample.epoch - 1, number, where


def _score_value(sample: EvalSample, field: str, where: str, scorer_api: ModuleType) -> Any:
    """The sample's value of score ``field``, refused where the sample has none to judge or it is
    not one value ``value_to_float`` maps to a number (it would map it to 0 with a warning)."""
    if sample.error is not None:
        raise ConfigError(
            f"{where}: the sample ended in an error ({squeeze(sample.error.message, 200)}), so it has no score; "
            "run the eval again until every sample is scored, or leave this log out"
        )
    if sample.invalidation is not None:
        raise ConfigError(f"{where}: the sample was invalidated, so its score does not count; leave this log out")
    scores = sample.scores or {}
    if field not in scores:
        available = ", ".join(repr(name) for name in scores) or "none"
        raise ConfigError(f"{where}: no score {field!r} (its scores: {available}); name one with --score")
    value = scores[field].value
    marks = (scorer_api.CORRECT, scorer_api.INCORRECT, scorer_api.PARTIAL, scorer_api.NOANSWER)
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, str) and (value in marks or value.lower() in _WORDS_TO_FLOAT or _is_number(value)):
        return value
    raise ConfigError(
        f"{where}: score {field!r} is {squeeze(repr(value), 120)}, not one value Inspect maps to a number "
        f"({', '.join(marks)}, yes/no, true/false, or a number)"
    )


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _refuse_repeat(first_seen: dict[tuple[str, str, str, int], str], row: tuple[Any, ...]) -> None:
    """Two logs holding the same model's same sample of the same task would count it twice."""
    run, benchmark, prompt_id, sample, _value, where = row
    key = (run, benchmark, prompt_id, sample)
    if key not in first_seen:
        first_seen[key] = where
        return
    raise ConfigError(
        f"{where} repeats {first_seen[key]}: both logs hold model {run!r} on task {benchmark!r}; read one of "
        "them (e.g. a folder per sampling setting), or name the models apart (inspect eval --model hf/NAME)"
    )
