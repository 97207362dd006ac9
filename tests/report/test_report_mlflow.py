"""``harness report`` attaches the report and the verdicts to the study's MLflow parent run.

The store is a local sqlite one in a tmp folder, as the runner makes by default
(``<study_dir>/mlflow.db``); an empty migrated store is made once and copied per test.
"""

from __future__ import annotations

import shutil
import socket
import time
from pathlib import Path

import pytest
from analysis_fakes import make_analysis
from report_fakes import make_results
from typer.testing import CliRunner

import harness.decide.analysis
import harness.report
from harness.cli import app, report_cmds
from harness.decide.rules import ReadOptions
from harness.report import MIRRORED_FILES, mirror_report, verdict_tags
from harness.tracking.mlflow_layout import REPORT_ARTIFACTS, mlflow_key
from harness.tracking.mlflow_mirror import Tracker

STUDY = "hand-built"  # the study name of make_analysis()


@pytest.fixture(scope="module")
def empty_store(tmp_path_factory) -> Path:
    from mlflow import MlflowClient

    path = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()  # runs the migrations once
    return path


@pytest.fixture
def mirrored(tmp_path, empty_store) -> tuple[Path, str]:
    """A study folder mirrored to its own store, and the id of its parent run."""
    study_dir = tmp_path / "study"
    study_dir.mkdir()
    shutil.copy(empty_store, study_dir / "mlflow.db")
    tracker = Tracker(None, study_dir, STUDY)
    assert tracker.prepare()
    return study_dir, tracker.parent_run_id()


def report_dir(folder: Path, text: str = "v1") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in MIRRORED_FILES:
        (folder / name).write_text(f"{name} {text}\n", encoding="utf-8")
    return folder


def parent_run(study_dir: Path, run_id: str):
    tracker = Tracker(None, study_dir, STUDY)
    return tracker.client, tracker.client.get_run(run_id)


def test_report_files_and_verdict_tags_land_on_the_parent_run(mirrored, tmp_path):
    study_dir, run_id = mirrored
    analysis = make_analysis()
    analysis.verdicts.loc[2, "condition"] = "pass@1[kl]"  # a name MLflow rejects as a key
    line = mirror_report(analysis, report_dir(tmp_path / "rep"), study_dir)
    assert line.startswith(f"MLflow: report attached to the study's parent run {run_id} at sqlite:///")
    client, run = parent_run(study_dir, run_id)
    tags = run.data.tags
    assert tags["verdict.up"] == "better" and tags["verdict.same"] == "equivalent"
    odd = mlflow_key("verdict.pass@1[kl]")
    assert odd != "verdict.pass@1[kl]" and tags[odd] == "better"
    assert tags["harness.role"] == "study"
    listed = sorted(a.path for a in client.list_artifacts(run_id, REPORT_ARTIFACTS))
    assert listed == sorted(f"{REPORT_ARTIFACTS}/{n}" for n in MIRRORED_FILES)
    got = Path(client.download_artifacts(run_id, f"{REPORT_ARTIFACTS}/summary.md", str(tmp_path / "dl")))
    assert got.read_text(encoding="utf-8") == "summary.md v1\n"


def test_a_second_report_replaces_the_first_on_the_same_parent(mirrored, tmp_path):
    study_dir, run_id = mirrored
    mirror_report(make_analysis(), report_dir(tmp_path / "rep"), study_dir)
    analysis = make_analysis()
    analysis.verdicts.loc[0, "verdict"] = "inconclusive"
    mirror_report(analysis, report_dir(tmp_path / "rep", "v2"), study_dir)
    client, run = parent_run(study_dir, run_id)
    assert run.data.tags["verdict.up"] == "inconclusive"
    got = Path(client.download_artifacts(run_id, f"{REPORT_ARTIFACTS}/index.html", str(tmp_path / "dl")))
    assert got.read_text(encoding="utf-8") == "index.html v2\n"
    parents = client.search_runs([run.info.experiment_id], "tags.`harness.role` = 'study'")
    assert [r.info.run_id for r in parents] == [run_id]


def test_verdict_tags_one_per_comparison():
    assert verdict_tags(make_analysis()) == {
        "verdict.up": "better",
        "verdict.same": "equivalent",
        "verdict.tiny": "better",
    }


def test_a_study_not_mirrored_is_left_alone_with_one_line(tmp_path):
    study_dir = tmp_path / "study"
    study_dir.mkdir()
    line = mirror_report(make_analysis(), report_dir(tmp_path / "rep"), study_dir)
    assert line == (
        f"MLflow: the report was not uploaded: the study is not mirrored to MLflow "
        f"(no {study_dir / 'mlflow.db'}; give --tracking-uri for a server)"
    )
    assert list(study_dir.iterdir()) == []  # no store created
    assert "no study folder" in mirror_report(make_analysis(), tmp_path / "rep", None)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_server_is_one_line_without_credentials(tmp_path):
    uri = f"http://alice:s3cret@127.0.0.1:{closed_port()}"
    start = time.monotonic()
    line = mirror_report(make_analysis(), report_dir(tmp_path / "rep"), tmp_path, uri)
    assert time.monotonic() - start < 5
    assert line.startswith("MLflow: the report was not uploaded to http://alice:***@127.0.0.1:")
    assert "TrackingUnavailable: cannot connect" in line and "s3cret" not in line and "\n" not in line


