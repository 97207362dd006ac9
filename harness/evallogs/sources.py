"""Which reader a file is for: ``--from`` names it, or the file's own shape says.

Evaluation tools' logs (lm-evaluation-harness, lighteval, Inspect) are read here into per-sample
tidy rows; a tidy table (CSV, Parquet, JSONL) is read by ``harness.tracking.tidy_results``. A
path no reader claims is refused in one line naming the readers."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Literal, get_args

import pandas as pd

from harness.errors import ConfigError
from harness.evallogs import inspect_logs, lighteval, lm_eval
from harness.evallogs.naming import RunNames, tidy_rows

#: ``--from`` values: the tools whose logs are read here, and a tidy table
Source = Literal["lm-eval", "lighteval", "inspect", "table"]
SOURCES: tuple[str, ...] = get_args(Source)
TOOLS: dict[str, ModuleType] = {"lm-eval": lm_eval, "lighteval": lighteval, "inspect": inspect_logs}


def source_of(path: Path, given: str | None, table_suffixes: tuple[str, ...]) -> Source:
    """The reader for ``path``: ``given`` (checked to be one of ``SOURCES``), else the tool whose
    output it looks like, else a tidy table by its suffix (``table_suffixes``: what the tidy-table
    reader reads, given by the caller, since that reader sits in ``tracking``)."""
    if given is not None and given not in SOURCES:
        raise ConfigError(f"--from {given!r}: give one of {', '.join(SOURCES)}")
    if not path.exists():
        raise ConfigError(f"{path}: no such file or folder")
    if given is not None:
        return given  # type: ignore[return-value]
    for name, tool in TOOLS.items():
        if tool.looks_like(path):
            return name  # type: ignore[return-value]
    if path.is_file() and path.suffix.lower() in table_suffixes:
        return "table"
    raise ConfigError(
        f"{path}: not a tidy table ({', '.join(table_suffixes)}) nor the logs of lm-evaluation-harness "
        "(--log_samples output), lighteval (--save-details) or Inspect (.eval / .json); give --from to say which"
    )


def read_tool_logs(path: Path, source: Source, score: str | None, names: RunNames) -> tuple[pd.DataFrame, str]:
    """The per-sample tidy rows of a tool's logs under ``path`` and a line naming what was read
    (the tool, its version, the score field)."""
    rows = TOOLS[source].read(path, score)
    if not len(rows.frame):
        raise ConfigError(f"{path}: {rows.tool} logs with no scored samples")
    return tidy_rows(rows, names), f"{rows.tool} logs in {path} (score: {rows.score})"
