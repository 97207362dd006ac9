"""Commands: `harness algorithms` (the presets and their parts) and `harness trial` (one run).

`harness trial` keeps what it ran, like a study trial: its record goes to
``runs/trials/<name>/records/<trial_id>.json`` (``TRIALS_DIR``; ``--no-record`` skips it) and is
mirrored to MLflow (default store ``runs/trials/<name>/mlflow.db``), so ``harness results
runs/trials/<name>`` lists it. It uses the studies' warm-start cache (``.cache/harness``, keyed
by what the warm start reads), so a trial set up like a study's arm reuses that study's warm start.
``--study FILE --arm NAME --seed N`` runs one trial of a study as its runner would
(``harness.cli.study_trial``), its record beside the study's.
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
from harness.cli.study_trial import StudyTrial, study_trial
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


def keep_record(
    spec: TrialSpec, result, started_at: str, tracking_uri: str | None, folder: Path, experiment: str
) -> str:
    """Write the trial's record under ``folder`` (a re-run is the next attempt: the previous one
    is archived, not overwritten) and mirror it to MLflow's ``experiment``; the line that says
    where it went."""
    import torch

    from harness.tracking.mlflow_mirror import Tracker
    from harness.tracking.records import (
        make_record,
        read_record,
        record_path,
        write_record,
    )

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
    tracker = Tracker(tracking_uri, folder, experiment)
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
            reads = f" (reads {', '.join(row['reads'] + row['inputs'])})" if row["reads"] or row["inputs"] else ""
            typer.echo(f"{row['slot']}={row['name']}{reads}: {row['cites']}")
        return
    for preset in rows:
        typer.echo(f"{preset['name']}")
        for key, value in preset.items():
            if key != "name":
                typer.echo(f"    {key}: {value}")
    typer.echo("(every part of every slot, with its citation: harness algorithms --parts)")


def _study_trial_only(given: dict[str, bool]) -> None:
    """Refuse the ad hoc trial's options beside --study: they would change the study's spec."""
    extra = [flag for flag, on in given.items() if on]
    if extra:
        raise ConfigError(
            f"{', '.join(extra)}: not with --study, whose trial is the study's own spec "
            "(only --steps shortens it); drop them, or run an ad hoc trial with --algorithm"
        )


def _which_trial(
    study: Path | None, arm: str | None, algorithm: str | None, seed: int | None, steps: int | None, adhoc: dict
) -> StudyTrial | None:
    """The study's trial (--study and --arm), or None for an ad hoc one (--algorithm)."""
    if study is None:
        if arm is not None:
            raise ConfigError("--arm names an arm of a study: give the study's file with --study")
        if algorithm is None:
            raise ConfigError(
                "give --algorithm (an ad hoc trial) or --study FILE --arm NAME (one trial of a study's arm)"
            )
        return None
    if algorithm is not None or arm is None:
        raise ConfigError("--study runs one trial of a study's arm: give --arm NAME (not --algorithm)")
    _study_trial_only(adhoc)
    return study_trial(study, arm, seed, steps)


@app.command()
def trial(
    algorithm: str | None = typer.Option(
        None, "--algorithm", "-a", help="preset name, for an ad hoc trial (see `harness algorithms`)"
    ),
    study: Path | None = typer.Option(
        None,
        "--study",
        help="a study's YAML file: run one trial of it (with --arm and --seed) exactly as `harness run` would; "
        "its record goes to <study folder>/trials/records/, apart from the study's results",
    ),
    arm: str | None = typer.Option(None, "--arm", help="with --study: the arm (or grid condition) to run"),
    task: str | None = typer.Option(None, help="task name (addition, sorting, gsm8k_jsonl)"),
    steps: int | None = typer.Option(
        None, help="RL steps; with --study, fewer than the arm's (shortened: its own trial id, said in its record)"
    ),
    seed: int | None = typer.Option(None, help="trial seed (default 0; with --study, the arm's first seed)"),
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
        help=f"MLflow tracking URI (default: sqlite:///{TRIALS_DIR}/NAME/mlflow.db; with --study, "
        "sqlite:///<study folder>/trials/mlflow.db, experiment <study>/trials)",
    ),
) -> None:
    """Run one training trial (ad hoc, or one of a study's), print its final metrics and keep its record."""
    adhoc = {"--task": task is not None, "--set": bool(assignments), "--name": name != "adhoc"}
    chosen = _which_trial(study, arm, algorithm, seed, steps, adhoc)
    if chosen is None:
        spec = build_spec(algorithm, task, steps, 0 if seed is None else seed, assignments, name)
        folder, experiment, noted = TRIALS_DIR / spec.study, spec.study, lambda result: result
    else:
        spec, folder, experiment, noted = chosen.spec, chosen.folder, chosen.experiment, chosen.noted
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
            failed = noted(TrialResult(trial_id=spec.trial_id, status="failed", error=one_line(err)))
            typer.echo(keep_record(spec, failed, started_at, tracking_uri, folder, experiment))
        raise typer.Exit(EXIT_SOME_FAILED) from None
    result = noted(result)
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
        typer.echo(keep_record(spec, result, started_at, tracking_uri, folder, experiment), err=as_json)
