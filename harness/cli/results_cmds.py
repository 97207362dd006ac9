"""Commands: ``harness mirror-to-mlflow`` (``harness sync`` until the next release), ``harness ui``
and ``harness results``.

STUDY is a study's name, its YAML file or its output folder (the one holding ``records/``);
:func:`named_study` resolves it (``harness.tracking.study_ref.resolve_study``) and says to what.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from harness.cli.app import app, former_name
from harness.errors import ConfigError, HarnessError
from harness.ground.exit_codes import EXIT_OK, EXIT_SOME_FAILED
from harness.ground.spreadsheet import safe_frame
from harness.ground.urls import redact_url

#: what every reading command's STUDY argument accepts
STUDY_HELP = "study name (studies/NAME.yaml or runs/NAME/), study YAML file or study output folder"
StudyArg = Annotated[str, typer.Argument(help=STUDY_HELP, metavar="STUDY", show_default=False)]
TrackingOpt = Annotated[
    str | None,
    typer.Option(
        "--tracking-uri",
        envvar="HARNESS_TRACKING_URI",
        help="MLflow tracking URI; default: sqlite:///<study_dir>/mlflow.db",
    ),
]
StorageOpt = Annotated[
    str | None,
    typer.Option(
        "--storage",
        envvar="HARNESS_STORAGE",
        help="the study's Optuna storage URL (e.g. the PostgreSQL database shared by many machines): "
        "first copy here the records other machines stored there",
    ),
]


def named_study(study: str):
    """STUDY (a name, a study file or a study folder) resolved, and said on stderr in one line
    (``study quickstart: studies/quickstart.yaml, runs/quickstart``). Returns its ``StudyRef``:
    the rest of the command reads ``ref.path``, the file or folder it resolved to."""
    from harness.tracking.study_ref import resolve_study

    ref = resolve_study(study)
    typer.echo(ref.describe(), err=True)
    return ref


def bring_records(study: str, storage: str | None) -> None:
    """``--storage URL``: import into this machine's study folder the records it lacks."""
    if not storage:
        return
    from harness.tracking.shared_records import import_for_study

    folder, report = import_for_study(study, storage)
    typer.echo(f"{folder}: {report}", err=True)


@app.command("mirror-to-mlflow")
def mirror_to_mlflow(study: StudyArg, tracking_uri: TrackingOpt = None, storage: StorageOpt = None) -> None:
    """Mirror the study to MLflow: send every local trial record it does not fully hold yet.

    With --storage, first import the records other machines stored in the shared storage, and
    store there the local records it lacks, so every machine can see every result.
    """
    from harness.tracking.mlflow_mirror import require_existing_store, sync

    require_existing_store(tracking_uri)
    ref = named_study(study)
    folder = ref.dir
    bring_records(str(ref.path), storage)
    if storage:
        from harness.tracking.shared_records import open_store, publish_missing
        from harness.tracking.study_ref import study_name

        store = open_store(storage, study_name(ref))
        sent = publish_missing(folder, store)
        typer.echo(f"{folder}: {sent} local records stored in the shared storage", err=True)
    report = sync(folder, tracking_uri)
    typer.echo(str(report))
    raise typer.Exit(EXIT_SOME_FAILED if report.failed else EXIT_OK)


former_name("sync", "mirror-to-mlflow", mirror_to_mlflow)


#: the variable ``mlflow ui`` reads its store from (its ``--backend-store-uri`` option's ``envvar``)
STORE_VARIABLE = "MLFLOW_BACKEND_STORE_URI"


def ui_command(*, host: str = "127.0.0.1", port: int = 5000) -> list[str]:
    """The ``mlflow ui`` command line; its store comes in its environment (``ui_environment``)."""
    return [sys.executable, "-m", "mlflow", "ui", "--host", host, "--port", str(port)]


def ui_environment(study_dir: str | os.PathLike, backend_uri: str | None = None) -> dict[str, str]:
    """What ``mlflow ui`` needs in its environment: the study's store (default: its own sqlite).
    Never on its command line, which any local user can read (``ps``, ``/proc/PID/cmdline``): the
    URL of a shared database holds its password."""
    from harness.tracking.mlflow_mirror import default_tracking_uri

    return {
        STORE_VARIABLE: backend_uri or default_tracking_uri(study_dir),
        "MLFLOW_DISABLE_TELEMETRY": os.environ.get("MLFLOW_DISABLE_TELEMETRY", "true"),
    }


