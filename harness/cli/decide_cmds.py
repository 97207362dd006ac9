"""Commands: ``harness decide`` (results from anywhere, the same report and verdicts as a study) and
``harness tidy`` (a study's results as the tidy table ``harness decide`` reads). ``harness judge``
is ``harness decide``'s former name, kept for one release.

Thin: the table is read and checked in ``harness.tracking.tidy_results`` (an MLflow experiment's runs
read in ``harness.tracking.mlflow_results``), decided in ``harness.decide`` and written by
``harness.report``, as ``harness report`` does for a study.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from harness.cli.app import app, former_name
from harness.cli.report_cmds import check_report_dir, default_report_dir
from harness.cli.results_cmds import StudyArg, named_study
from harness.errors import ConfigError

_SOURCE_HELP = (
    "a tidy table (.csv, .parquet, .jsonl: columns arm and value, optionally seed, benchmark, prompt_id, sample, "
    "samples, sample_var; one row per run, per run and prompt, or per sampled answer), or an evaluation tool's "
    "logs: lm-evaluation-harness --log_samples output, lighteval --save-details output, Inspect .eval/.json logs "
    "(a file or its folder)"
)

FileArg = Annotated[Path | None, typer.Argument(help=_SOURCE_HELP, metavar="FILE", show_default=False)]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="YAML file of settings: name, description, control, metric, direction, min_effect, "
        "benchmark_min_effect, alpha, correction, test, seed_matched, arms, columns, repeats_are_samples",
    ),
]
FromOpt = Annotated[
    str | None, typer.Option("--from", help="what FILE is: lm-eval | lighteval | inspect | table (default: its shape)")
]
ControlOpt = Annotated[str | None, typer.Option("--control", help="the arm every other arm is compared with")]
MetricOpt = Annotated[
    str | None,
    typer.Option(
        "--metric",
        help="the metric the values are (default eval/accuracy); with benchmarks the primary verdicts are on the "
        "benchmark it names (eval/<benchmark>/accuracy), else on the (task) rows, else on the first benchmark",
    ),
]
PassKOpt = Annotated[
    str | None,
    typer.Option(
        "--pass-k", help="judge pass@k for each k (e.g. 1,4): unbiased, from each prompt's sampled 0/1 answers"
    ),
]
PassHatKOpt = Annotated[
    str | None, typer.Option("--pass-hat-k", help="judge pass^k (all k answers correct) for each k, e.g. 4")
]
TestOpt = Annotated[
    str | None,
    typer.Option("--test", help="the primary test, as in a study: auto | seed_prompt | welch_t | paired_t | yuen"),
]
ScoreOpt = Annotated[
    str | None,
    typer.Option("--score", help="the evaluation tool's field to judge (default: the task's own first metric)"),
]
RunsOpt = Annotated[
    str | None,
    typer.Option(
        "--runs",
        help="regular expression over each evaluated model's name: group (?P<arm>...) is the arm, optional "
        "(?P<seed>...) the seed (default: the name's last part is the arm, one seed)",
    ),
]
ColumnOpt = Annotated[
    list[str],
    typer.Option("--column", help="TIDY=YOURS: a table's own name for a tidy column (repeat), e.g. arm=model"),
]
RepeatsOpt = Annotated[
    bool,
    typer.Option("--repeats-are-samples", help="a table's rows repeating a run's prompt are its sampled answers"),
]
DirectionOpt = Annotated[str | None, typer.Option("--direction", help="maximize | minimize (default maximize)")]
MinEffectOpt = Annotated[
    float | None, typer.Option("--min-effect", help="smallest difference worth knowing about, in the metric's units")
]
AlphaOpt = Annotated[float | None, typer.Option("--alpha", help="significance level (default 0.05)")]
CorrectionOpt = Annotated[str | None, typer.Option("--correction", help="bonferroni | none (default bonferroni)")]
NameOpt = Annotated[str | None, typer.Option("--name", help="name of the report (default judged)")]
ExperimentOpt = Annotated[
    str | None,
    typer.Option(
        "--mlflow-experiment",
        help="read the finished runs of this MLflow experiment instead of a file: arm and seed from a tag (or param) "
        "each, the value from metric final/<metric> or <metric> (or --mlflow-table)",
    ),
]
TrackingUriOpt = Annotated[
    str | None,
    typer.Option("--tracking-uri", envvar="HARNESS_TRACKING_URI", help="MLflow tracking URI of --mlflow-experiment"),
]
ArmKeyOpt = Annotated[
    str | None, typer.Option("--arm-key", help="the tag (or param) of each MLflow run that names its arm (default arm)")
]
SeedKeyOpt = Annotated[
    str | None,
    typer.Option(
        "--seed-key",
        help="the tag (or param) of each MLflow run that holds its seed (default seed); without it on any run, "
        "each arm's runs are numbered as seeds 0, 1, ... in start-time order",
    ),
]
MlflowTableOpt = Annotated[
    str | None,
    typer.Option(
        "--mlflow-table",
        metavar="FILE",
        help="read each MLflow run's values per prompt from the table it logged with mlflow.log_table(data, "
        "artifact_file=FILE): columns prompt_id, value, optionally benchmark, sample (instead of the run's metric)",
    ),
]
OutOpt = Annotated[Path | None, typer.Option("--out", help="output folder (default: reports/<name>/)")]


def _config_file(path: Path | None) -> dict[str, Any]:
    """The settings in ``--config FILE`` (YAML, read as data), or none."""
    if path is None:
        return {}
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError(f"--config {path}: cannot read it ({err.strerror or err})") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"--config {path}: not valid YAML ({' '.join(str(err).split())[:200]})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path}: must be a mapping of settings (control: ..., metric: ...)")
    return data


def _ks(text: str | None, option: str) -> list[int]:
    """``--pass-k 1,4`` -> [1, 4]: whole numbers >= 1, none repeated."""
    if text is None:
        return []
    try:
        ks = [int(part) for part in text.split(",")]
    except ValueError:
        raise ConfigError(f"{option} {text!r}: give whole numbers separated by commas, e.g. {option} 1,4") from None
    if any(k < 1 for k in ks) or len(set(ks)) != len(ks):
        raise ConfigError(f"{option} {text!r}: each k must be >= 1 and given once")
    return ks


def _column_map(pairs: list[str]) -> dict[str, str]:
    """``--column arm=model`` (repeated) -> {"arm": "model"}."""
    out = {}
    for pair in pairs:
        tidy, sep, own = pair.partition("=")
        if not sep or not tidy.strip() or not own.strip():
            raise ConfigError(f"--column {pair!r}: give TIDY=YOURS, e.g. --column arm=model")
        out[tidy.strip()] = own.strip()
    return out


def _metric_slug(metric: str) -> str:
    """``eval/pass@4`` -> ``pass_at_4``: the folder of a further metric's report."""
    leaf = metric.rsplit("/", 1)[-1]
    return leaf.replace("@", "_at_").replace("^", "_hat_")


