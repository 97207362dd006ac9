"""Open index.html in headless Chromium: no JavaScript errors, every figure drawn by plotly."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from report_fakes import make_results

from harness.decide.rules import ReadOptions
from harness.report import write_report

CHROMIUM = next(
    (
        p
        for p in (
            "/usr/bin/chromium",
            shutil.which("chromium"),
            shutil.which("chromium-browser"),
            shutil.which("google-chrome"),
        )
        if p and Path(p).exists()
    ),
    None,
)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium); CI installs it"
)


def render(index: Path, tmp_path: Path) -> tuple[str, list[str]]:
    """The DOM after scripts ran, and the console errors chromium logged."""
    profile = tmp_path / "chromium-profile"
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=5000",
        "--dump-dom",
        index.resolve().as_uri(),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    errors = [
        line
        for line in proc.stderr.splitlines()
        if "CONSOLE" in line and re.search(r"error|uncaught|not defined", line, re.I)
    ]
    return proc.stdout, errors


def drawn_figures(dom: str) -> dict[str, bool]:
    """Figure div id -> whether plotly drew it (js-plotly-plot class and a main-svg inside)."""
    out = {}
    ids = re.findall(r'<div id="(fig-[\w-]+)"', dom)
    for i, div_id in enumerate(ids):
        start = dom.index(f'<div id="{div_id}"')
        end = dom.index(f'<div id="{ids[i + 1]}"') if i + 1 < len(ids) else len(dom)
        chunk = dom[start:end]
        tag = chunk[: chunk.index(">") + 1]
        out[div_id] = "js-plotly-plot" in tag and 'class="main-svg"' in chunk
    return out


def test_report_renders_in_chromium(tmp_path):
    index = write_report(make_results(pending={"big-s4": "running"}), tmp_path / "out", ReadOptions(n_permutations=500))
    dom, errors = render(index, tmp_path)
    assert errors == []
    figs = drawn_figures(dom)
    assert len(figs) == 6, figs
    assert all(figs.values()), figs


def test_a_report_in_the_reports_folder_draws_with_the_shared_plotly(tmp_path):
    """reports/<name>/ loads the one plotly.min.js in reports/ (../plotly.min.js), offline."""
    index = write_report(make_results(), Path("reports") / "shared", ReadOptions(n_permutations=500))
    assert not (index.parent / "plotly.min.js").exists() and Path("reports/plotly.min.js").is_file()
    dom, errors = render(index, tmp_path)
    assert errors == []
    figs = drawn_figures(dom)
    assert len(figs) == 6 and all(figs.values()), figs


def test_browser_check_catches_a_missing_plotly(tmp_path):
    """The check above can fail: without plotly.min.js nothing is drawn and the console says so."""
    index = write_report(make_results(), tmp_path / "out", ReadOptions(n_permutations=500))
    (index.parent / "plotly.min.js").unlink()
    dom, errors = render(index, tmp_path)
    figs = drawn_figures(dom)
    assert figs and not any(figs.values())
    assert errors, "chromium should report 'Plotly is not defined'"
