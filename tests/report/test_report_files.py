"""write_report writes index.html (+ plotly.min.js once, relative), summary.md and results.csv, all or none."""

import errno
import os
import re
import stat
from pathlib import Path

import pandas as pd
import plotly.offline
import pytest
from report_fakes import FAILED_ID, FAILED_REASON, full_disk_at, make_results

from harness.decide.analysis import analyze
from harness.decide.rules import ReadOptions
from harness.errors import HarnessError
from harness.ground.files import atomic_write_all
from harness.report import write_analysis, write_report, written_line

N_PERM = 2000


def _write(res, tmp_path, **kw):
    return write_report(res, tmp_path / "out", ReadOptions(n_permutations=N_PERM, **kw))


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The report of the default synthetic study, written once for the read-only tests."""
    return _write(make_results(), tmp_path_factory.mktemp("report"))


def test_writes_all_files(written):
    index = written
    out = index.parent
    assert index == out / "index.html"
    assert sorted(p.name for p in out.iterdir()) == ["index.html", "plotly.min.js", "results.csv", "summary.md"]
    csv = pd.read_csv(out / "results.csv")
    assert len(csv) == 15 and set(csv["status"]) == {"completed", "failed"}
    assert csv.loc[csv["trial_id"] == FAILED_ID, "error"].item() == FAILED_REASON


def test_plotly_js_written_once_and_referenced_relatively(results, tmp_path):
    index = _write(results, tmp_path)
    _write(results, tmp_path)  # a second run reuses the folder
    out = index.parent
    assert sorted(p.name for p in out.iterdir()) == ["index.html", "plotly.min.js", "results.csv", "summary.md"]
    js = out / "plotly.min.js"
    assert js.read_text(encoding="utf-8") == plotly.offline.get_plotlyjs()
    assert [p.name for p in out.rglob("*.js")] == ["plotly.min.js"]
    page = index.read_text(encoding="utf-8")
    srcs = re.findall(r"<script[^>]*\bsrc\s*=\s*[\"']?([^\"' >]+)", page, flags=re.I)
    assert srcs == ["plotly.min.js"]
    assert not re.search(r"<script[^>]*src\s*=\s*[\"']?(https?:)?//", page, flags=re.I)
    assert "cdn.plot.ly" not in page
    assert len(page) < 1_000_000  # plotly.js is not inlined into the page
    figure_divs = re.findall(r'<div id="(fig-[\w-]+)" class="plotly-graph-div"', page)
    assert figure_divs[:2] == ["fig-forest", "fig-strip"] and len(figure_divs) == 6  # 2 + 2 metrics x 2 axes


def test_header_and_tables_in_html_and_markdown(written):
    index = written
    page = index.read_text(encoding="utf-8")
    md = (index.parent / "summary.md").read_text(encoding="utf-8")
    for text in (page, md):
        assert "synthetic" in text and "eval/accuracy (maximize)" in text
        assert "big vs grpo; null vs grpo" in text
        assert "abc1234" in text and "0.1.0" in text
        assert FAILED_ID in text and "NonFiniteError: loss is nan at step 7" in text
        assert "1 trial failed" in text
        assert "STILL RUNNING" not in text
        assert "better" in text and "NO MIN_EFFECT" in text
        assert "seq-mean-token-sum-norm" in text  # config-diff table
        assert "Noise floor" in text and "Cost" in text
    assert "## What differs between the arms" in md
    assert "| param | grpo | big | null |" in md
    assert "| algorithm.eps_high | 0.2 | 0.28 | 0.2 |" in md


def test_still_running_header(make, tmp_path):
    res = make(pending={"big-s4": "running", "null-s3": "waiting"})
    index = _write(res, tmp_path)
    page = index.read_text(encoding="utf-8")
    md = (index.parent / "summary.md").read_text(encoding="utf-8")
    for text in (page, md):
        assert "STILL RUNNING: 2 of 15 trials are still running or waiting" in text
        assert "drawn from the 12 completed trials" in text
    assert '<div class="state">STILL RUNNING' in page
    assert "Trials still running or waiting" in md


def test_cannot_reject_wording(make, tmp_path):
    index = _write(make(seeds=(0, 1, 2), failed={}), tmp_path)
    md = (index.parent / "summary.md").read_text(encoding="utf-8")
    assert "cannot reject at n=3" in md
    assert "no effect" not in md.replace("not evidence of no effect", "")


def test_html_escapes_reasons(make, tmp_path):
    res = make(failed={"big-s1": "ValueError: <script>alert(1)</script>"})
    page = _write(res, tmp_path).read_text(encoding="utf-8")
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_full_disk_leaves_the_previous_report_whole(make, tmp_path, monkeypatch):
    """Issue 27, item 6: every file of a report is written to a temporary first and renamed only
    when all are written; a full disk at the second leaves every previous file byte for byte and
    no temporary, and the one-line error names the report file, not its temporary."""
    index = _write(make(), tmp_path)
    out = index.parent
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    opened = full_disk_at(monkeypatch, 2)
    with pytest.raises(HarnessError) as caught:
        _write(make(seeds=(0, 1, 2), failed={}), tmp_path)  # another report: every file would change
    assert len(opened) == 2, "the write stops at the full disk"
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before, "every file as it was, no temporary"
    message = str(caught.value)
    assert message == (f"cannot write {out / opened[1]}: No space left on device (no file of the report was replaced)")
    assert ".partial" not in message and len(message.splitlines()) == 1


def test_all_or_none_leaves_every_file_or_none(tmp_path, monkeypatch):
    (tmp_path / "a").write_text("old a")
    (tmp_path / "b").write_text("old b")
    opened = full_disk_at(monkeypatch, 2)
    with pytest.raises(OSError) as caught:
        atomic_write_all({tmp_path / "a": "new a", tmp_path / "b": "new b", tmp_path / "c": "new c"})
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(tmp_path / "b")
    assert opened == ["a", "b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]
    assert (tmp_path / "a").read_text() == "old a" and (tmp_path / "b").read_text() == "old b"
    monkeypatch.undo()
    assert atomic_write_all({tmp_path / "a": "new a", tmp_path / "c": b"new c"}) == [tmp_path / "a", tmp_path / "c"]
    assert [(tmp_path / n).read_text() for n in "abc"] == ["new a", "old b", "new c"]


@pytest.fixture(scope="module")
def analysis():
    return analyze(make_results(), ReadOptions(n_permutations=200))


def _src(index) -> list[str]:
    return re.findall(r"<script[^>]*\bsrc\s*=\s*[\"']?([^\"' >]+)", index.read_text(encoding="utf-8"), flags=re.I)


def test_reports_in_the_reports_folder_share_one_plotly_js(analysis):
    """reports/<name>/ (the harness's own folder, the tests' cwd): one plotly.min.js in reports/,
    loaded by each page as ../plotly.min.js; the copy an earlier harness left beside a page goes."""
    Path("reports/b").mkdir(parents=True)
    (Path("reports/b") / "plotly.min.js").write_text("an earlier copy")
    a = write_analysis(analysis, Path("reports") / "a")
    b = write_analysis(analysis, (Path("reports") / "b").resolve())  # --out naming it another way
    nested = write_analysis(analysis, Path("reports") / "a" / "pass@2")  # decide's further metric
    assert sorted(p.relative_to("reports").as_posix() for p in Path("reports").rglob("*.js")) == ["plotly.min.js"]
    assert Path("reports/plotly.min.js").read_text(encoding="utf-8") == plotly.offline.get_plotlyjs()
    assert _src(a) == _src(b) == ["../plotly.min.js"] and _src(nested) == ["../../plotly.min.js"]
    assert written_line(a) == (
        "wrote reports/a/index.html (with summary.md, results.csv in reports/a; plotly.min.js shared in reports)"
    )


def test_a_report_elsewhere_keeps_its_own_plotly_js(analysis, tmp_path):
    """A folder the user chose outside reports/ (even one called reports): its own copy, beside it."""
    index = write_analysis(analysis, tmp_path / "reports" / "mine")
    assert [p.name for p in tmp_path.rglob("*.js")] == ["plotly.min.js"]
    assert (index.parent / "plotly.min.js").is_file() and _src(index) == ["plotly.min.js"]
    assert written_line(index) == f"wrote {index} (with summary.md, results.csv, plotly.min.js in {index.parent})"


def test_report_files_are_written_with_the_user_s_umask(analysis):
    old = os.umask(0o022)
    try:
        index = write_analysis(analysis, Path("reports") / "a")
    finally:
        os.umask(old)
    files = [*index.parent.iterdir(), Path("reports/plotly.min.js")]
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in files} == {
        "index.html": 0o644, "summary.md": 0o644, "results.csv": 0o644, "plotly.min.js": 0o644
    }  # fmt: skip
