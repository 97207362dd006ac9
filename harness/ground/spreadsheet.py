"""CSV cells a spreadsheet opens as text, never as a formula (OWASP's advice on CSV injection).

Excel, LibreOffice and Google Sheets run a cell that starts with ``=``, ``+``, ``-``, ``@``, a tab
or a carriage return as a formula, and the CSV files the harness writes carry text from outside:
arm and benchmark names from a tidy table or an MLflow experiment, prompt ids from a dataset,
metric names and failure reasons from a program. Such a text cell is written with a leading
single quote, which a spreadsheet shows as text. Numbers are never touched (-0.05 stays a
number), nor text that is a plain number ("-3"), which a spreadsheet reads as that number.

A text cell that already starts with quotes before one of those characters gets one quote more,
so :func:`plain_cell` undoes :func:`safe_cell` exactly: the harness reads its own tidy CSV back.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

#: the first characters a spreadsheet reads as the start of a formula (OWASP)
FORMULA_STARTS = "=+-@\t\r"

_QUOTED_FORMULA = re.compile(r"'*[=+\-@\t\r]")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _needs_quote(text: str) -> bool:
    return bool(_QUOTED_FORMULA.match(text)) and not _PLAIN_NUMBER.fullmatch(text)


def safe_cell(value: Any) -> Any:
    """``value`` as a CSV cell: a text that a spreadsheet would run as a formula gets a leading quote."""
    return "'" + value if isinstance(value, str) and _needs_quote(value) else value


def plain_cell(value: Any) -> Any:
    """The text :func:`safe_cell` was given: one leading quote fewer where it added one."""
    if isinstance(value, str) and value.startswith("'") and _needs_quote(value[1:]):
        return value[1:]
    return value


def safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` to write as CSV: its column names and the cells of its text columns
    through :func:`safe_cell`; numeric columns as they are."""
    return _each_text_cell(frame, safe_cell)


def plain_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as read from a CSV :func:`safe_frame` wrote: its names and text cells as given."""
    return _each_text_cell(frame, plain_cell)


def _each_text_cell(frame: pd.DataFrame, cell: Callable[[Any], Any]) -> pd.DataFrame:
    """A copy of ``frame`` with ``cell`` applied to its column names and to each cell of its
    columns that are not numeric (by position: two columns may share a name)."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    out = frame.rename(columns=cell)
    for position in range(out.shape[1]):
        column = out.iloc[:, position]
        if not (is_numeric_dtype(column.dtype) or is_bool_dtype(column.dtype)):
            out.isetitem(position, column.map(cell))
    return out