@app.command("ui")
def ui_cmd(
    study: StudyArg,
    port: Annotated[int, typer.Option(help="port to serve on")] = 5000,
    host: Annotated[str, typer.Option(help="interface to bind; 0.0.0.0 exposes it to the network")] = "127.0.0.1",
    tracking_uri: TrackingOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the command instead of running it")] = False,
) -> None:
    """Open the MLflow UI on the study's store: runs mlflow ui with MLFLOW_BACKEND_STORE_URI=STORE
    in its environment (not on its command line, where any local user could read a password)."""
    if tracking_uri and tracking_uri.split(":", 1)[0] in {"http", "https"}:
        typer.echo(f"this study is tracked on a server: open {redact_url(tracking_uri)}")
        return
    from harness.tracking.mlflow_mirror import require_existing_store

    require_existing_store(tracking_uri)
    study_dir = named_study(study).dir
    if not tracking_uri and not (Path(study_dir) / "mlflow.db").is_file():
        raise HarnessError(
            f"no MLflow store at {Path(study_dir) / 'mlflow.db'} yet; run `harness mirror-to-mlflow {study}` "
            "to build it from the local records"
        )
    command = ui_command(host=host, port=port)
    environment = ui_environment(study_dir, tracking_uri)
    shown = "localhost" if host in {"0.0.0.0", "::"} else host
    typer.echo(f"MLflow UI for {study_dir}: http://{shown}:{port}  (Ctrl-C to stop)")
    if dry_run:
        typer.echo(" ".join([f"{STORE_VARIABLE}={redact_url(environment[STORE_VARIABLE])}", *command]))
        return
    from harness.cli.process_group import run_owning_group

    raise typer.Exit(run_owning_group(command, {**os.environ, **environment}))


def _fmt(value, width: int = 0) -> str:
    if value is None or (isinstance(value, float) and value != value):
        text = "-"
    elif isinstance(value, float):
        text = f"{value:.4g}"
    else:
        text = str(value)
    if width and len(text) > width:
        text = text[: width - 3] + "..."
    return text


def format_table(results, *, max_error: int = 60) -> str:
    """A compact text table of the trials, then one summary line per condition."""
    from harness.tracking.study_meta import StudyMeta

    trials, meta = results.trials, StudyMeta.from_dict(results.meta)
    metric = meta.primary_metric or "eval/accuracy"
    if trials.empty:
        return f"study {meta.study}: no trials yet"
    headers = ["trial_id", "arm", "seed", "status"]
    if metric and metric in trials.columns:
        headers.append(metric)
    headers += ["wall_time_s", "error"]
    rows = [[_fmt(r.get(h), max_error if h == "error" else 0) for h in headers] for r in trials.to_dict("records")]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    counts = ", ".join(f"{n} {s}" for s, n in sorted(meta.status_counts.items()))
    lines.append("")
    lines.append(f"study {meta.study}: {len(trials)} trials ({counts})")
    if metric and metric in trials.columns:
        done = trials[trials["status"] == "completed"]
        for condition in meta.conditions or sorted(trials["arm"].unique()):
            values = done.loc[done["arm"] == condition, metric].dropna()
            if len(values):
                spread = f" +- {values.std(ddof=1):.4g} (sd)" if len(values) > 1 else ""
                lines.append(f"  {condition}: {metric} {values.mean():.4g}{spread}, n={len(values)}")
            else:
                lines.append(f"  {condition}: no completed trials")
    return "\n".join(lines)


@app.command("results")
def results_cmd(
    study: StudyArg,
    csv: Annotated[Path | None, typer.Option("--csv", help="write the trials frame here")] = None,
    curves_csv: Annotated[Path | None, typer.Option("--curves-csv", help="write the per-step curves here")] = None,
    storage: StorageOpt = None,
) -> None:
    """Print a table of the study's trials; optionally write the trials and curves as CSV."""
    from harness.tracking.results import load_results

    for flag, path in (("--csv", csv), ("--curves-csv", curves_csv)):
        if path is not None:
            check_csv_path(flag, path)  # bad input fails before anything is read or written
    where = str(named_study(study).path)
    bring_records(where, storage)
    results = load_results(where, storage=storage)
    typer.echo(format_table(results))
    for flag, path, frame in (("--csv", csv, results.trials), ("--curves-csv", curves_csv, results.curves)):
        if path is not None:
            try:
                safe_frame(frame).to_csv(path, index=False)
            except OSError as err:
                why = err.strerror or str(err)
                raise HarnessError(f"{flag} {path}: cannot write it ({why})") from None
            typer.echo(f"wrote {path} ({len(frame)} rows)")


def check_csv_path(flag: str, path: Path) -> None:
    """An output file the user named: its folder must exist (none is created), and the path
    must not be a folder. Raises ``ConfigError`` with one line."""
    if path.is_dir():
        raise ConfigError(f"{flag} {path}: is a folder; give a file name, e.g. {path / 'trials.csv'}")
    parent = path.parent
    if not parent.exists():
        raise ConfigError(f"{flag} {path}: folder {parent} does not exist; create it first or pick another path")
    if not parent.is_dir():
        raise ConfigError(f"{flag} {path}: {parent} is not a folder")
