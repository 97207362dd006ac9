"""Study reports: what :mod:`harness.decide` worked out, drawn and written. Plotly figures,
display tables, HTML / Markdown / CSV writers; nothing here decides anything.

``write_report(results, out_dir)`` analyses the results (``harness.decide.analysis.analyze``)
and writes ``index.html``, ``summary.md`` and ``results.csv`` (+ ``plotly.min.js``, shared by
the reports in ``reports/``, else beside the page), all of them or none (a full disk leaves the
previous report as it was), and returns the path of ``index.html``; ``written_line`` says where
they went and ``console_lines`` gives the verdicts a command prints; ``mirror_report`` attaches
those files and the verdicts to the study's MLflow parent run.
"""

from __future__ import annotations

from pathlib import Path

from harness.decide.analysis import Analysis, analyze
from harness.decide.comparisons import EVAL_ONLY_LABELS, UNTESTED
from harness.decide.rules import ReadOptions
from harness.errors import ConfigError, HarnessError
from harness.ground.files import atomic_write_all
from harness.ground.spreadsheet import safe_frame
from harness.report.figures import all_figures, check_smooth
from harness.report.html_report import PLOTLY_JS, plotly_home, plotly_js_to_write, plotly_src, render_html
from harness.report.markdown import render_markdown
from harness.report.verdict_lines import console_lines

#: the report files attached to the study's MLflow parent run (plotly.min.js stays local)
MIRRORED_FILES = ("index.html", "summary.md", "results.csv")


def write_report(
    results, out_dir, options: ReadOptions | None = None, *, curve_metrics: list[str] | None = None, smooth: int = 1
) -> Path:
    """Write the report of ``results`` into ``out_dir``, read under ``options`` (a command's
    alpha, correction, power, ``min_effect`` overriding the study's, permutation draws and seed;
    None: the defaults); returns the path of ``index.html``.

    ``out_dir`` is created if missing (it is the caller's choice: ``harness report`` derives
    its default from the checked study name). An ``out_dir`` that is an existing file, or a
    folder that cannot be created or written, is a one-line ``HarnessError``. ``smooth`` > 1
    draws the training curves as a trailing moving average over that many logged points.
    """
    check_smooth(smooth)
    return write_analysis(analyze(results, options, curve_metrics=curve_metrics), out_dir, smooth=smooth)


def write_analysis(analysis: Analysis, out_dir, *, smooth: int = 1) -> Path:
    """``write_report`` after the analysis, for a caller that uses the analysis again."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"report folder {out} exists and is not a folder")
    figures = all_figures(analysis, smooth=check_smooth(smooth))
    files = {}
    home = plotly_home(out)
    js = plotly_js_to_write(home)
    if js is not None:
        files[home / PLOTLY_JS] = js
    files[out / "results.csv"] = safe_frame(analysis.trials).to_csv(index=False)
    files[out / "summary.md"] = render_markdown(analysis)
    page = render_html(analysis, figures, plotly_js=plotly_src(out, home))
    files[out / "index.html"] = page  # renamed last: the page comes with the rest
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        why = f"{err.strerror}: {err.filename}" if err.strerror and err.filename else (err.strerror or str(err))
        raise HarnessError(f"cannot write the report in {out}: {why}") from None
    try:
        atomic_write_all(files)
    except OSError as err:  # it names the report file, not its temporary
        raise HarnessError(
            f"cannot write {err.filename}: {err.strerror or err} (no file of the report was replaced)"
        ) from None
    if home != out:  # the copy an earlier harness wrote beside the page, loaded no more
        (out / PLOTLY_JS).unlink(missing_ok=True)
    return out / "index.html"


def written_line(index: Path) -> str:
    """What a command says once the report is written: where its files are, plotly.min.js too."""
    home = plotly_home(index.parent)
    if home == index.parent:
        return f"wrote {index} (with summary.md, results.csv, plotly.min.js in {index.parent})"
    return f"wrote {index} (with summary.md, results.csv in {index.parent}; plotly.min.js shared in {home})"


#: the most characters of a verdict's note an MLflow tag carries (MLflow's own limit is larger)
NOTE_TAG_CHARS = 1000


def verdict_tags(analysis: Analysis) -> dict[str, str]:
    """``verdict.<condition>`` -> verdict for each comparison and, for a study with benchmarks,
    ``verdict.<benchmark>.<condition>`` for each benchmark and ``verdict.overall.<condition>`` for
    the overall verdict across them (no benchmark is named ``overall``), keys as MLflow accepts
    them; an ``untested`` or eval-only verdict also gets ``verdict_note.`` with the same suffix,
    its reason (why it could not be tested; what an eval-only verdict is conditional on)."""
    from harness.tracking.mlflow_layout import mlflow_key
    from harness.tracking.tidy_results import OVERALL

    tables = [("", analysis.verdicts)]
    if analysis.benchmarks is not None:
        b = analysis.benchmarks
        tables += [
            (f"{name}.", b.verdicts[b.verdicts["benchmark"] == name]) for name in dict.fromkeys(b.verdicts["benchmark"])
        ]
        tables.append((f"{OVERALL}.", b.overall))
    tags = {}
    for prefix, v in tables:
        for c, label, reason in zip(v["condition"], v["verdict"], v["reason"]):
            tags[mlflow_key(f"verdict.{prefix}{c}")] = str(label)
            if label == UNTESTED or label in EVAL_ONLY_LABELS:
                tags[mlflow_key(f"verdict_note.{prefix}{c}")] = str(reason)[:NOTE_TAG_CHARS]
    return tags


def mirror_report(analysis: Analysis, report_dir, study_dir, tracking_uri: str | None = None) -> str:
    """Attach the report files and verdict tags to the study's MLflow parent run.

    ``tracking_uri=None`` means the study's own store, used only if the study was mirrored
    there (``<study_dir>/mlflow.db`` exists). Never raises: the report is written already, so
    any failure is the returned line, which says what was (not) uploaded and why.
    """
    from harness.ground.urls import redact_url
    from harness.tracking.mlflow_mirror import Tracker, failure_text

    not_sent = "MLflow: the report was not uploaded"
    if study_dir is None:
        return f"{not_sent}: the results name no study folder"
    store = Path(study_dir) / "mlflow.db"
    if tracking_uri is None and not store.is_file():
        return f"{not_sent}: the study is not mirrored to MLflow (no {store}; give --tracking-uri for a server)"
    tracker = Tracker(tracking_uri, study_dir, analysis.header["study"])
    where = redact_url(tracker.tracking_uri)
    tags = verdict_tags(analysis)
    try:
        run_id = tracker.log_report([Path(report_dir) / name for name in MIRRORED_FILES], tags)
    except Exception as err:  # noqa: BLE001 - the written report stands whatever MLflow does
        return f"{not_sent} to {where}: {failure_text(err, tracker.tracking_uri)}"
    return (
        f"MLflow: report attached to the study's parent run {run_id} at {where} "
        f"({', '.join(MIRRORED_FILES)} under report/; {len(tags)} verdict tags)"
    )


__all__ = [
    "MIRRORED_FILES",
    "console_lines",
    "mirror_report",
    "verdict_tags",
    "write_analysis",
    "write_report",
    "written_line",
]
