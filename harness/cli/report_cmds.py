"""Commands: ``harness report``, ``harness compare``, ``harness noise-floor``.

Thin: load the results frames, call ``harness.report``, print. The terminal shows the same
numbers as the report (same functions, same formatting).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd
import typer

from harness.cli.app import app
from harness.errors import ConfigError, HarnessError

_STORAGE_HELP = (
    "the study's Optuna storage URL (e.g. PostgreSQL shared by many machines): first copy here "
    "the records other machines stored there"
)


def _load(study: str, storage: str | None = None):
    """Results frames of a study (YAML file or study folder), completed from ``storage``."""
    from harness.cli.results_cmds import bring_records
    from harness.tracking.results import load_results

    bring_records(study, storage)
    return load_results(study, storage=storage)


def _results(study: str, storage: str | None):
    """``_load`` for a command; called with the study alone when no storage is given."""
    return _load(study) if storage is None else _load(study, storage)


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, pd.DataFrame):
        return _jsonable(x.to_dict(orient="records"))
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return None if not math.isfinite(float(x)) else float(x)
    if x is None or isinstance(x, (str, int)):
        return x
    if x is pd.NA or x is pd.NaT:
        return None
    return str(x)


#: where ``harness report`` writes without ``--out``: ``reports/<study name>/``
REPORTS_ROOT = Path("reports")


def default_report_dir(results, root: Path = REPORTS_ROOT) -> Path:
    """``reports/<study>/``: the study's name checked, the folder checked to stay in ``reports/``.

    The name comes from the results (a study.yaml that no longer loads, or the trial records,
    may carry any string): an unsafe one is a one-line ``ConfigError`` and nothing is written.
    """
    from harness.report.analysis import study_name
    from harness.tracking.study_ref import path_under

    name = study_name(results)
    try:
        return path_under(root, name, "study name")
    except HarnessError as err:
        where = (getattr(results, "meta", None) or {}).get("study_dir")
        source = f" (study folder {where})" if where else ""
        raise ConfigError(
            f"cannot write the report of study {name!r}{source} under {root}/: {err}; "
            "give --out DIR to choose the folder"
        ) from None


def check_report_dir(out: Path) -> None:
    """``--out``: any folder the user chooses, but not an existing file (nothing written yet)."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a folder; give a folder for the report")
    for parent in out.parents:
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                raise ConfigError(f"--out {out}: {parent} is not a folder")
            break


@app.command("report")
def report(
    study: str = typer.Argument(..., help="study YAML file or study output folder"),
    out: Optional[Path] = typer.Option(None, "--out", help="output folder (default: reports/<study>/)"),
    correction: str = typer.Option("holm", "--correction", help="multiple-comparison correction: holm | bh"),
    alpha: float = typer.Option(0.05, "--alpha", help="significance level, between 0 and 1"),
    storage: Optional[str] = typer.Option(None, "--storage", envvar="HARNESS_STORAGE", help=_STORAGE_HELP),
) -> None:
    """Write index.html (+ plotly.min.js), summary.md and results.csv for a study."""
    from harness.report import write_report
    from harness.report.analysis import check_alpha, check_correction

    check_alpha(alpha)  # bad input fails before any record is read or anything written
    check_correction(correction)
    if out is not None:
        check_report_dir(out)
    results = _results(study, storage)
    out_dir = out if out is not None else default_report_dir(results)
    path = write_report(results, out_dir, correction=correction, alpha=alpha)
    typer.echo(f"wrote {path} (with summary.md, results.csv, plotly.min.js in {path.parent})")


@app.command("compare")
def compare(
    study: str = typer.Argument(..., help="study YAML file or study output folder"),
    arm_a: str = typer.Argument(..., help="condition to test"),
    arm_b: str = typer.Argument(..., help="condition to test it against (the control)"),
    metric: Optional[str] = typer.Option(None, "--metric", help="final metric (default: the primary metric)"),
    correction: str = typer.Option("holm", "--correction", help="holm | bh"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    storage: Optional[str] = typer.Option(None, "--storage", envvar="HARNESS_STORAGE", help=_STORAGE_HELP),
) -> None:
    """ARM_A vs ARM_B on one metric: difference, CI, p, effect size, verdict, robustness checks."""
    from harness.report.analysis import compare_pair
    from harness.report.tables import fmt, fmt_p

    row = compare_pair(_results(study, storage), arm_a, arm_b, metric=metric, correction=correction)
    if as_json:
        typer.echo(json.dumps(_jsonable(row), indent=2))
        return
    design = f"paired over {row['n']} seeds" if row["paired"] else f"{row['n']} vs {row['n_control']} seeds"
    lines = [
        f"{row['condition']} vs {row['control']} on {row['metric']} ({row['direction']}), {design}",
        f"  mean            {fmt(row['mean'])} vs {fmt(row['mean_control'])}",
        f"  difference      {fmt(row['diff'])}  CI [{fmt(row['ci_low'])}, {fmt(row['ci_high'])}]",
        f"  test            {row['test'] or '—'}  p {fmt_p(row['p_value'])}",
        f"  corrected p     {fmt_p(row['p_adjusted'])}  (correction: {row['correction']})",
        f"  Hedges g        {fmt(row['hedges_g'], 3)}",
        f"  P(improvement)  {fmt(row['prob_improvement'], 3)}",
        f"  pairing r       {fmt(row['pair_correlation'], 3)}",
        f"  verdict         {row['verdict']}  (seeds needed per arm: {fmt(row['seeds_needed'])})",
    ]
    if row["reason"]:
        lines.append(f"  note            {row['reason']}")
    if row["robustness"]:
        lines.append("robustness checks:")
        for chk in row["robustness"]:
            lines.append(f"  {chk['check']:<14}  p {fmt_p(chk['p_value']):<8}  {chk['note'] or ''}".rstrip())
    typer.echo("\n".join(lines))


@app.command("noise-floor")
def noise_floor(
    study: str = typer.Argument(..., help="study YAML file or study output folder"),
    metric: Optional[str] = typer.Option(None, "--metric", help="final metric (default: the primary metric)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    storage: Optional[str] = typer.Option(None, "--storage", envvar="HARNESS_STORAGE", help=_STORAGE_HELP),
) -> None:
    """Per condition: seed std (with CI), MDE at the seeds run, seeds needed for a 1-sd effect."""
    from harness.report.analysis import check_metric, noise_floor_table
    from harness.report.tables import noise_table_display

    results = _results(study, storage)
    metric = check_metric(results, metric)
    table = noise_floor_table(results, metric)
    if as_json:
        typer.echo(json.dumps(_jsonable({"metric": metric, "conditions": table}), indent=2))
        return
    typer.echo(f"noise floor of {metric}")
    typer.echo(noise_table_display(table).to_string(index=False))
