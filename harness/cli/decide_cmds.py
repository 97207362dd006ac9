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
    "tidy CSV or Parquet: columns arm, seed, value, optionally benchmark and prompt_id (one row per run, "
    "or per run and prompt) and samples, sample_var (k sampled scores per prompt); benchmark (task) marks a "
    "study task's own held-out set (harness tidy writes it)"
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


@app.command("decide")
def decide(
    file: Path | None = typer.Argument(None, help=_SOURCE_HELP, metavar="FILE", show_default=False),
    config: Path | None = typer.Option(
        None,
        "--config",
        help="YAML file of settings: name, description, control, metric, direction, min_effect, "
        "benchmark_min_effect, alpha, correction, test, seed_matched, arms",
    ),
    control: str | None = typer.Option(None, "--control", help="the arm every other arm is compared with"),
    metric: str | None = typer.Option(
        None,
        "--metric",
        help="the metric the values are (default eval/accuracy); with benchmarks the primary verdicts are on the "
        "benchmark it names (eval/<benchmark>/accuracy), else on the (task) rows, else on the first benchmark",
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

    Options override the --config file's settings."""
    from harness.decide.analysis import analyze
    from harness.decide.rules import ReadOptions
    from harness.report import console_lines, write_analysis, written_line
    from harness.tracking.tidy_results import load_mlflow, load_tidy, settings_from

    if (file is None) == (mlflow_experiment is None):
        raise ConfigError("give either a tidy FILE or --mlflow-experiment NAME (with --tracking-uri), not both")
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
    }
    values = {**_config_file(config), **{k: v for k, v in given.items() if v is not None}}
    if "control" not in values:
        raise ConfigError("no control arm: give --control ARM or control: in --config")
    settings = settings_from(values, f"--config {config}" if config else "decide settings")
    if out is not None:
        check_report_dir(out)
    if file is not None:
        results = load_tidy(file, settings)
    else:
        results = load_mlflow(mlflow_experiment, tracking_uri, settings)
    out_dir = out if out is not None else default_report_dir(results)
    analysis = analyze(results, ReadOptions(correction=settings.correction, alpha=settings.alpha))
    path = write_analysis(analysis, out_dir)
    for line in [written_line(path), *console_lines(analysis)]:
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
