"""Commands: `harness algorithms` (the presets and their parts) and `harness trial` (one run).

`harness trial` keeps what it ran, like a study trial: its record goes to
``runs/trials/<name>/records/<trial_id>.json`` (``TRIALS_DIR``; ``--no-record`` skips it) and is
mirrored to MLflow (default store ``runs/trials/<name>/mlflow.db``), so ``harness results
runs/trials/<name>`` lists it. It uses the studies' warm-start cache (``.cache/harness``, keyed
by what the warm start reads), so a trial set up like a study's arm reuses that study's warm start.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import typer
import yaml
from pydantic import ValidationError

from harness.algorithms import describe_parts, describe_presets, resolve_algorithm
from harness.cli.app import app
from harness.engine.spec import TrialSpec
from harness.errors import ConfigError, HarnessError, one_line
from harness.ground.exit_codes import EXIT_SOME_FAILED
from harness.study.field_errors import format_validation_error
from harness.study.schema import check_name

SECTIONS = ("task", "model", "warmstart", "train")
TRIALS_DIR = Path("runs") / "trials"  # `harness trial` records: TRIALS_DIR/<name>/records/


def parse_assignments(pairs: list[str]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``key=value`` pairs: bare keys override the algorithm, ``section.key[.key]`` a spec section.

    Values are read as YAML scalars (``0.28``, ``true``, ``null``), never evaluated.
    """
    algorithm: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {pair!r}: expected key=value, e.g. --set eps_high=0.28")
        try:
            value = yaml.safe_load(raw) if raw else ""
        except yaml.YAMLError:
            raise ConfigError(f"--set {pair!r}: the value is not valid YAML; quote it, e.g. {key}='{raw}'") from None
        head, *path = key.split(".")
        if not path:
            algorithm[key] = value
            continue
        if head not in SECTIONS:
            raise ConfigError(f"--set {key!r}: unknown section {head!r}; valid: {', '.join(SECTIONS)}")
        target = sections.setdefault(head, {})
        for part in path[:-1]:
            target = target.setdefault(part, {})
        target[path[-1]] = value
    return algorithm, sections


def build_spec(
    algorithm: str, task: str | None, steps: int | None, seed: int, assignments: list[str], name: str = "adhoc"
) -> TrialSpec:
    overrides, sections = parse_assignments(assignments)
    if task is not None:
        sections.setdefault("task", {})["name"] = task
    if steps is not None:
        sections.setdefault("train", {})["steps"] = steps
    try:
        check_name(name, "--name")
    except ValueError as err:
        raise ConfigError(str(err)) from None
    try:
        return TrialSpec(
            study=name, arm=algorithm, seed=seed, algorithm=resolve_algorithm(algorithm, overrides), **sections
        )
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, TrialSpec)) from err


def keep_record(spec: TrialSpec, result, started_at: str, tracking_uri: str | None) -> str:
    """Write the trial's record (a re-run is the next attempt: the previous one is archived, not
    overwritten) and mirror it to MLflow; the line that says where it went."""
    import torch

    from harness.tracking.mlflow_mirror import Tracker
    from harness.tracking.records import (
        make_record,
        read_record,
        record_path,
        write_record,
    )

    folder = TRIALS_DIR / spec.study
    previous = record_path(folder, spec.trial_id)
    try:
        attempt = read_record(previous).attempt + 1 if previous.is_file() else 1
    except HarnessError:
        attempt = 1  # an unreadable record is replaced, as a study's worker replaces one
    device = "cuda" if spec.model.device != "cpu" and torch.cuda.is_available() else "cpu"
    record = make_record(spec, result, attempt=attempt, started_at=started_at, device=device)
    try:
        path = write_record(folder, record)
    except OSError as err:
        raise HarnessError(
            f"cannot write the trial's record under {folder} ({err.strerror or err}); "
            "free the space or pass --no-record"
        ) from None
    tracker = Tracker(tracking_uri, folder, spec.study)
    mirrored = tracker.log_record(record)  # on failure it warns, naming `harness mirror-to-mlflow`
    return f"record: {path}" + (f" (mirrored to MLflow {tracker.tracking_uri})" if mirrored else "")


