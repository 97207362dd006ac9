"""Commands: `harness algorithms` (the presets and their parts) and `harness trial` (one run)."""

from __future__ import annotations

import json
from typing import Any

import typer
import yaml
from pydantic import ValidationError

from harness.algorithms import describe_presets, resolve_algorithm
from harness.cli.app import EXIT_SOME_FAILED, app
from harness.engine.spec import TrialSpec
from harness.errors import ConfigError
from harness.study.field_errors import format_validation_error

SECTIONS = ("task", "model", "warmstart", "train")


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
        value = yaml.safe_load(raw) if raw else ""
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


def build_spec(algorithm: str, task: str | None, steps: int | None, seed: int, assignments: list[str]) -> TrialSpec:
    overrides, sections = parse_assignments(assignments)
    if task is not None:
        sections.setdefault("task", {})["name"] = task
    if steps is not None:
        sections.setdefault("train", {})["steps"] = steps
    try:
        return TrialSpec(arm=algorithm, seed=seed, algorithm=resolve_algorithm(algorithm, overrides), **sections)
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, TrialSpec)) from err


@app.command()
def algorithms(as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """List the algorithm presets with their parts, defaults and citations."""
    presets = describe_presets()
    if as_json:
        typer.echo(json.dumps(presets, indent=2))
        return
    for preset in presets:
        typer.echo(f"{preset['name']}")
        for key, value in preset.items():
            if key != "name":
                typer.echo(f"    {key}: {value}")


@app.command()
def trial(
    algorithm: str = typer.Option(..., "--algorithm", "-a", help="preset name (see `harness algorithms`)"),
    task: str | None = typer.Option(None, help="task name (addition, sorting, gsm8k_jsonl)"),
    steps: int | None = typer.Option(None, help="RL steps"),
    seed: int = typer.Option(0, help="trial seed"),
    assignments: list[str] = typer.Option(
        [], "--set", help="override: eps_high=0.28 (algorithm) or train.lr / model.name / task.path=..."
    ),
    as_json: bool = typer.Option(False, "--json", help="print the final metrics as JSON"),
) -> None:
    """Run one training trial and print its final metrics."""
    spec = build_spec(algorithm, task, steps, seed, assignments)
    from harness.engine.trial import run_trial
    from harness.runner.child import one_line

    try:
        result = run_trial(spec)
    except ConfigError:
        raise  # bad input found once the trial looked at it: one line, exit 2 (harness.cli.app.main)
    except Exception as err:  # noqa: BLE001 - any failure of the trial itself is its one-line reason
        typer.echo(f"error: trial {spec.trial_id} failed: {one_line(err)}", err=True)
        raise typer.Exit(EXIT_SOME_FAILED) from None
    if as_json:
        typer.echo(json.dumps({"trial_id": result.trial_id, "final": result.final}, indent=2))
        return
    typer.echo(f"trial {result.trial_id} ({result.wall_time_s:.1f} s)")
    for key, value in sorted(result.final.items()):
        typer.echo(f"  {key:32s} {value:.4g}")
