"""Commands: ``harness report``, ``harness compare``, ``harness noise-floor``.

Thin: load the results frames, decide with ``harness.decide``, draw and write with
``harness.report``, print. The terminal shows the same numbers as the report (same functions,
same formatting).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from harness.cli.app import app
from harness.cli.results_cmds import StudyArg
from harness.errors import ConfigError, HarnessError
from harness.ground.folders import REPORTS_ROOT

_STORAGE_HELP = (
    "the study's Optuna storage URL (e.g. PostgreSQL shared by many machines): first copy here "
    "the records other machines stored there"
)


def _load(study: str, storage: str | None = None):
    """Results frames of a study (name, YAML file or study folder), completed from ``storage``."""
    from harness.cli.results_cmds import bring_records, named_study
    from harness.tracking.results import load_results

    where = str(named_study(study).path)
    bring_records(where, storage)
    return load_results(where, storage=storage)


def _results(study: str, storage: str | None):
    """``_load`` for a command; called with the study alone when no storage is given."""
    return _load(study) if storage is None else _load(study, storage)


def default_report_dir(results, root: Path = REPORTS_ROOT) -> Path:
    """``reports/<study>/``: the study's name checked, the folder checked to stay in ``reports/``.

    The name comes from the results (a study.yaml that no longer loads, or the trial records,
    may carry any string): an unsafe one is a one-line ``ConfigError`` and nothing is written.
    """
    from harness.decide.frames import meta_of, study_name
    from harness.tracking.study_ref import path_under

    name = study_name(results)
    try:
        return path_under(root, name, "study name")
    except HarnessError as err:
        where = meta_of(results).study_dir
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


_MIN_EFFECT_HELP = "smallest difference worth knowing about, in the metric's units (default: the study's min_effect)"


@app.command("report")
def report(
    study: StudyArg,
    out: Path | None = typer.Option(None, "--out", help="output folder (default: reports/<study>/)"),
    correction: str = typer.Option(
        "bonferroni", "--correction", help="multiple-comparison correction: bonferroni | none"
    ),
    alpha: float = typer.Option(0.05, "--alpha", help="significance level, between 0 and 1"),
    min_effect: float | None = typer.Option(None, "--min-effect", help=_MIN_EFFECT_HELP),
    storage: str | None = typer.Option(None, "--storage", envvar="HARNESS_STORAGE", help=_STORAGE_HELP),
    smooth: int = typer.Option(
        1, "--smooth", help="draw training curves as a moving average of N logged points (1 = off)"
    ),
    tracking_uri: str | None = typer.Option(
        None,
        "--tracking-uri",
        envvar="HARNESS_TRACKING_URI",
        help="MLflow tracking URI the study is mirrored to (default: sqlite:///<study_dir>/mlflow.db if it exists)",
    ),
) -> None:
    """Write index.html (+ plotly.min.js), summary.md and results.csv for a study; attach them and
    the verdicts to the study's MLflow parent run when the study is mirrored there."""
    from harness.decide.analysis import analyze
    from harness.decide.frames import meta_of
    from harness.decide.rules import ReadOptions
    from harness.report import mirror_report, write_analysis, written_line
    from harness.report.figures import check_smooth
    from harness.tracking.mlflow_mirror import require_existing_store

    # bad input fails before any record is read or anything written
    options = ReadOptions(alpha=alpha, correction=correction, min_effect=min_effect)
    check_smooth(smooth)
    require_existing_store(tracking_uri)
    if out is not None:
        check_report_dir(out)
    results = _results(study, storage)
    out_dir = out if out is not None else default_report_dir(results)
    analysis = analyze(results, options)
    path = write_analysis(analysis, out_dir, smooth=smooth)
    typer.echo(written_line(path))
    typer.echo(mirror_report(analysis, path.parent, meta_of(results).study_dir, tracking_uri))


