"""Commands: ``harness run``, ``harness worker`` and ``harness status``.

Thin wrappers over :mod:`harness.runner.run`. Exit codes: 0 every trial completed; 1 some failed
(a summary says which and why); 2 bad input, nothing started; 130 interrupted (re-run resumes).

The runner's flags are the fields of :class:`~harness.runner.options.RunOptions`: a command names
the fields it takes (:func:`run_options`) and is called with the options built from them, so a
new knob is one field and its name in a command's list.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Union, get_args, get_origin

import typer

from harness.cli.app import app
from harness.cli.results_cmds import StudyArg
from harness.ground.exit_codes import EXIT_INTERRUPTED
from harness.runner.options import RunOptions, flag_of

#: the runner flags `harness --help` leaves out (tests, tuning the timings); the heartbeat interval and
#: the grace period are shown: README tells a user with slow machines or networks to set them
HIDDEN = {"trial_fn", "tracking", "poll_interval", "kill_grace"}


def _cli_type(annotation) -> type:
    """The plain type typer parses a field into: ``Seconds | None`` -> ``float``."""
    if get_origin(annotation) in (Union, types.UnionType):
        annotation = next(arg for arg in get_args(annotation) if arg is not type(None))
    return get_args(annotation)[0] if get_origin(annotation) is Annotated else annotation


def _flag(name: str) -> inspect.Parameter:
    """The typer option of field ``name``: its flag, default, help and environment variable."""
    field = RunOptions.model_fields[name]
    extra = field.json_schema_extra or {}
    if not extra.get("flag"):
        raise TypeError(f"RunOptions.{name} is not a command-line option")
    kind = _cli_type(field.annotation)
    flag = flag_of(name)
    decls = [f"{flag}/--no-{flag[2:]}"] if kind is bool else [flag]
    option = typer.Option(
        field.default,
        *decls,
        help=field.description,
        envvar=extra.get("env"),
        hidden=name in HIDDEN,
        show_default=field.default is not None and kind is not bool,
    )
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=option,
        annotation=kind if field.default is not None else kind | None,
    )


def run_options(*names: str) -> Callable:
    """A command that takes these fields of :class:`RunOptions` as flags (in this order) and is
    called with ``opts=RunOptions(...)`` built from them (a bad value: one line, exit 2)."""

    def decorate(command: Callable) -> Callable:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "opts"]

        def with_options(**given):
            opts = RunOptions(**{name: given.pop(name) for name in names})
            return command(**given, opts=opts)

        functools.update_wrapper(
            with_options, command, assigned=("__module__", "__name__", "__qualname__", "__doc__"), updated=()
        )
        with_options.__signature__ = signature.replace(parameters=[*own, *map(_flag, names)])
        return with_options

    return decorate


def _finish(run: Callable[[], object]) -> None:
    """Print the summary of ``run()`` and exit with its code (130 when Ctrl-C came first)."""
    try:
        summary = run()
    except KeyboardInterrupt:  # before the workers started: nothing is running
        typer.echo("interrupted", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    typer.echo(summary.format())
    raise typer.Exit(summary.exit_code)


@app.command("run")
@run_options(
    "executor",
    "address",
    "workers",
    "storage",
    "tracking_uri",
    "retries",
    "trial_timeout",
    "new_version",
    "trial_fn",
    "tracking",
    "heartbeat_interval",
    "grace_period",
    "poll_interval",
    "kill_grace",
)
def run_cmd(study: Path = typer.Argument(..., help="study file (YAML)"), *, opts: RunOptions) -> None:
    """Run a study: queue its trials (idempotently) and execute them; re-running resumes."""
    from harness.runner.run import run_study

    _finish(lambda: run_study(study, opts))


@app.command("worker")
@run_options(
    "storage",
    "workers",
    "tracking_uri",
    "trial_timeout",
    "trial_fn",
    "tracking",
    "heartbeat_interval",
    "grace_period",
    "poll_interval",
)
def worker_cmd(
    study: Path = typer.Argument(..., help="study file (YAML) or its output folder"), *, opts: RunOptions
) -> None:
    """Join a running study from this machine: work on its queue until the study is finished."""
    from harness.runner.run import run_worker

    _finish(lambda: run_worker(study, opts))


@app.command("status")
@run_options("storage")
def status_cmd(study: StudyArg, *, opts: RunOptions) -> None:
    """Show the study's trials by state (completed / running / waiting / failed) with failure reasons
    (and, for a sequential study, its current look and each arm's state).

    With --storage, the records other machines stored there are copied into this machine's
    study folder first.
    """
    from harness.cli.results_cmds import bring_records, named_study
    from harness.runner.run import study_status

    where = str(named_study(study).path)
    report = study_status(where, opts.storage)
    if opts.storage and report.started:
        bring_records(where, opts.storage)
    typer.echo(report.format())


@app.command("cancel")
@run_options("storage")
def cancel_cmd(study: StudyArg, *, opts: RunOptions) -> None:
    """Cancel the study's Slurm jobs and Ray tasks and put their running trials back in the queue
    (resumable: `harness run` on the study runs what is left)."""
    from harness.cli.results_cmds import named_study
    from harness.runner.executors.cancel import cancel_study

    report = cancel_study(str(named_study(study).path), opts.storage)
    typer.echo("\n".join(report.lines()))
