"""lm-evaluation-harness ``--log_samples --output_path DIR`` output, read into per-sample rows.

The format, as lm-eval 0.4.13 writes it (read in its source at that version; the functions named
here write the same in 0.4.9 to 0.4.12, the releases whose results name their ``lm_eval_version``):

* ``lm_eval/loggers/evaluation_tracker.py``, ``EvaluationTracker.save_results_aggregated``: one
  ``DIR/<model>/results_<time>.json`` per run, ``<model>`` being ``model_name`` made a folder name
  (``lm_eval/utils.py`` ``sanitize_model_name``: ``/work/m`` -> ``__work__m``). It holds the
  ``GeneralConfigTracker`` fields, among them ``model_name`` (``_get_model_name``: the ``peft=``,
  ``delta=``, ``pretrained=``, ... value of the model arguments), and ``lm_eval_version``
  (``lm_eval/loggers/utils.py`` ``add_env_info``), with what ``lm_eval/evaluator_utils.py``
  ``_to_eval_results`` assembles: ``results`` (per task, ``"<metric>,<filter>"`` -> the aggregate),
  ``configs`` (per task, its config: ``generation_kwargs``, ``filter_list``, ``metric_list``, ...),
  ``n-samples`` (per task, ``effective``: the questions scored), ``higher_is_better``; and
  ``config`` (``lm_eval/evaluator.py`` ``simple_evaluate``): the model arguments and the run's
  seeds (``random_seed``, ``numpy_seed``, ``torch_seed``, ``fewshot_seed``) and ``gen_kwargs``.
* ``EvaluationTracker.save_results_samples`` (called by ``lm_eval/_cli/run.py`` for each task in
  ``results["configs"]``): ``samples_<task>_<time>.jsonl`` beside it, the same ``<time>``. Each
  line is the ``example`` dict ``lm_eval/evaluator.py`` ``evaluate()`` builds: ``doc_id``,
  ``doc``, ``target``, ``arguments``, ``resps``, ``filtered_resps``, ``filter``, ``metrics`` (the
  metric names), ``doc_hash``, ``prompt_hash``, ``target_hash``, and each metric's value for the
  question under that filter.

One line per question and filter: ``evaluate()`` calls ``task.process_results(doc, [one filtered
answer per request])`` once per (question, filter), and ``ConfigurableTask.process_results``
(``lm_eval/api/task.py``) scores ``results[0]`` for ``generate_until``. A task's ``repeats`` are
all logged as raw answers (``resps``) but scored as one number per question and filter: the first
answer's (``take_first``, the default filter: "TODO: handle repeats in a more general way rather
than just discarding"), the majority vote's, or, for a filter that keeps them all, ``exact_match``'s
mean over them; lm-eval never logs a score per repeat.
Several samples per question are several runs of a sampling task with different seeds: each run
is one sample per question, numbered by the run's seeds. Runs of a greedy task, runs with the same
seeds, or runs whose task configs differ, are refused rather than counted as samples.

A ``samples_*.jsonl`` without its results file beside it (``results_<time>.json``, or
``<name>_<time>.json`` for ``--output_path <name>.json``) is refused: the model's name, the lm-eval
version and the metric keys are only in the results file. So is a results file without the
samples files of its tasks (a run without ``--log_samples``: no per-question scores).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.errors import ConfigError
from harness.evallogs.rows import LOG_COLUMNS, LogRows, benchmark_name

TOOL = "lm-evaluation-harness"
#: the versions read: 0.4.9 (the first to record lm_eval_version) to 0.4.13, and later 0.4 releases
LOWEST, BELOW = (0, 4, 9), (0, 5)
SUPPORTED = "0.4.9 to 0.4.x"

_TIME = r"(?P<time>\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?)"
#: ``results_<time>.json``, or ``<name>_<time>.json`` for ``--output_path <name>.json``
_RESULTS = re.compile(rf".+_{_TIME}\.json")
_SAMPLES = re.compile(rf"samples_(?P<task>.+)_{_TIME}\.jsonl")
#: how every line lm-eval writes to a samples file begins (``json.dumps`` of ``example``)
_SIGNATURE = b'{"doc_id": '
_SEEDS = ("random_seed", "numpy_seed", "torch_seed", "fewshot_seed")


@dataclass(frozen=True)
class _Task:
    """One task of one lm-eval run."""

    name: str
    scores: dict[str, object]  # lm-eval's "<metric>,<filter>" keys -> the aggregate, in its results' order
    config: dict  # the task's config as the results file holds it
    questions: int | None  # n-samples effective
    samples: Path

    @property
    def sampled(self) -> bool:
        """Whether the task samples its answers (lm-eval's HF model: greedy unless ``do_sample``,
        or a temperature with ``do_sample`` unset)."""
        generation = self.config.get("generation_kwargs") or {}
        do_sample = generation.get("do_sample")
        temperature = generation.get("temperature")
        warm = isinstance(temperature, (int, float)) and temperature > 0
        return do_sample is True or (do_sample is None and warm)


@dataclass(frozen=True)
class _Run:
    """One ``results_<time>.json``: what lm-eval ran, on which model, with which seeds."""

    path: Path
    model: str
    version: str
    seeds: tuple[int, ...]  # random, numpy, torch, fewshot (-1: not set)
    gen_kwargs: str  # the run's --gen_kwargs, as JSON
    tasks: tuple[_Task, ...]


def looks_like(path: Path) -> bool:
    """Whether ``path`` is lm-eval ``--log_samples`` output: a ``samples_<task>_<time>.jsonl``
    whose first bytes are an lm-eval sample line, a ``results_<time>.json`` with one beside it, or a
    folder holding such a samples file (at any depth)."""
    try:
        if path.is_dir():
            return any(_is_samples(found) for found in path.rglob("samples_*.jsonl"))
        if _RESULTS.fullmatch(path.name):
            return any(_is_samples(found) for found in path.parent.glob(f"samples_*_{_time(path)}.jsonl"))
        return _is_samples(path)
    except OSError:
        return False


def read(path: Path, score: str | None) -> LogRows:
    """Every scored question under ``path`` (an output folder, a model's folder, a results file
    or one samples file), one row per question and run of each task; the runs of a sampling task
    on the same model are its samples (numbered in the order of their seeds). ``score``: lm-eval's
    ``<metric>`` or ``<metric>,<filter>`` (None: each task's first, as its results list them)."""
    runs = [_load_run(results, only) for results, only in _results_files(path)]
    if not runs:
        raise ConfigError(f"{path}: no lm-eval results_<time>.json with samples files found")
    rows: list[tuple] = []
    keys: list[str] = []
    tasks_by_benchmark: dict[str, str] = {}
    for (model, task_name), entries in _group(runs).items():
        benchmark = benchmark_name(task_name)
        if tasks_by_benchmark.setdefault(benchmark, task_name) != task_name:
            raise ConfigError(
                f"tasks {tasks_by_benchmark[benchmark]!r} and {task_name!r} both make benchmark {benchmark!r}"
            )
        for sample, (run, task) in enumerate(entries):
            key = _score_key(task, score, run.path)
            if key not in keys:
                keys.append(key)
            for doc_id, value, where in _read_samples(task, key):
                rows.append((model, benchmark, doc_id, sample, value, where))
    versions = sorted({run.version for run in runs})
    return LogRows(
        frame=pd.DataFrame(rows, columns=list(LOG_COLUMNS)),
        tool=f"{TOOL} {', '.join(versions)}",
        score="; ".join(keys),
    )


def _is_samples(path: Path) -> bool:
    if not _SAMPLES.fullmatch(path.name) or not path.is_file():
        return False
    with path.open("rb") as handle:
        return handle.read(len(_SIGNATURE)) == _SIGNATURE


def _time(path: Path) -> str:
    match = _RESULTS.fullmatch(path.name) or _SAMPLES.fullmatch(path.name)
    return match["time"] if match else ""


def _results_files(path: Path) -> list[tuple[Path, str | None]]:
    """The results files to read under ``path``, each with the one task to read (None: all)."""
    if path.is_dir():
        samples = sorted(found for found in path.rglob("samples_*.jsonl") if _SAMPLES.fullmatch(found.name))
        named = {found for found in path.rglob("results_*.json") if _RESULTS.fullmatch(found.name)}
        return [(found, None) for found in sorted(named | {_results_beside(found) for found in samples})]
    if _RESULTS.fullmatch(path.name) and path.is_file():
        return [(path, None)]
    if _is_samples(path):
        return [(_results_beside(path), _SAMPLES.fullmatch(path.name)["task"])]
    raise ConfigError(
        f"{path}: not lm-eval --log_samples output (an output folder, a results_<time>.json or a "
        "samples_<task>_<time>.jsonl)"
    )


def _results_beside(samples: Path) -> Path:
    """The results file lm-eval wrote with ``samples``: the same time, in the same folder."""
    time = _time(samples)
    results = samples.with_name(f"results_{time}.json")
    if results.is_file():
        return results
    named = [found for found in samples.parent.glob(f"*_{time}.json") if _RESULTS.fullmatch(found.name)]
    if len(named) == 1:
        return named[0]
    raise ConfigError(
        f"{samples}: no {results.name} beside it (lm-eval writes both to one folder): the model's "
        "name, the lm-eval version and the metrics are only there; keep the two files together"
    )


def _load_run(path: Path, only: str | None) -> _Run:
    """The results file, checked: its version, model name, seeds, and each task's samples file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: cannot be read ({err})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not an lm-eval results file (not a JSON object)")
    version = _version(data.get("lm_eval_version"), path)
    model = data.get("model_name")
    if not isinstance(model, str) or not model:
        raise ConfigError(f"{path}: no model_name (the name lm-eval records for the evaluated model)")
    config = _field(data, "config", dict, path)
    seeds = tuple(_seed(config.get(name), name, path) for name in _SEEDS)
    results = _field(data, "results", dict, path)
    configs = _field(data, "configs", dict, path)
    counts = data.get("n-samples")
    names = sorted(configs) if only is None else [only]
    tasks = []
    for name in names:
        if not isinstance(configs.get(name), dict) or not isinstance(results.get(name), dict):
            raise ConfigError(f"{path}: task {name!r} is not in its results and configs")
        scores = {
            key: value
            for key, value in results[name].items()
            if "," in key and not key.split(",", 1)[0].endswith("_stderr")
        }
        samples = path.with_name(f"samples_{name}_{_time(path)}.jsonl")
        if not samples.is_file():
            raise ConfigError(
                f"{path}: no {samples.name} beside it (lm-eval writes the per-question scores only "
                "with --log_samples: run it with --log_samples)"
            )
        count = counts.get(name) if isinstance(counts, dict) else None
        effective = count.get("effective") if isinstance(count, dict) else None
        tasks.append(_Task(name, scores, configs[name], effective if isinstance(effective, int) else None, samples))
    gen_kwargs = json.dumps(config.get("gen_kwargs"), sort_keys=True)
    return _Run(path, model, version, seeds, gen_kwargs, tuple(tasks))


def _field(data: dict, name: str, kind: type, path: Path):
    value = data.get(name)
    if not isinstance(value, kind):
        raise ConfigError(f"{path}: no {name!r} ({kind.__name__}) in this lm-eval results file")
    return value


def _version(value, path: Path) -> str:
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", value) if isinstance(value, str) else None
    if match is None:
        raise ConfigError(f"{path}: no lm_eval_version (supported: lm-eval {SUPPORTED})")
    number = tuple(int(part) for part in match.groups())
    if not LOWEST <= number < BELOW:
        raise ConfigError(f"{path}: lm-eval {value} is not supported (supported: lm-eval {SUPPORTED})")
    return value


def _seed(value, name: str, path: Path) -> int:
    if value is None:
        return -1
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{path}: config.{name} is {value!r}, not a whole number")
    return value


def _group(runs: list[_Run]) -> dict[tuple[str, str], list[tuple[_Run, _Task]]]:
    """Each (model, task)'s runs, in sample order; several only for a sampling task whose runs
    differ in their seeds and agree on the task's config."""
    groups: dict[tuple[str, str], list[tuple[_Run, _Task]]] = {}
    for run in runs:
        for task in run.tasks:
            groups.setdefault((run.model, task.name), []).append((run, task))
    for (model, name), entries in groups.items():
        if len(entries) == 1:
            continue
        files = ", ".join(str(run.path) for run, _ in entries)
        first_run, first_task = entries[0]
        if not first_task.sampled:
            raise ConfigError(
                f"task {name!r} of {model} is in {len(entries)} results files ({files}) but answers greedily "
                "(generation_kwargs do_sample not true): its runs repeat one answer, they are not samples; keep one"
            )
        for run, task in entries[1:]:
            if task.config != first_task.config:
                raise ConfigError(
                    f"task {name!r} of {model} has different configs in {first_run.path} and {run.path}: "
                    "runs of different evaluations are not samples of one; read them apart"
                )
        entries.sort(key=lambda entry: (entry[0].seeds, entry[0].gen_kwargs))
        for (before, _), (after, _) in zip(entries, entries[1:]):
            if (before.seeds, before.gen_kwargs) == (after.seeds, after.gen_kwargs):
                raise ConfigError(
                    f"task {name!r} of {model} ran twice with the same seeds {before.seeds} "
                    f"({before.path}, {after.path}): the same samples twice; keep one"
                )
    return groups


def _score_key(task: _Task, score: str | None, where: Path) -> str:
    """lm-eval's ``<metric>,<filter>`` key for ``score`` in ``task``."""
    if not task.scores:
        raise ConfigError(f"{where}: task {task.name!r} has no per-question metric in its results")
    if score is None:
        return next(iter(task.scores))
    choices = [key for key in task.scores if score in (key, key.split(",", 1)[0])]
    if len(choices) == 1:
        return choices[0]
    if choices:
        raise ConfigError(
            f"{where}: task {task.name!r} has {score!r} under several filters; give one as metric,filter: "
            f"{', '.join(choices)}"
        )
    raise ConfigError(
        f"{where}: task {task.name!r} has no score {score!r}; its scores (metric,filter): {', '.join(task.scores)}"
    )


def _read_samples(task: _Task, key: str) -> list[tuple[str, float, str]]:
    """(prompt_id, value, file:line) of each question under ``key``'s filter, checked: one line per
    question, as many questions as the results file counts."""
    metric, filter_name = key.split(",", 1)
    found: list[tuple[str, float, str]] = []
    seen: dict[str, str] = {}
    with task.samples.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            where = f"{task.samples}:{number}"
            if not line.strip():
                continue
            try:
                sample = json.loads(line)
            except json.JSONDecodeError as err:
                raise ConfigError(f"{where}: not a JSON line ({err.msg})") from None
            if not isinstance(sample, dict) or not isinstance(sample.get("doc_id"), int):
                raise ConfigError(f"{where}: not an lm-eval sample (no integer doc_id)")
            if sample.get("filter") != filter_name:
                continue
            if metric not in sample:
                raise ConfigError(f"{where}: no {metric!r}; this line's metrics: {sample.get('metrics')}")
            prompt_id = str(sample["doc_id"])
            if prompt_id in seen:
                raise ConfigError(f"{where}: doc_id {prompt_id} again (first at {seen[prompt_id]})")
            seen[prompt_id] = where
            found.append((prompt_id, _value(sample[metric], metric, where), where))
    if task.questions is not None and len(found) != task.questions:
        raise ConfigError(
            f"{task.samples}: {len(found)} questions under filter {filter_name!r}, but its results file "
            f"counts {task.questions} (n-samples effective): the samples file is incomplete"
        )
    _check_mean(task, key, [value for _, value, _ in found])
    return found


def _check_mean(task: _Task, key: str, values: list[float]) -> None:
    """The questions' mean is the task's result where lm-eval aggregates the metric by ``mean``:
    a samples file that does not belong to its results file is refused."""
    metric = key.split(",", 1)[0]
    entries = [entry for entry in task.config.get("metric_list") or [] if isinstance(entry, dict)]
    aggregations = {entry.get("metric"): entry.get("aggregation") for entry in entries}
    reported = task.scores[key]
    if aggregations.get(metric) != "mean" or not isinstance(reported, (int, float)) or not values:
        return
    mean = sum(values) / len(values)
    if not math.isclose(mean, reported, rel_tol=1e-9, abs_tol=1e-12):
        raise ConfigError(
            f"{task.samples}: its {key} average {mean:.6g}, but its results file says {reported:.6g}: "
            "the samples file does not belong to that results file"
        )


def _value(raw, metric: str, where: str) -> float:
    """A per-question score as a float: lm-eval's booleans count 1/0 (its ``mean`` aggregation
    sums them as numbers); anything not a number (a corpus metric's pair, a string) is refused."""
    if isinstance(raw, (bool, int, float)):  # bool is an int: True -> 1.0
        value = float(raw)
        if math.isfinite(value):
            return value
        raise ConfigError(f"{where}: {metric} is {raw}, not a finite number")
    raise ConfigError(
        f"{where}: {metric} is {raw!r}, not a number per question (lm-eval aggregates it over the whole task)"
    )