@app.command()
def algorithms(
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    parts: bool = typer.Option(False, "--parts", help="list every part of every slot, with its citation, instead"),
) -> None:
    """List the algorithm presets with their parts, defaults and citations (--parts: the parts)."""
    rows = describe_parts() if parts else describe_presets()
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    if parts:
        for row in rows:
            reads = f" (reads {', '.join(row['reads'])})" if row["reads"] else ""
            typer.echo(f"{row['slot']}={row['name']}{reads}: {row['cites']}")
        return
    for preset in rows:
        typer.echo(f"{preset['name']}")
        for key, value in preset.items():
            if key != "name":
                typer.echo(f"    {key}: {value}")
    typer.echo("(every part of every slot, with its citation: harness algorithms --parts)")


@app.command()
def trial(
    algorithm: str = typer.Option(..., "--algorithm", "-a", help="preset name (see `harness algorithms`)"),
    task: str | None = typer.Option(None, help="task name (addition, sorting, gsm8k_jsonl)"),
    steps: int | None = typer.Option(None, help="RL steps"),
    seed: int = typer.Option(0, help="trial seed"),
    assignments: list[str] = typer.Option(
        [],
        "--set",
        metavar="KEY=VALUE",
        help="repeatable: an algorithm key (lr=1e-5, eps_high=0.28) or SECTION.KEY "
        "(train.steps=20, model.name=Qwen/Qwen2.5-0.5B, task.path=data/train.jsonl)",
    ),
    as_json: bool = typer.Option(False, "--json", help="print the final metrics as JSON"),
    record: bool = typer.Option(
        True, "--record/--no-record", help=f"write the trial's record under {TRIALS_DIR}/NAME/records/ and mirror it"
    ),
    name: str = typer.Option("adhoc", "--name", help=f"the folder under {TRIALS_DIR}/ (and MLflow experiment)"),
    tracking_uri: str | None = typer.Option(
        None,
        "--tracking-uri",
        envvar="HARNESS_TRACKING_URI",
        help=f"MLflow tracking URI (default: sqlite:///{TRIALS_DIR}/NAME/mlflow.db)",
    ),
) -> None:
    """Run one training trial, print its final metrics and keep its record."""
    spec = build_spec(algorithm, task, steps, seed, assignments, name)
    from harness.engine.spec import TrialResult
    from harness.runner.secret_pipe import conceal
    from harness.tracking.records import now_iso
    from harness.trainers.dispatch import run_trial

    # this process is a program trainer's parent: the URL leaves what /proc shows of it
    conceal(os.environ, ["HARNESS_TRACKING_URI"], [tracking_uri])

    started_at = now_iso()
    try:
        result = run_trial(spec)
    except ConfigError:
        raise  # bad input found once the trial looked at it: one line, exit 2 (harness.cli.app.main)
    except Exception as err:  # noqa: BLE001 - any failure of the trial itself is its one-line reason
        typer.echo(f"error: trial {spec.trial_id} failed: {one_line(err)}", err=True)
        if record:
            failed = TrialResult(trial_id=spec.trial_id, status="failed", error=one_line(err))
            typer.echo(keep_record(spec, failed, started_at, tracking_uri))
        raise typer.Exit(EXIT_SOME_FAILED) from None
    if as_json:
        payload = {"trial_id": result.trial_id, "final": result.final, "warnings": result.warnings}
        typer.echo(json.dumps(payload, indent=2))
    else:
        typer.echo(f"trial {result.trial_id} ({result.wall_time_s:.1f} s)")
        for key, value in sorted(result.final.items()):
            typer.echo(f"  {key:32s} {value:.4g}")
        for line in result.warnings:
            typer.echo(f"warning: {line}")
    if record:
        typer.echo(keep_record(spec, result, started_at, tracking_uri), err=as_json)