@app.command("compare")
def compare(
    study: StudyArg,
    arm_a: str = typer.Argument(..., help="condition to test"),
    arm_b: str = typer.Argument(..., help="condition to test it against (the control)"),
    metric: str | None = typer.Option(None, "--metric", help="final metric (default: the primary metric)"),
    correction: str = typer.Option("bonferroni", "--correction", help="bonferroni | none"),
    min_effect: float | None = typer.Option(None, "--min-effect", help=_MIN_EFFECT_HELP),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    storage: str | None = typer.Option(None, "--storage", envvar="HARNESS_STORAGE", help=_STORAGE_HELP),
) -> None:
    """ARM_A vs ARM_B on one metric: difference, the verdict's interval, verdict, seeds to decide."""
    from harness.decide.analysis import compare_pair
    from harness.decide.rules import ReadOptions
    from harness.report.cells import fmt, fmt_p, fmt_seeds, jsonable, verdict_label

    options = ReadOptions(correction=correction, min_effect=min_effect)
    row = compare_pair(_results(study, storage), arm_a, arm_b, metric=metric, options=options)
    if as_json:
        typer.echo(json.dumps(jsonable(row), indent=2))
        return
    design = f"paired over {row['n']} seeds" if row["paired"] else f"{row['n']} vs {row['n_control']} seeds"
    margin = fmt(row["min_effect"]) if row["min_effect"] is not None else "not set (no equivalence verdict)"
    lines = [
        f"{row['condition']} vs {row['control']} on {row['metric']} ({row['direction']}), {design}",
        f"  mean            {fmt(row['mean'])} vs {fmt(row['mean_control'])}",
        f"  difference      {fmt(row['diff'])}  interval [{fmt(row['ci_low'])}, {fmt(row['ci_high'])}] "
        f"at {fmt(row['ci_level'])}",
        f"  test            {row['test'] or '—'}  p {fmt_p(row['p_value'])}, adjusted {fmt_p(row['p_adjusted'])}",
        f"  family          {row['correction']}",
        f"  min_effect      {margin}",
        f"  failed trials   {row['failed']} vs {row['failed_control']}",
        f"  Hedges g        {fmt(row['hedges_g'], 3)}",
        f"  verdict         {verdict_label(row)}",
        f"  seeds to decide {fmt_seeds(row['seeds_needed_null'])} (true difference 0), "
        f"{fmt_seeds(row['seeds_needed_effect'])} (true difference at the planning effect)",
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
    study: StudyArg,
    metric: str | None = typer.Option(None, "--metric", help="final metric (default: the primary metric)"),
    min_effect: float | None = typer.Option(None, "--min-effect", help=_MIN_EFFECT_HELP),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    storage: str | None = typer.Option(None, "--storage", envvar="HARNESS_STORAGE", help=_STORAGE_HELP),
) -> None:
    """Per condition: the sd of trial means (with CI); and the noise split by source (the training-seed
    sd is one component of it) with what more budget buys."""
    from harness.decide.analysis import analyze
    from harness.decide.frames import check_metric, meta_of
    from harness.decide.noise import noise_floor_table
    from harness.decide.rules import ReadOptions
    from harness.report.cells import jsonable
    from harness.report.noise_tables import components_display, noise_table_display

    options = ReadOptions(min_effect=min_effect)
    results = _results(study, storage)
    metric = check_metric(results, metric)
    if metric == meta_of(results).primary_metric:
        analysis = analyze(results, options, curve_metrics=[])
        table, line, components = analysis.noise_floor, analysis.header["noise_line"], analysis.components
        level = analysis.header["ci_level"]
    else:
        table, line, components, level = noise_floor_table(results, metric, effect=min_effect), "", None, 0.95
    if as_json:
        typer.echo(
            json.dumps(
                jsonable(
                    {"metric": metric, "level": level, "summary": line, "conditions": table, "components": components}
                ),
                indent=2,
            )
        )
        return
    typer.echo(f"noise floor of {metric}")
    if line:
        typer.echo(line)
    typer.echo(noise_table_display(table).to_string(index=False))
    if components is not None and len(components):
        typer.echo("by source:")
        typer.echo(components_display(analysis).to_string(index=False))
