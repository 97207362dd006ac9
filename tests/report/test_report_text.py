"""What the study and its trials wrote reaches the report as text (issue 27, item 10): the study's
description under the title, and failure reasons and trial warnings escaped in summary.md as in
index.html (``<``, ``>``, ``&``, and ``|`` inside a table cell), never read as markup."""

from __future__ import annotations

from report_fakes import design, make_results, write_study_folder

from harness.decide.rules import ReadOptions
from harness.report import write_report
from harness.tracking.results import load_results

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(2)>"
REASON = f"ValueError: {SCRIPT} | {IMG} & more"
WARNING = f"no_learning_signal: {IMG} every group was degenerate"


def test_the_description_is_shown_under_the_title(tmp_path):
    text = "Does a wider clip help? <b>not bold</b> & no markup"
    folder = write_study_folder(tmp_path / "runs" / "clip", "clip", design(name="clip", description=text))
    index = write_report(load_results(folder), tmp_path / "rep", ReadOptions(n_permutations=200))
    page = index.read_text(encoding="utf-8")
    escaped = "Does a wider clip help? &lt;b&gt;not bold&lt;/b&gt; &amp; no markup"
    assert f"<h1>Study report: clip</h1>\n<p>{escaped}</p>" in page
    md = (index.parent / "summary.md").read_text(encoding="utf-8").splitlines()
    assert md[:3] == ["# Study report: clip", "", escaped]


def test_summary_md_escapes_failure_reasons_and_warnings(tmp_path):
    res = make_results(failed={"big-s1": REASON})
    res.trials["warnings"] = [WARNING if arm == "null" else "" for arm in res.trials["arm"]]
    index = write_report(res, tmp_path / "out", ReadOptions(n_permutations=200))
    for text in (index.read_text(encoding="utf-8"), (index.parent / "summary.md").read_text(encoding="utf-8")):
        assert SCRIPT not in text and "<img" not in text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "&lt;img src=x onerror=alert(2)&gt;" in text
    md = (index.parent / "summary.md").read_text(encoding="utf-8")
    escaped = "ValueError: &lt;script&gt;alert(1)&lt;/script&gt; \\| &lt;img src=x onerror=alert(2)&gt; &amp; more"
    assert f"| big-s1 | big | 1 | {escaped} |" in md  # one cell: its | escaped, the row keeps 4 columns
    assert (
        "> **WARNING no_learning_signal in completed trials (null 5 of 5); null seed 0: "
        "&lt;img src=x onerror=alert(2)&gt; every group was degenerate**"
    ) in md