@pytest.fixture
def cli(monkeypatch):
    """``harness report`` on fake results; the analysis is the hand-built one and the writer
    writes plain files (their content is tested in test_report_files), recording ``smooth``."""
    results = make_results()
    seen = {}

    def fake_write(analysis, out_dir, *, smooth):
        seen["smooth"] = smooth
        return report_dir(Path(out_dir)) / "index.html"

    def fake_load(study):
        seen["loaded"] = study
        return results

    monkeypatch.setattr(report_cmds, "_load", fake_load)
    monkeypatch.setattr(harness.decide.analysis, "analyze", lambda res, *options, **kw: make_analysis())
    monkeypatch.setattr(harness.report, "write_analysis", fake_write)
    return results, seen, CliRunner()


def test_report_command_uploads_to_the_mirrored_study(cli, mirrored, tmp_path):
    results, seen, runner = cli
    study_dir, run_id = mirrored
    results.meta["study_dir"] = str(study_dir)
    r = runner.invoke(app, ["report", "s.yaml", "--out", str(tmp_path / "rep"), "--smooth", "5"])
    assert r.exit_code == 0, r.output
    assert seen["smooth"] == 5
    assert f"report attached to the study's parent run {run_id}" in r.output
    _, run = parent_run(study_dir, run_id)
    assert run.data.tags["verdict.tiny"] == "better"


def test_report_command_tracking_uri_from_the_environment(cli, mirrored, tmp_path):
    results, _, runner = cli
    study_dir, run_id = mirrored
    results.meta["study_dir"] = str(tmp_path)  # no store of its own: the URI says where
    uri = f"sqlite:///{study_dir / 'mlflow.db'}"
    r = runner.invoke(app, ["report", "s.yaml", "--out", str(tmp_path / "rep")], env={"HARNESS_TRACKING_URI": uri})
    assert r.exit_code == 0, r.output
    assert f"parent run {run_id} at {uri}" in r.output


def test_report_command_still_writes_when_mlflow_is_unreachable(cli, tmp_path):
    results, _, runner = cli
    results.meta["study_dir"] = str(tmp_path)
    out = tmp_path / "rep"
    r = runner.invoke(
        app, ["report", "s.yaml", "--out", str(out), "--tracking-uri", f"http://127.0.0.1:{closed_port()}"]
    )
    assert r.exit_code == 0, r.output
    assert (out / "index.html").is_file()
    lines = r.output.splitlines()
    assert lines[0].startswith(f"wrote {out / 'index.html'}")
    assert lines[1].startswith("MLflow: the report was not uploaded to http://127.0.0.1:") and len(lines) == 2
    assert "Traceback" not in r.output


@pytest.mark.parametrize("bad", ["0", "-3"])
def test_report_command_refuses_a_bad_smooth_before_loading(cli, tmp_path, bad):
    _, seen, runner = cli
    r = runner.invoke(app, ["report", "s.yaml", "--out", str(tmp_path / "rep"), "--smooth", bad])
    assert r.exit_code != 0 and "smooth must be a whole number of logged points" in str(r.exception)
    assert seen == {} and not (tmp_path / "rep").exists()


def test_report_command_end_to_end_on_a_mirrored_study(tmp_path, empty_store, monkeypatch):
    """The real analysis and writers: the written files are the ones on the parent run."""
    results = make_results()
    study_dir = tmp_path / "study"
    study_dir.mkdir()
    shutil.copy(empty_store, study_dir / "mlflow.db")
    results.meta["study_dir"] = str(study_dir)
    monkeypatch.setattr(report_cmds, "_load", lambda study: results)
    out = tmp_path / "rep"
    r = CliRunner().invoke(app, ["report", "s.yaml", "--out", str(out), "--min-effect", "0.05"])
    assert r.exit_code == 0, r.output
    tracker = Tracker(None, study_dir, results.meta["study"])
    run_id = tracker.parent_run_id()
    assert f"report attached to the study's parent run {run_id}" in r.output
    analysis = harness.decide.analysis.analyze(results, ReadOptions(min_effect=0.05))
    assert (
        {k: v for k, v in tracker.client.get_run(run_id).data.tags.items() if k.startswith("verdict.")}
        == verdict_tags(analysis)
        == {"verdict.big": "better", "verdict.null": analysis.verdicts["verdict"].iloc[1]}
    )
    got = Path(tracker.client.download_artifacts(run_id, f"{REPORT_ARTIFACTS}/results.csv", str(tmp_path / "dl")))
    assert got.read_bytes() == (out / "results.csv").read_bytes()
