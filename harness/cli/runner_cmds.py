"""Commands: ``harness run``, ``harness worker`` and ``harness status``.

Thin wrappers over :mod:`harness.runner.run`. Exit codes: 0 every trial completed; 1 some failed
(a summary says which and why); 2 bad input, nothing started; 130 interrupted (re-run resumes).
"""

from __future__ import annotations

from pathlib import Path

import typer

from harness.cli.app import app
from harness.cli.results_cmds import StudyArg
from harness.runner.child import DEFAULT_TRIAL_FN

_STORAGE_HELP = "Optuna storage URL (default: sqlite:///<study_dir>/optuna.db); PostgreSQL works for many machines"


def _options(**kw):
    from harness.runner.options import RunOptions

    return RunOptions(**{k: v for k, v in kw.items() if v is not None})


@app.command("run")
def run_cmd(
    study: Path = typer.Argument(..., help="study file (YAML)"),
    workers: int = typer.Option(None, "--workers", help="CPU worker processes (default 1); with GPUs: one per GPU"),
    storage: str = typer.Option(None, "--storage", envvar="HARNESS_STORAGE", help=_STORAGE_HELP),
    tracking_uri: str = typer.Option(None, "--tracking-uri", envvar="HARNESS_TRACKING_URI", help="MLflow tracking URI (default: sqlite:///<study_dir>/mlflow.db)"),
    retries: int = typer.Option(0, "--retries", help="re-queue a failed trial up to N times"),
    trial_timeout: float = typer.Option(None, "--trial-timeout", help="fail a trial that runs longer than SECONDS"),
    trial_fn: str = typer.Option(DEFAULT_TRIAL_FN, "--trial-fn", hidden=True),
    no_tracking: bool = typer.Option(False, "--no-tracking", hidden=True, help="skip the MLflow mirror (`harness sync` replays it)"),
    heartbeat_interval: float = typer.Option(None, "--heartbeat-interval", hidden=True),
    grace_period: float = typer.Option(None, "--grace-period", hidden=True),
    poll_interval: float = typer.Option(None, "--poll-interval", hidden=True),
    kill_grace: float = typer.Option(None, "--kill-grace", hidden=True),
    new_version: bool = typer.Option(False, "--new-version", help="a sequential study whose file changes the rule "
                                     "fixed at its first look: fix the edited rule as its next version, on seeds "
                                     "it has not run (the looks start over; earlier trials are kept, never pooled)"),
) -> None:
    """Run a study: queue its trials (idempotently) and execute them; re-running resumes."""
    from harness.runner.run import run_study

    opts = _options(
        workers=workers, storage=storage, tracking_uri=tracking_uri, retries=retries,
        trial_timeout=trial_timeout, trial_fn=trial_fn, tracking=not no_tracking,
        heartbeat_interval=heartbeat_interval, grace_period=grace_period,
        poll_interval=poll_interval, kill_grace=kill_grace,
    )
    try:
        summary = run_study(study, opts, new_version=new_version)
    except KeyboardInterrupt:  # before the workers started: nothing is running
        typer.echo("interrupted", err=True)
        raise typer.Exit(130) from None
    typer.echo(summary.format())
    raise typer.Exit(summary.exit_code)


@app.command("worker")
def worker_cmd(
    study: Path = typer.Argument(..., help="study file (YAML) or its output folder"),
    storage: str = typer.Option(None, "--storage", envvar="HARNESS_STORAGE", help=_STORAGE_HELP),
    workers: int = typer.Option(None, "--workers", help="CPU worker processes (default 1); with GPUs: one per GPU"),
    tracking_uri: str = typer.Option(None, "--tracking-uri", envvar="HARNESS_TRACKING_URI", help="MLflow tracking URI"),
    trial_timeout: float = typer.Option(None, "--trial-timeout", help="fail a trial that runs longer than SECONDS"),
    trial_fn: str = typer.Option(DEFAULT_TRIAL_FN, "--trial-fn", hidden=True),
    no_tracking: bool = typer.Option(False, "--no-tracking", hidden=True),
    heartbeat_interval: float = typer.Option(None, "--heartbeat-interval", hidden=True),
    grace_period: float = typer.Option(None, "--grace-period", hidden=True),
    poll_interval: float = typer.Option(None, "--poll-interval", hidden=True),
) -> None:
    """Join a running study from this machine: work on its queue until the study is finished."""
    from harness.runner.run import run_worker

    opts = _options(
        workers=workers, storage=storage, tracking_uri=tracking_uri, trial_timeout=trial_timeout,
        trial_fn=trial_fn, tracking=not no_tracking, heartbeat_interval=heartbeat_interval,
        grace_period=grace_period, poll_interval=poll_interval,
    )
    try:
        summary = run_worker(study, opts)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        raise typer.Exit(130) from None
    typer.echo(summary.format())
    raise typer.Exit(summary.exit_code)


@app.command("status")
def status_cmd(
    study: StudyArg,
    storage: str = typer.Option(None, "--storage", envvar="HARNESS_STORAGE", help=_STORAGE_HELP),
) -> None:
    """Show the study's trials by state (completed / running / waiting / failed) with failure reasons
    (and, for a sequential study, its current look and each arm's state).

    With --storage, the records other machines stored there are copied into this machine's
    study folder first.
    """
    from harness.cli.results_cmds import bring_records, named_study
    from harness.runner.run import study_status

    where = str(named_study(study).path)
    report = study_status(where, storage)
    if storage and report.started:
        bring_records(where, storage)
    typer.echo(report.format())
