"""Where `harness report` writes: reports/<checked study name>/ or the user's --out, never elsewhere.

A study folder's name comes from its study.yaml, or, when that no longer loads, from its raw
fields or its trial records: any string. An unsafe one is a one-line error (exit 2) and nothing
is written; --out chosen by the user may be anywhere. Bad --alpha and an --out that is a file
are one-line errors too.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_main import run_main
from report_fakes import design, full_disk_at, make_results, write_study_folder

from harness.cli import report_cmds
from harness.decide.rules import ReadOptions
from harness.errors import ConfigError, HarnessError
from harness.report import write_report
from harness.tracking.study_ref import checked_name, path_under

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

EVIL = "../../../../elsewhere/x"


def files_under(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*")}


@pytest.fixture
def deep_cwd(tmp_path, monkeypatch):
    """A working folder 4 levels down in tmp_path, so ``reports/../../../../`` stays in tmp_path."""
    cwd = tmp_path / "w1" / "w2" / "w3" / "w4"
    cwd.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    return cwd


@pytest.mark.parametrize(
    "snapshot",
    [
        pytest.param(design(name=EVIL), id="study.yaml-names-it"),  # does not load: its raw name is used
        pytest.param(design(), id="records-name-it"),  # study.yaml without a name: the records' name is used
    ],
)
def test_unsafe_study_name_is_one_line_and_nothing_written(deep_cwd, tmp_path, monkeypatch, capsys, snapshot):
    folder = write_study_folder(deep_cwd / "runs" / "evil", EVIL, snapshot)
    before = files_under(tmp_path)
    with pytest.warns(UserWarning, match="using its raw fields"):
        code, out, err = run_main(monkeypatch, capsys, "report", str(folder))
    assert code == 2, (out, err)
    resolved, error = err.strip().splitlines()  # what STUDY resolved to, then the one-line error
    assert resolved.startswith("study ") and error.startswith("error: "), err
    assert EVIL in error and "must not contain a path separator" in error and "--out" in error
    assert "Traceback" not in err
    assert files_under(tmp_path) == before, "nothing is written anywhere"
    assert not (tmp_path / "w1" / "elsewhere").exists()


def test_unsafe_study_name_with_out_writes_where_the_user_chose(deep_cwd, tmp_path, monkeypatch, capsys):
    folder = write_study_folder(deep_cwd / "runs" / "evil", EVIL, design(name=EVIL))
    chosen = tmp_path / "anywhere" / "rep"
    with pytest.warns(UserWarning):
        code, _out, err = run_main(monkeypatch, capsys, "report", str(folder), "--out", str(chosen))
    assert code == 0, err
    assert (chosen / "index.html").is_file() and (chosen / "results.csv").is_file()
    assert not (deep_cwd / "reports").exists() and not (tmp_path / "w1" / "elsewhere").exists()


def test_safe_study_name_goes_to_reports(deep_cwd, monkeypatch, capsys):
    folder = write_study_folder(deep_cwd / "runs" / "fine", "fine", design(name="fine"))
    code, _out, err = run_main(monkeypatch, capsys, "report", str(folder))
    assert code == 0, err
    assert (deep_cwd / "reports" / "fine" / "index.html").is_file()
    # the report folder and the plotly.js every report in reports/ shares
    assert sorted(p.name for p in (deep_cwd / "reports").iterdir()) == ["fine", "plotly.min.js"]


@pytest.mark.parametrize("name", [EVIL, "../x", "a/b", "..", ".", "/abs", "a\\b", "-x", "~root"])
def test_default_report_dir_refuses_unsafe_names(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    res = make_results()
    res.meta["study"] = name
    with pytest.raises(ConfigError, match="give --out DIR"):
        report_cmds.default_report_dir(res)
    assert not any(tmp_path.iterdir())
    res.meta["study"] = "synthetic"
    assert report_cmds.default_report_dir(res) == Path("reports") / "synthetic"


def test_path_under_checks_the_resolved_path(tmp_path):
    root = tmp_path / "reports"
    root.mkdir()
    assert path_under(root, "ok") == root / "ok"
    (tmp_path / "outside").mkdir()
    (root / "linked").symlink_to(tmp_path / "outside")  # a safe name whose folder leads elsewhere
    with pytest.raises(ConfigError, match="outside"):
        path_under(root, "linked")
    with pytest.raises(ConfigError, match="must not contain '..'"):
        path_under(root, "a..b")
    with pytest.raises(ConfigError, match="must be a string"):
        checked_name(None)
    assert checked_name("ok.v2-1_a") == "ok.v2-1_a"


# ------------------------------------------------------------------ --alpha and --out as one-line errors


@pytest.fixture
def fake_load(monkeypatch):
    res = make_results()
    monkeypatch.setattr(report_cmds, "_load", lambda study: res)
    return res


@pytest.mark.parametrize("alpha", ["2", "-0.1", "nan", "0", "1", "inf"])
def test_bad_alpha_is_one_line_exit_2(fake_load, tmp_path, monkeypatch, capsys, alpha):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(monkeypatch, capsys, "report", "s.yaml", "--alpha", alpha, "--out", "rep")
    assert code == 2, (out, err)
    assert err.startswith("error: alpha must be between 0 and 1") and len(err.strip().splitlines()) == 1, err
    assert not any(tmp_path.iterdir()), "nothing written"


def test_good_alpha_is_used(fake_load, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, _out, err = run_main(monkeypatch, capsys, "report", "s.yaml", "--alpha", "0.1", "--out", "rep")
    assert code == 0, err
    assert "alpha=0.1" in (tmp_path / "rep" / "index.html").read_text()


def test_out_that_is_a_file_is_one_line_exit_2(fake_load, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("keep me")
    for out_arg in ("afile", "afile/sub"):
        code, out, err = run_main(monkeypatch, capsys, "report", "s.yaml", "--out", out_arg)
        assert code == 2, (out, err)
        assert err.startswith(f"error: --out {out_arg}: ") and len(err.strip().splitlines()) == 1, err
        assert "Traceback" not in err
    assert (tmp_path / "afile").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_write_report_refuses_a_file_and_reports_os_errors(tmp_path):
    res = make_results()
    target = tmp_path / "afile"
    target.write_text("x")
    with pytest.raises(ConfigError, match="exists and is not a folder"):
        write_report(res, target, ReadOptions(n_permutations=200))
    with pytest.raises(HarnessError, match="cannot write the report in .*afile/sub: Not a directory"):
        write_report(res, target / "sub", ReadOptions(n_permutations=200))
    with pytest.raises(ConfigError, match="alpha must be between 0 and 1"):
        write_report(res, tmp_path / "rep", ReadOptions(alpha=float("nan"), n_permutations=200))
    assert not (tmp_path / "rep").exists()


def test_a_full_disk_is_one_line_exit_2_naming_the_file(fake_load, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert run_main(monkeypatch, capsys, "report", "s.yaml", "--out", "rep")[0] == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "rep").iterdir()}
    fake_load.trials["wall_time_s"] += 1.0  # every file of the next report differs
    opened = full_disk_at(monkeypatch, 2)
    code, out, err = run_main(monkeypatch, capsys, "report", "s.yaml", "--out", "rep")
    assert code == 2, (out, err)
    assert err == f"error: cannot write rep/{opened[1]}: No space left on device (no file of the report was replaced)\n"
    assert {p.name: p.read_bytes() for p in (tmp_path / "rep").iterdir()} == before
