"""CSV cells from outside text reach a spreadsheet as text, never as a formula (OWASP: a leading
single quote before =, +, -, @, tab, carriage return); numbers stay numbers; the harness reads its
own quoted cells back as they were given (issue 37, item 8)."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from harness.ground.spreadsheet import plain_cell, plain_frame, safe_cell, safe_frame

FORMULAS = ['=HYPERLINK("http://x","y")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(1)", "\tpadded", "\rreturn"]


@pytest.mark.parametrize("text", FORMULAS)
def test_a_text_a_spreadsheet_would_run_gets_a_leading_quote(text):
    assert safe_cell(text) == "'" + text


@pytest.mark.parametrize("value", [-0.05, -3, 0.0, float("-inf"), None, "-0.05", "+3", "-1e-5", "grpo", "a=b", ""])
def test_numbers_and_harmless_text_are_written_as_they_are(value):
    assert safe_cell(value) is value


@pytest.mark.parametrize("text", [*FORMULAS, "'=x", "''-y", "'-3", "'plain", "grpo", "-0.05", "'"])
def test_reading_a_quoted_cell_back_gives_the_text(text):
    assert plain_cell(safe_cell(text)) == text


def test_a_frame_quotes_its_text_cells_and_names_and_keeps_its_numbers():
    frame = pd.DataFrame({"arm": ["=1+1", "grpo"], "@metric": [-0.05, 0.25], "seed": [0, 1], "note": [None, "-x"]})
    text = safe_frame(frame).to_csv(index=False)
    assert text.splitlines() == ["arm,'@metric,seed,note", "'=1+1,-0.05,0,", "grpo,0.25,1,'-x"]
    assert frame["arm"].tolist() == ["=1+1", "grpo"]  # the caller's frame is left alone
    back = plain_frame(pd.read_csv(io.StringIO(text)))
    assert back.columns.tolist() == frame.columns.tolist()
    assert back["arm"].tolist() == ["=1+1", "grpo"] and back["@metric"].tolist() == [-0.05, 0.25]
