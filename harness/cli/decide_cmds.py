"""Commands: ``harness decide`` (results from anywhere, the same report and verdicts as a study) and
``harness tidy`` (a study's results as the tidy table ``harness decide`` reads). ``harness judge``
is ``harness decide``'s former name, kept for one release.

Thin: the table is read and checked in ``harness.tracking.tidy_results``, decided in
``harness.decide`` and written by ``harness.report``, as ``harness report`` does for a study.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
    return leaf.replace("@", "_at_").replace("^", "_hat_").replace("/", "_")


@app.command("decide")
def decide(
    file: Path | None = typer.Argument(None, help=_SOURCE_HELP, metavar="FILE", show_default=False),
    config: Path | None = typer.Option(
        None,
        "--config",
        help="YAML file of settings: name, description, control, metric, direction, min_effect, "
        "benchmark_min_effect, alpha, correction, test, seed_matched, arms, columns, repeats_are_samples",
    ),
    source: str | None = typer.Option(
        None,
        "--from",
        help="what FILE is: lm-eval | lighteval | inspect | table (default: told from the file)",
    ),
    control: str | None = typer.Option(None, "--control", help="the arm every other arm is compared with"),
    metric: str | None = typer.Option(
        None,
        "--metric",
        help="the metric the values are (default eval/accuracy); with benchmarks the primary verdicts are on the "
        "benchmark it names (eval/<benchmark>/accuracy), else on the (task) rows, else on the first benchmark",
    ),
    pass_k: str | None = typer.Option(
        None,
        "--pass-k",
        help="also judge pass@k for each k (e.g. 1,4): unbiased, from each prompt's sampled 0/1 answers",
    ),
    pass_hat_k: str | None = typer.Option(
        None, "--pass-hat-k", help="also judge pass^k (all k answers correct) for each k, e.g. 4"
    ),
    test: str | None = typer.Option(
        None, "--test", help="the primary test, as in a study: auto | seed_prompt | welch_t | paired_t | yuen"
    ),
    score: str | None = typer.Option(
        None, "--score", help="an evaluation tool's field to judge (default: the task's own first metric)"
    ),
    runs: str | None = typer.Option(
        None,
        "--runs",
        help="regular expression over each evaluated model's name: group (?P<arm>...) is the arm, optional "
        "(?P<seed>...) the seed (default: the name's last part is the arm, one seed)",
    ),
    column: list[str] = typer.Option(
        [], "--column", help="TIDY=YOURS: a table's own column name for a tidy one (repeat), e.g. arm=model"
    ),
    repeats_are_samples: bool = typer.Option(
        False, "--repeats-are-samples", help="a table's rows repeating a run's prompt are its sampled answers"
    ),
    direction: str | None = typer.Option(None, "--direction", help="maximize | minimize (default maximize)"),
    min_effect: float | None = typer.Option(
        None, "--min-effect", help="smallest difference worth knowing about, in the metric's units"
    ),
    alpha: float | None = typer.Option(None, "--alpha", help="significance level (default 0.05)"),
    correction: str | None = typer.Option(None, "--correction", help="bonferroni | none (default bonferroni)"),
    name: str | None = typer.Option(None, "--name", help="name of the report (default judged)"),
    mlflow_experiment: str | None = typer.Option(
        None,
        "--mlflow-experiment",
        help="read the runs of this MLflow experiment instead of a file: tags (or params) arm and seed, "
        "metric final/<metric> or <metric>",
    ),
    tracking_uri: str | None = typer.Option(
        None, "--tracking-uri", envvar="HARNESS_TRACKING_URI", help="MLflow tracking URI of --mlflow-experiment"
    ),
    out: Path | None = typer.Option(None, "--out", help="output folder (default: reports/<name>/)"),
) -> None:
    """Decide on results made anywhere: the same verdicts, intervals and report as a study's.

    With --pass-k / --pass-hat-k each metric is judged apart: the first in the output folder, each
    further one in a folder of its own inside it. Options override the --config file's settings."""
    from harness.tracking.tidy_results import settings_from

    if (file is None) == (mlflow_experiment is None):
        raise ConfigError("give either a FILE (a table or a tool's logs) or --mlflow-experiment NAME, not both")
    if mlflow_experiment is not None and not tracking_uri:
        raise ConfigError("--mlflow-experiment needs --tracking-uri URI (or HARNESS_TRACKING_URI)")
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
    passes = [f"eval/pass@{k}" for k in _ks(pass_k, "--pass-k")] + [
        f"eval/pass^{k}" for k in _ks(pass_hat_k, "--pass-hat-k")
    ]
    metrics = ([settings.metric] if metric is not None or "metric" in values or not passes else []) + passes
    if out is not None:
        check_report_dir(out)
    table, where, unit = _read_input(file, source, score, runs, mlflow_experiment, tracking_uri, settings)
    first_dir = None
    for index, judged in enumerate(metrics):
        judged_settings = settings.model_copy(update={"metric": judged})
        first_dir = _judge(table, judged_settings, where, unit, out, first_dir, index, len(metrics))


def _read_input(file, source, score, runs, mlflow_experiment, tracking_uri, settings):
    """The tidy rows to judge, where they came from, and how their rows are named."""
    from harness.tracking.tidy_results import read_mlflow, read_table

    if file is None:
        return (
            read_mlflow(mlflow_experiment, tracking_uri, settings.metric),
            f"MLflow experiment {mlflow_experiment!r}",
            "run",
        )
    from harness.evallogs.naming import RunNames
    from harness.evallogs.sources import read_tool_logs, source_of

    if source is not None and source not in ("lm-eval", "lighteval", "inspect", "table"):
        raise ConfigError(f"--from {source!r}: give lm-eval, lighteval, inspect or table")
    kind = source_of(file, source)
    if kind == "table":
        if score is not None or runs is not None:
            raise ConfigError("--score and --runs read an evaluation tool's logs; a table names its columns (--column)")
        table, unit = read_table(file)
        return table, str(file), unit
    if settings.columns or settings.repeats_are_samples:
        raise ConfigError("--column and --repeats-are-samples shape a tidy table; a tool's logs name their own fields")
    table, line = read_tool_logs(file, kind, score, RunNames.parse(runs))
    return table, line, "place"


def _judge(table, settings, where: str, unit: str, out: Path | None, first_dir, index: int, count: int):
    """Judge ``table`` on ``settings.metric``: write its report (the first metric's in the output
    folder, a further one's in a folder inside it) and print its verdicts; the first folder."""
    from harness.decide.analysis import analyze
    from harness.decide.frames import meta_of
    from harness.decide.rules import ReadOptions
    from harness.report import write_analysis
    from harness.tracking.tidy_results import results_from_table

    results = results_from_table(table, settings, where=where, unit=unit)
    if first_dir is None:
        first_dir = out if out is not None else default_report_dir(results)
    out_dir = first_dir if index == 0 else first_dir / _metric_slug(settings.metric)
    analysis = analyze(results, ReadOptions(correction=settings.correction, alpha=settings.alpha))
    path = write_analysis(analysis, out_dir)
    if count > 1:
        typer.echo(f"{settings.metric}:")
    typer.echo(f"wrote {path} (with summary.md, results.csv, plotly.min.js in {path.parent})")
    for note in meta_of(results).input_notes:
        typer.echo(note)
    for row in analysis.verdicts.itertuples():
        typer.echo(f"{row.condition} vs {row.control}: {row.verdict} (difference {row.diff:+.4g})")
    return first_dir


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