@app.command("decide")
def decide(
    file: FileArg = None,
    config: ConfigOpt = None,
    source: FromOpt = None,
    control: ControlOpt = None,
    metric: MetricOpt = None,
    pass_k: PassKOpt = None,
    pass_hat_k: PassHatKOpt = None,
    test: TestOpt = None,
    score: ScoreOpt = None,
    runs: RunsOpt = None,
    column: ColumnOpt = [],  # noqa: B006 - typer's way of a repeated option; never mutated
    repeats_are_samples: RepeatsOpt = False,
    direction: DirectionOpt = None,
    min_effect: MinEffectOpt = None,
    alpha: AlphaOpt = None,
    correction: CorrectionOpt = None,
    name: NameOpt = None,
    mlflow_experiment: ExperimentOpt = None,
    tracking_uri: TrackingUriOpt = None,
    arm_key: ArmKeyOpt = None,
    seed_key: SeedKeyOpt = None,
    mlflow_table: MlflowTableOpt = None,
    out: OutOpt = None,
) -> None:
    """Decide on results made anywhere: the same verdicts, intervals and report as a study's.

    With --pass-k / --pass-hat-k each metric is judged apart: the first in the output folder, each
    further one in a folder of its own inside it. Options override the --config file's settings."""
    from harness.tracking.tidy_results import settings_from

    if (file is None) == (mlflow_experiment is None):
        raise ConfigError("give either a FILE (a table or a tool's logs) or --mlflow-experiment NAME, not both")
    if mlflow_experiment is not None and not tracking_uri:
        raise ConfigError("--mlflow-experiment needs --tracking-uri URI (or HARNESS_TRACKING_URI)")
    if mlflow_experiment is None and (arm_key, seed_key, mlflow_table) != (None, None, None):
        raise ConfigError("--arm-key, --seed-key and --mlflow-table go with --mlflow-experiment NAME")
    given = {
        "control": control,
        "metric": metric,
        "direction": direction,
        "min_effect": min_effect,
        "alpha": alpha,
        "correction": correction,
        "name": name,
        "test": test,
        "columns": _column_map(column) or None,
        "repeats_are_samples": repeats_are_samples or None,
    }
    values = {**_config_file(config), **{k: v for k, v in given.items() if v is not None}}
    if "control" not in values:
        raise ConfigError("no control arm: give --control ARM or control: in --config")
    settings = settings_from(values, f"--config {config}" if config else "decide settings")
    passes = [f"eval/pass@{k}" for k in _ks(pass_k, "--pass-k")]
    passes += [f"eval/pass^{k}" for k in _ks(pass_hat_k, "--pass-hat-k")]
    metrics = ([settings.metric] if "metric" in values or not passes else []) + passes
    if out is not None:
        check_report_dir(out)
    if file is not None:
        load = _file_loader(file, source, score, runs, settings)
    else:
        load = _mlflow_loader(mlflow_experiment, tracking_uri, settings, arm_key, seed_key, mlflow_table)
    first_dir = None
    for judged in metrics:
        results = load(settings.model_copy(update={"metric": judged}))
        first_dir = first_dir or (out if out is not None else default_report_dir(results))
        _judge(results, settings, first_dir if judged == metrics[0] else first_dir / _metric_slug(judged), metrics)


