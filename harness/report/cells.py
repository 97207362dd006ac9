"""The cells of the report's display tables: one way to format a number, a p-value, a seed count,
an interval and a level, and the Section a writer draws, shared by every table module and by the
terminal output."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from harness.decide.comparisons import SEEDS_SEARCH_LIMIT

DASH = "—"


@dataclass
class Section:
    key: str
    title: str
    table: pd.DataFrame  # all cells are strings
    caption: str = ""
    notes: list[str] = field(default_factory=list)  # shown as a list under the table


def jsonable(x: Any) -> Any:
    """A report value as plain JSON (what ``--json`` prints): frames become lists of rows, numpy
    scalars Python ones, and a NaN, an infinity or a missing value ``None``."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, pd.DataFrame):
        return jsonable(x.to_dict(orient="records"))
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


def fmt(x, digits: int = 4) -> str:
    if x is None:
        return DASH
    if isinstance(x, str):  # a label (an arm may be called "nan"), never parsed as a number
        return x or DASH
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    try:
        xf = float(x)
    except (TypeError, ValueError):
        return str(x)
    if not np.isfinite(xf):
        return DASH
    if xf.is_integer() and abs(xf) < 1e15 and digits >= 4:
        return str(int(xf))
    return f"{xf:.{digits}g}"


def fmt_p(p) -> str:
    return fmt(p, 3)


def fmt_seeds(n) -> str:
    """Seeds per arm; past the planner's search limit, the limit itself ("> 10000")."""
    if n is not None and np.isfinite(n) and n > SEEDS_SEARCH_LIMIT:
        return f"> {SEEDS_SEARCH_LIMIT}"
    return fmt(n)


def fmt_ci(lo, hi) -> str:
    if lo is None or hi is None or not (np.isfinite(lo) and np.isfinite(hi)):
        return DASH
    return f"[{fmt(lo)}, {fmt(hi)}]"


def fmt_pct(alpha: float) -> str:
    return f"{int(round((1 - alpha) * 100))}%"


def fmt_level(level) -> str:
    return f"{float(level) * 100:.4g}%" if level is not None and np.isfinite(level) else DASH


def verdict_label(row) -> str:
    """A verdict row's label, flagged when its effect is real but smaller than min_effect."""
    return row["verdict"] + (" (real but smaller than min_effect)" if row["smaller_than_min_effect"] else "")
