"""Results from anywhere: a tidy table (CSV or Parquet, or the rows :mod:`harness.tracking.mlflow_results`
reads from an MLflow experiment) as a ``Results``.

A tidy table has one row per run (``arm``, ``seed``, ``value``) or one row per run and held-out
prompt (``prompt_id`` too), optionally a ``benchmark`` column naming several held-out sets, and
with sampled evaluation ``samples`` (k) and ``sample_var`` (the ddof=1 variance of a prompt's k
scores). :func:`results_from_table` checks it (every problem is one line naming the row) and
builds the frames a study's results have, in the shapes ``harness.decide.analysis.analyze``
reads, so ``harness decide`` gives the same report and verdicts as a study:

* ``trials``: one completed trial per (arm, seed), ``trial_id`` ``<arm>-s<seed>``, the metric as a
  final value (with per-prompt rows, the mean over the run's prompts, as an evaluation reports it);
* ``prompts``: the long per-prompt frame (step 0), with ``<metric>.sample_var`` / ``.samples`` rows
  when the table has them;
* ``meta``: the settings (:class:`JudgeSettings`) as a study's meta, every arm against the control.

A ``benchmark`` column names held-out sets. The name ``(task)`` (``TASK_SET``, which no
benchmark can have) marks a study's own task's held-out set; every other name is a benchmark, whose
metric is namespaced ``eval/<benchmark>/<leaf>`` (``leaf``: the last part of ``metric``, e.g.
``accuracy``), while the ``(task)`` rows keep the plain metric (``eval/<leaf>``). With ``(task)``
rows and a benchmark, or with two benchmarks, ``meta.benchmarks`` lists the name, metric and
min_effect of every benchmark for the per-benchmark and overall verdicts, as a study's does.
The primary metric (the report's main verdicts) is:

* the benchmark ``metric`` names, when it is one's (``--metric eval/math500/accuracy``);
* else the ``(task)`` rows' (a study's tidy table judges as the study: its primary verdicts on its
  own task's held-out set, the benchmarks beside);
* else the first benchmark's.

One benchmark (or none, or only ``(task)``) is a plain single-metric study. :func:`tidy_frame`
writes a study's results as such a table.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import Field, ValidationError, field_validator

from harness.engine.spec import BENCHMARK_NAME, OVERALL
from harness.errors import ConfigError, HarnessError
from harness.ground.spreadsheet import plain_frame
from harness.ground.strict import StrictModel
from harness.study.field_errors import format_validation_error
from harness.study.schema import PRIMARY_TESTS
from harness.tracking.prompt_scores import SAMPLE_VAR_SUFFIX, SAMPLES_SUFFIX, samples_metric
from harness.tracking.results import CURVE_COLUMNS, PROMPT_COLUMNS, Results
from harness.tracking.study_meta import BenchmarkMeta, StudyMeta
from harness.tracking.tidy_samples import number_repeats, pass_leaf, per_prompt, sample_counts

REQUIRED_COLUMNS = ("arm", "value")
OPTIONAL_COLUMNS = ("seed", "benchmark", "prompt_id", "sample", "samples", "sample_var")
#: the seed of every row of a table without a seed column (one run per arm)
NO_SEED = 0
#: the column that names each row's place in its file (``FILE line 7``), where rows say it themselves
PLACE_COLUMN = "where"
#: tidy tables ``read_table`` reads
TABLE_SUFFIXES = (".csv", ".parquet", ".jsonl")
#: the ``benchmark`` of a study's own task's held-out set (not a valid benchmark name: no clash)
TASK_SET = "(task)"


class JudgeSettings(StrictModel):
    """What a judged table is compared on: the pre-registration a study file would hold."""

    name: str = Field("judged", min_length=1, description="name of the report (its folder: reports/<name>/)")
    description: str = Field("", description="one line shown under the report's title")
    control: str = Field(min_length=1, description="the arm every other arm is compared with")
    metric: str = Field(
        "eval/accuracy",
        min_length=1,
        description="the metric the value column holds; with benchmarks, each benchmark's is eval/<benchmark>/<its "
        "last part> and the (task) rows' eval/<its last part>, and the primary verdicts are on the benchmark it "
        "names (eval/<benchmark>/...), else on the (task) rows, else on the first benchmark",
    )
    direction: Literal["maximize", "minimize"] = Field("maximize", description="which way is better")
    min_effect: float | None = Field(
        None, gt=0, description="smallest difference worth knowing about, in the metric's units (None: no equivalence)"
    )
    benchmark_min_effect: dict[str, float] = Field(
        default_factory=dict, description="min_effect of a benchmark, where it differs from min_effect"
    )
    alpha: float = Field(0.05, gt=0, lt=1, description="significance level of the family of comparisons")
    correction: Literal["bonferroni", "none"] = Field("bonferroni", description="multiple-comparison correction")
    test: Literal[PRIMARY_TESTS] = Field("auto", description="the primary test, as in a study")  # type: ignore[valid-type]
    seed_matched: bool | None = Field(
        None,
        description="whether one seed means the same training randomness in every arm, so comparisons pair on "
        "seeds (None: yes when every arm has the same seeds; a study run by the harness is seed-matched)",
    )
    arms: list[str] | None = Field(
        None, description="the arms in report order (default: the control, then as they appear); each must have rows"
    )
    columns: dict[str, str] = Field(
        default_factory=dict,
        description="tidy column -> the table's own name for it (arm: model, value: score), where they differ",
    )
    repeats_are_samples: bool = Field(
        False,
        description="rows repeating a run's prompt are its sampled answers (numbered in file order), as a sample "
        "column would say; without it a repeated row is refused as a duplicate",
    )

    @field_validator("benchmark_min_effect")
    @classmethod
    def _positive(cls, value: dict[str, float]) -> dict[str, float]:
        for name, effect in value.items():
            if not effect > 0:
                raise ValueError(f"{name}: min_effect must be > 0, got {effect}")
        return value


def settings_from(values: dict[str, Any], where: str) -> JudgeSettings:
    """``JudgeSettings`` from a mapping (a YAML file and the command's options); one line on error."""
    try:
        return JudgeSettings.model_validate(values)
    except ValidationError as err:
        raise ConfigError(f"{where}: {format_validation_error(err, JudgeSettings)}") from None


# ----------------------------------------------------------------------------- reading


def read_table(path: str | Path) -> tuple[pd.DataFrame, str]:
    """The table in ``path`` (``.csv``, ``.parquet`` or ``.jsonl``) and how its rows are named:
    "line" for a CSV, whose header is line 1; "row" for Parquet; "place" for JSONL, whose rows
    carry their own line number (blank lines are skipped)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise ConfigError(f"{path}: not a {', '.join(TABLE_SUFFIXES)} file; give a tidy table (arm, value, ...)")
    try:
        if suffix == ".jsonl":
            return _read_jsonl(path), "place"
        if suffix == ".csv":  # a text cell `harness tidy` quoted for spreadsheets reads as it was
            table = pd.read_csv(path, dtype={"arm": str, "benchmark": str, "prompt_id": str}, keep_default_na=False)
            return plain_frame(table), "line"
        return pd.read_parquet(path), "row"
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except HarnessError:
        raise
    except Exception as err:  # noqa: BLE001 - any parser failure is an unreadable file
        text = " ".join(str(err).split())[:300]
        raise ConfigError(f"{path}: cannot read it as {suffix[1:]} ({type(err).__name__}: {text})") from None


def _read_jsonl(path: Path) -> pd.DataFrame:
    """One row per JSON object line, each naming its line; a line that is not an object is refused."""
    rows = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as err:
                raise ConfigError(f"{path} line {number}: not valid JSON ({err})") from None
            if not isinstance(row, dict):
                raise ConfigError(f"{path} line {number}: not a JSON object (arm, value, ...)")
            rows.append({**row, PLACE_COLUMN: f"{path} line {number}"})
    return pd.DataFrame(rows)


def renamed_columns(table: pd.DataFrame, columns: dict[str, str], where: str) -> pd.DataFrame:
    """``table`` with the user's column names mapped to the tidy ones (``columns``: tidy name ->
    the table's, e.g. ``{"arm": "model", "value": "score"}``)."""
    known = REQUIRED_COLUMNS + OPTIONAL_COLUMNS
    for tidy, own in columns.items():
        if tidy not in known:
            raise ConfigError(f"--column {tidy}={own}: {tidy!r} is not a tidy column; one of {', '.join(known)}")
        if own not in table:
            raise ConfigError(
                f"{where}: no column {own!r} (--column {tidy}={own}); columns there: "
                f"{', '.join(c for c in table.columns if c != PLACE_COLUMN)}"
            )
        if tidy in table and tidy != own:
            raise ConfigError(f"{where}: has a column {tidy!r} already; --column {tidy}={own} would hide it")
    return table.rename(columns={own: tidy for tidy, own in columns.items()})


# ----------------------------------------------------------------------------- checking


class _Rows:
    """How the problem rows of one table are named: ``FILE line 7`` / ``... run <id>``."""

    def __init__(self, frame: pd.DataFrame, where: str, unit: str):
        self.where, self.unit = where, unit
        self.runs = frame["run"].astype(str).tolist() if unit == "run" else None
        #: rows read from a JSONL file or a tool's logs name their own place (unit "place")
        self.places = frame[PLACE_COLUMN].astype(str).tolist() if unit == "place" else None

    def number(self, i: int) -> str:
        if self.runs is not None:
            return self.runs[i]
        return str(i + 2 if self.unit == "line" else i + 1)

    def name(self, i: int) -> str:
        if self.places is not None:
            return self.places[i]
        return f"{self.where} {self.unit} {self.number(i)}"

    def error(self, i: int, what: str) -> ConfigError:
        return ConfigError(f"{self.name(i)}: {what}")


def _text_column(frame: pd.DataFrame, column: str, rows: _Rows) -> pd.Series:
    values = frame[column]
    for i, v in enumerate(values):
        if v is None or (isinstance(v, float) and math.isnan(v)) or str(v).strip() == "":
            raise rows.error(i, f"empty {column}")
    return values.astype(str).str.strip()


def _number_column(frame: pd.DataFrame, column: str, rows: _Rows, *, integer: bool) -> pd.Series:
    numbers = pd.to_numeric(frame[column], errors="coerce").astype(float)
    for i, (raw, x) in enumerate(zip(frame[column], numbers)):
        if not math.isfinite(x):
            raise rows.error(i, f"{column} {raw!r} is not a finite number")
        if integer and x != int(x):
            raise rows.error(i, f"{column} {raw!r} is not an integer")
    return numbers.astype("int64") if integer else numbers


def _computable(numbers: pd.Series, column: str, rows: _Rows) -> None:
    """Every number of ``column`` small enough that what the statistics take of them stays finite:
    sums of squares of the values and of differences between arms, and the squared variances of
    Welch's degrees of freedom (fourth powers), so at most float max ** (1/4) / (2 x rows) in
    magnitude (about 1e75 for a few hundred rows). A larger one overflows to inf, and a comparison
    would be "untested: zero variance" when the variance is anything but zero."""
    limit = sys.float_info.max**0.25 / (2 * len(numbers))
    magnitudes = np.abs(numbers.to_numpy(dtype=float))
    i = int(np.argmax(magnitudes))
    if magnitudes[i] > limit:
        raise rows.error(
            i,
            f"{column} {numbers.iloc[i]:g} is too large to compute with (with {len(numbers)} rows, sums of "
            f"squares and fourth powers overflow beyond {limit:.3g} in magnitude); rescale the column",
        )


def check_table(
    frame: pd.DataFrame, where: str, unit: str = "line", *, repeats_are_samples: bool = False
) -> pd.DataFrame:
    """The table with its columns checked and typed; the first problem is a one-line ConfigError
    naming its row: a missing column, an empty arm or prompt id, a seed that is not an integer, a
    value that is not a finite number or too large for its sums of squares, a bad benchmark name,
    a duplicated row. Without a seed column every row is seed ``NO_SEED`` (one run per arm);
    ``repeats_are_samples`` numbers a prompt's repeated rows as its samples."""
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise ConfigError(
            f"{where}: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)}; a tidy table has "
            f"{', '.join(REQUIRED_COLUMNS)} (and optionally {', '.join(OPTIONAL_COLUMNS)})"
        )
    if not len(frame):
        raise ConfigError(f"{where}: no rows")
    frame = frame.reset_index(drop=True)
    rows = _Rows(frame, where, unit)
    out = pd.DataFrame({"arm": _text_column(frame, "arm", rows)})
    out["seed"] = _number_column(frame, "seed", rows, integer=True) if "seed" in frame else NO_SEED
    out["value"] = _number_column(frame, "value", rows, integer=False)
    _computable(out["value"], "value", rows)
    if "benchmark" in frame:
        out["benchmark"] = _text_column(frame, "benchmark", rows)
        for i, name in enumerate(out["benchmark"]):
            if name != TASK_SET and not BENCHMARK_NAME.fullmatch(name):
                raise rows.error(
                    i,
                    f"benchmark {name!r} is not a valid name (lower case, digits, _; a letter first; "
                    f"{TASK_SET} for a study task's own held-out set)",
                )
            if name == OVERALL:
                raise rows.error(i, f"benchmark {name!r} is reserved for the overall verdict; rename it")
    if "prompt_id" in frame:
        out["prompt_id"] = _text_column(frame, "prompt_id", rows)
    if ("samples" in frame) != ("sample_var" in frame):
        raise ConfigError(f"{where}: samples and sample_var come together (k and the variance of the k scores)")
    if "sample" in frame:
        if "prompt_id" not in frame:
            raise ConfigError(f"{where}: sample numbers a prompt's answers; add prompt_id")
        if "samples" in frame:
            raise ConfigError(
                f"{where}: give one row per sample (a sample column) or per prompt with samples and sample_var, "
                "not both: from samples the harness computes the other two itself"
            )
        out["sample"] = _number_column(frame, "sample", rows, integer=True)
        for i, index in enumerate(out["sample"]):
            if index < 0:
                raise rows.error(i, f"sample must be >= 0; got {index}")
    if "samples" in frame:
        if "prompt_id" not in frame:
            raise ConfigError(f"{where}: samples and sample_var are per prompt; add prompt_id")
        out["samples"] = _number_column(frame, "samples", rows, integer=True)
        out["sample_var"] = _number_column(frame, "sample_var", rows, integer=False)
        _computable(out["sample_var"], "sample_var", rows)
        for i, (k, var) in enumerate(zip(out["samples"], out["sample_var"])):
            if k < 1 or var < 0:
                raise rows.error(i, f"samples must be >= 1 and sample_var >= 0; got {k} and {var}")
    if repeats_are_samples and "sample" not in out:
        if "prompt_id" not in out:
            raise ConfigError(f"{where}: repeated rows are samples of a prompt; add prompt_id")
        out = number_repeats(out)
    keys = [c for c in ("arm", "seed", "benchmark", "prompt_id", "sample") if c in out]
    repeated = np.flatnonzero(out.duplicated(keys, keep="first").to_numpy())
    if len(repeated):
        second = int(repeated[0])
        first = int(np.flatnonzero((out[keys] == out.loc[second, keys]).all(axis=1).to_numpy())[0])
        held = ", ".join(f"{k} {out.loc[second, k]}" for k in keys)
        hint = (
            " (or a sample column numbering a prompt's answers, or --repeats-are-samples)"
            if "prompt_id" in out and "sample" not in out
            else ""
        )
        first_name = rows.name(first) if rows.places is not None else f"{rows.unit} {rows.number(first)}"
        raise rows.error(second, f"duplicates {first_name} ({held}); one row per {', '.join(keys)}{hint}")
    return out


def _check_design(table: pd.DataFrame, settings: JudgeSettings, where: str) -> list[str]:
    """The arms in report order; the control and every listed arm present, every run with every
    benchmark and every prompt of it."""
    seen = list(dict.fromkeys(table["arm"]))
    if settings.control not in seen:
        raise ConfigError(f"{where}: the control {settings.control!r} has no rows; arms there: {', '.join(seen)}")
    if settings.arms is not None:
        for arm in settings.arms:
            if arm not in seen:
                raise ConfigError(f"{where}: arm {arm!r} has no rows; arms there: {', '.join(seen)}")
        extra = [a for a in seen if a not in settings.arms]
        if extra:
            raise ConfigError(
                f"{where}: arm {extra[0]!r} has rows but is not one of the arms given ({', '.join(settings.arms)})"
            )
        arms = list(settings.arms)
    else:
        arms = seen
    arms = [settings.control] + [a for a in arms if a != settings.control]
    if "benchmark" in table:
        names = list(dict.fromkeys(table["benchmark"]))
        have = table.groupby(["arm", "seed"])["benchmark"].agg(set)
        for (arm, seed), got in have.items():
            lacking = [b for b in names if b not in got]
            if lacking:
                raise ConfigError(
                    f"{where}: arm {arm}, seed {seed} has no rows for benchmark {lacking[0]}; "
                    "every run needs every benchmark"
                )
    return arms


def common_prompts(table: pd.DataFrame, where: str) -> tuple[pd.DataFrame, list[str]]:
    """The rows of the prompts every run has (per benchmark), and a line for each benchmark that
    lost prompts: a question missing from one arm's log is left out of every arm's comparison, so
    both sides are averaged over the same questions."""
    notes: list[str] = []
    by = ["benchmark"] if "benchmark" in table else []
    keep = pd.Series(True, index=table.index)
    for key, rows in table.groupby(by, sort=False) if by else [((), table)]:
        per_run = rows.groupby(["arm", "seed"])["prompt_id"].agg(set)
        every = set.intersection(*per_run)
        seen = list(dict.fromkeys(rows["prompt_id"]))
        bench = f" of benchmark {key[0] if isinstance(key, tuple) else key}" if by else ""
        if not every:
            raise ConfigError(f"{where}: no prompt{bench} is scored in every run; nothing to compare")
        if len(every) < len(seen):
            (arm, seed), got = next((run, got) for run, got in per_run.items() if got != set(seen))
            first = next(p for p in seen if p not in got)
            notes.append(
                f"{len(seen) - len(every)} of {len(seen)} prompts{bench} are not scored in every run (arm {arm}, "
                f"seed {seed} lacks {first!r}): every arm is compared on the {len(every)} prompts all runs have"
            )
            keep &= ~(table.index.isin(rows.index) & ~table["prompt_id"].isin(every))
    return table[keep], notes


# ----------------------------------------------------------------------------- building


def _metric_names(table: pd.DataFrame, settings: JudgeSettings, where: str) -> tuple[dict[str, str], str, list[str]]:
    """benchmark -> metric name (``TASK_SET``, or ``""`` without a benchmark column: the plain
    metric), the primary metric (see the module's docstring) and the benchmarks decided apart."""
    names = list(dict.fromkeys(table["benchmark"])) if "benchmark" in table else [""]
    named = [b for b in names if b != TASK_SET]
    if not (len(named) >= 2 or (named and TASK_SET in names)):
        return dict.fromkeys(names, settings.metric), settings.metric, []
    leaf = settings.metric.rsplit("/", 1)[-1]
    parts = settings.metric.split("/")
    chosen = parts[1] if len(parts) == 3 and parts[0] == "eval" else None
    if chosen is not None and chosen not in named:
        raise ConfigError(
            f"{where}: metric {settings.metric} names benchmark {chosen!r}, which has no rows; "
            f"benchmarks there: {', '.join(named)} (give --metric eval/{leaf} for the {TASK_SET} rows or the first)"
        )
    plain = f"eval/{leaf}" if chosen is not None else settings.metric
    metrics = {b: plain if b == TASK_SET else f"eval/{b}/{leaf}" for b in names}
    primary = metrics[chosen] if chosen else metrics.get(TASK_SET, metrics[named[0]])
    return metrics, primary, named


def _prompt_frame(table: pd.DataFrame) -> pd.DataFrame:
    """The long per-prompt frame (step 0) of a checked table with its ``metric`` and ``trial_id``
    columns: each prompt's value, and its ``sample_var`` and ``samples`` rows where the table has them."""
    if "prompt_id" not in table:
        return pd.DataFrame(columns=PROMPT_COLUMNS)
    parts = [table.assign(step=0)[PROMPT_COLUMNS]]
    if "sample_var" in table:
        var = table.assign(step=0, metric=table["metric"] + SAMPLE_VAR_SUFFIX, value=table["sample_var"])
        parts.append(var[PROMPT_COLUMNS])
    if "samples" in table:  # pass@k's k rows go by the metric its samples are named under
        counted = table["metric"].map(samples_metric) + SAMPLES_SUFFIX
        parts.append(table.assign(step=0, metric=counted, value=table["samples"].astype(float))[PROMPT_COLUMNS])
    return pd.concat(parts, ignore_index=True).astype({"seed": "int64", "step": "int64", "value": "float64"})


def results_from_table(
    table: pd.DataFrame, settings: JudgeSettings, *, where: str = "table", unit: str = "line"
) -> Results:
    """The ``Results`` of a tidy table (checked here: one line naming the row on a problem).

    A per-sample table (a ``sample`` column, or ``settings.repeats_are_samples``) is made one row
    per run and prompt as ``settings.metric`` scores it (:mod:`harness.tracking.tidy_samples`:
    the mean with its within-prompt variance, or pass@k / pass^k); prompts some run lacks are
    left out of every run. ``meta.input_notes`` says what reading did."""
    table = check_table(
        renamed_columns(table, settings.columns, where), where, unit, repeats_are_samples=settings.repeats_are_samples
    )
    arms = _check_design(table, settings, where)
    notes: list[str] = []
    if "prompt_id" in table:
        table, notes = common_prompts(table, where)
    if pass_leaf(settings.metric) is not None and "sample" not in table:
        raise ConfigError(
            f"{where}: {settings.metric} is computed from each prompt's sampled answers; give one row per sample "
            "(a sample column, or --repeats-are-samples)"
        )
    if "sample" in table:
        notes.insert(0, f"Read {sample_counts(table).line()}.")
        table = per_prompt(table, settings.metric, where)
    metrics, primary, named = _metric_names(table, settings, where)
    table = table.assign(metric=table["benchmark"].map(metrics) if "benchmark" in table else settings.metric)
    table["trial_id"] = table["arm"] + "-s" + table["seed"].astype(str)
    runs = table[["trial_id", "arm", "seed"]].drop_duplicates().reset_index(drop=True)
    finals = table.groupby(["trial_id", "metric"], sort=False)["value"].mean().unstack("metric")
    trials = runs.assign(status="completed", error=None, wall_time_s=np.nan, config_hash=None, warnings="")
    trials = trials.join(finals[list(dict.fromkeys(metrics.values()))], on="trial_id")
    trials["seed"] = trials["seed"].astype("int64")
    prompts = _prompt_frame(table)
    seeds = {a: sorted(int(s) for s in runs.loc[runs["arm"] == a, "seed"]) for a in arms}
    benchmarks = [
        {"name": b, "metric": metrics[b], "min_effect": settings.benchmark_min_effect.get(b, settings.min_effect)}
        for b in named
    ]
    by_metric = {b["metric"]: b for b in benchmarks}
    meta = StudyMeta(
        study=settings.name,
        description=settings.description,
        study_dir=None,
        primary_metric=primary,
        direction=settings.direction,
        min_effect=by_metric[primary]["min_effect"] if primary in by_metric else settings.min_effect,
        test=settings.test,
        failures="drop",
        metric_ranges={},
        control=settings.control,
        conditions=arms,
        comparisons=[(a, settings.control) for a in arms if a != settings.control],
        calibration=[],
        seed_pools={},
        mirrors={},
        seeds=sorted({s for v in seeds.values() for s in v}),
        seed_matched=(
            len({tuple(v) for v in seeds.values()}) <= 1 if settings.seed_matched is None else settings.seed_matched
        ),
        sequential=None,
        configs=None,
        seeds_by_condition=seeds,
        status_counts={"completed": len(runs)},
        harness_version=None,
        git_commit=None,
        earlier_design=[],
        benchmarks=[BenchmarkMeta(**b) for b in benchmarks],
        source=where,
        input_notes=notes,
    )
    return Results(
        trials=trials,
        curves=pd.DataFrame(columns=CURVE_COLUMNS).astype({"seed": "int64", "step": "int64", "value": "float64"}),
        meta=meta,
        prompt_source=lambda: prompts,
    )


def load_tidy(path: str | Path, settings: JudgeSettings) -> Results:
    """``results_from_table`` of the CSV or Parquet file at ``path``."""
    table, unit = read_table(path)
    return results_from_table(table, settings, where=str(path), unit=unit)


# ----------------------------------------------------------------------------- writing


def _with_samples(rows: pd.DataFrame, extra: pd.DataFrame, name: str) -> pd.DataFrame:
    """``rows`` (one evaluation's scores) with each prompt's ``samples`` and ``sample_var`` beside."""
    wide = extra.pivot_table(index=["trial_id", "step", "prompt_id"], columns="metric", values="value").reset_index()
    wide = wide.rename(columns={name + SAMPLES_SUFFIX: "samples", name + SAMPLE_VAR_SUFFIX: "sample_var"})
    part = rows[["trial_id", "arm", "seed", "step", "prompt_id", "value"]].merge(
        wide[["trial_id", "step", "prompt_id", "samples", "sample_var"]],
        on=["trial_id", "step", "prompt_id"],
        how="left",
    )
    return part.drop(columns="step").astype({"samples": "int64"})


def _exported(results, metric: str | None) -> list[tuple[str | None, str]]:
    """(benchmark, metric) of each held-out set a tidy table holds: the metric alone (None: no
    benchmark column), or, for a study with benchmarks, its own task's (``TASK_SET``) and each
    benchmark's of the same kind (default: the metric each is decided on). A metric that names
    one benchmark's, or that no benchmark has, is exported alone."""
    meta = StudyMeta.from_dict(results.meta)
    listed, primary = meta.benchmarks, meta.primary_metric
    if not listed or (metric is not None and any(metric.startswith(f"eval/{b.name}/") for b in listed)):
        return [(None, metric or primary)]
    if metric is None:
        kinds = {m.rsplit("/", 1)[-1]: m for m in [primary, *(b.metric for b in listed)]}
        if len(kinds) > 1:
            raise ConfigError(
                f"the study decides on metrics of different kinds ({', '.join(kinds.values())}) and a tidy table "
                f"holds one: give --metric {primary} (its task's, and each benchmark's of that kind)"
            )
        own = [] if primary in {b.metric for b in listed} else [(TASK_SET, primary)]  # judged: a benchmark's
        return [*own, *((b.name, b.metric) for b in listed)]
    prompts = results.prompts
    known = set(results.trials.columns) | (set(prompts["metric"]) if len(prompts) else set())
    leaf = metric.rsplit("/", 1)[-1]
    others = [(b.name, f"eval/{b.name}/{leaf}") for b in listed if f"eval/{b.name}/{leaf}" in known]
    return [(TASK_SET, metric), *others] if others else [(None, metric)]


def tidy_frame(results, metric: str | None = None) -> pd.DataFrame:
    """A study's results as a tidy table: its completed trials' per-prompt scores of ``metric``
    (default: the primary one) at each trial's last evaluation, with ``samples`` / ``sample_var``
    when they were sampled (k > 1), or one row per run without per-prompt scores. A study with
    benchmarks (``meta.benchmarks``) gets a ``benchmark`` column: its own task's held-out set
    as ``TASK_SET``, then each benchmark (:func:`_exported`), so that ``harness decide`` at the
    study's metric decides it as the study's report does."""
    wanted = _exported(results, metric)
    done = results.trials[results.trials["status"] == "completed"]
    prompts = results.prompts
    parts = []
    for bench, name in wanted:
        rows = (
            prompts[prompts["trial_id"].isin(done["trial_id"]) & (prompts["metric"] == name)]
            if len(prompts)
            else prompts
        )
        if len(rows):
            last = rows.groupby("trial_id")["step"].transform("max")
            rows = rows[rows["step"] == last]
            part = rows[["trial_id", "arm", "seed", "prompt_id", "value"]]
            extra = prompts[
                prompts["trial_id"].isin(done["trial_id"])
                & prompts["metric"].isin([name + SAMPLES_SUFFIX, name + SAMPLE_VAR_SUFFIX])
            ]
            if len(extra):
                part = _with_samples(rows, extra, name)
            part = part.drop(columns="trial_id")
        else:
            part = done[["arm", "seed"]].assign(
                value=pd.to_numeric(done[name], errors="coerce") if name in done else np.nan
            )
            part = part[np.isfinite(part["value"].to_numpy(dtype=float))]
        if bench is not None:
            part.insert(0, "benchmark", bench)
        parts.append(part)
    out = pd.concat(parts, ignore_index=True)
    if "samples" in out and not (out["samples"] > 1).any():
        out = out.drop(columns=["samples", "sample_var"])
    return out.reset_index(drop=True)