def _file_loader(file: Path, source: str | None, score: str | None, runs: str | None, settings) -> Callable:
    """What a FILE holds, read once: a function from the settings (one per judged metric) to its results."""
    from harness.evallogs.naming import RunNames
    from harness.evallogs.sources import read_tool_logs, source_of
    from harness.tracking.tidy_results import TABLE_SUFFIXES, read_table, results_from_table

    kind = source_of(file, source, TABLE_SUFFIXES)
    if kind == "table":
        if score is not None or runs is not None:
            raise ConfigError("--score and --runs read an evaluation tool's logs; a table names its columns (--column)")
        table, unit = read_table(file)
        where = str(file)
    else:
        if settings.columns or settings.repeats_are_samples:
            raise ConfigError("--column and --repeats-are-samples shape a tidy table; a tool's logs name their fields")
        table, where = read_tool_logs(file, kind, score, RunNames.parse(runs))
        unit = "place"
        typer.echo(f"read {where}")
    return lambda judged: results_from_table(table, judged, where=where, unit=unit)


def _mlflow_loader(
    experiment: str, tracking_uri: str, settings, arm_key: str | None, seed_key: str | None, table: str | None
) -> Callable:
    """An MLflow experiment's runs, read once (``read_mlflow``): a function from the settings to
    their results; the console's first line says where they came from and how seeds were found."""
    from harness.tracking.mlflow_results import ARM_KEY, SEED_KEY, read_mlflow, results_of

    seed_key = seed_key or SEED_KEY
    read = read_mlflow(
        experiment, tracking_uri, settings.metric, arm_key=arm_key or ARM_KEY, seed_key=seed_key, table=table
    )
    typer.echo(f"read {read.source}")
    return lambda judged: results_of(read, experiment, judged, seed_key=seed_key)


def _judge(results, settings, out_dir: Path, metrics: list[str]) -> None:
    """Decide ``results``, write their report in ``out_dir`` and print their verdicts."""
    from harness.decide.analysis import analyze
    from harness.decide.frames import meta_of
    from harness.decide.rules import ReadOptions
    from harness.report import console_lines, write_analysis, written_line

    analysis = analyze(results, ReadOptions(correction=settings.correction, alpha=settings.alpha))
    path = write_analysis(analysis, out_dir)
    if len(metrics) > 1:
        typer.echo(f"{meta_of(results).primary_metric}:")
    for line in [written_line(path), *meta_of(results).input_notes, *console_lines(analysis)]:
        typer.echo(line)


former_name("judge", "decide", decide)


@app.command("tidy")
def tidy(
    study: StudyArg,
    out: Path = typer.Option(..., "--out", help="the table to write: .csv or .parquet"),
    metric: str | None = typer.Option(
        None,
        "--metric",
        help="final metric (default: the primary metric); with benchmarks, a task metric (eval/accuracy) "
        "exports the task's and each benchmark's of that kind, a benchmark's (eval/<name>/accuracy) that one alone",
    ),
) -> None:
    """Write a study's results as a tidy table (arm, seed, prompt_id, value, ...) that `harness decide` reads.

    A study with benchmarks gets a benchmark column: its own task's held-out set as (task), then each
    benchmark, each on the metric its verdicts are decided on."""
    from harness.decide.frames import check_metric
    from harness.ground.files import atomic_write
    from harness.ground.spreadsheet import safe_frame
    from harness.tracking.results import load_results
    from harness.tracking.tidy_results import tidy_frame

    if out.suffix.lower() not in (".csv", ".parquet"):
        raise ConfigError(f"--out {out}: give a .csv or .parquet file")
    results = load_results(str(named_study(study).path))
    frame = tidy_frame(results, check_metric(results, metric) if metric else None)
    if out.suffix.lower() == ".csv":
        atomic_write(out, safe_frame(frame).to_csv(index=False))
    else:
        atomic_write(out, frame.to_parquet(index=False))
    typer.echo(f"wrote {out} ({len(frame)} rows)")
