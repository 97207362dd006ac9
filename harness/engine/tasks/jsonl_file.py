"""Reading a JSONL file a user names (a task's problems, a reward model's preference pairs): every
problem with the file is one ``ConfigError`` line naming it, and the line where there is one."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.errors import ConfigError

#: the largest JSONL file read (GSM8K's train split is 4 MiB): a larger one is refused before it is read
MAX_JSONL_BYTES = 512 * 2**20
#: what ``errors="surrogateescape"`` makes of a byte that is not UTF-8 (text decoded from UTF-8 holds no surrogate)
_UNDECODED = re.compile("[\udc80-\udcff]")


def jsonl_records(path: str | Path, what: str, lines_hint: str) -> Iterator[tuple[str, Any]]:
    """Each non-blank line of the file as (``file:line``, its JSON value). ``what`` names where the
    path came from (``task.path``), ``lines_hint`` what a line holds, for the error of a missing file."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"{what} {str(path)!r}: no such file; give a JSONL file of {lines_hint} lines")
    size = file.stat().st_size
    if size > MAX_JSONL_BYTES:
        raise ConfigError(
            f"{what} {str(path)!r}: {_size(size)}, over the {_size(MAX_JSONL_BYTES)} a JSONL file "
            "may have; give a subset of it"
        )
    try:
        # undecodable bytes become lone surrogates, so the line that holds one is known: a
        # UnicodeDecodeError's offset is into the decoder's read buffer, not the file
        with file.open(encoding="utf-8", errors="surrogateescape") as handle:
            for number, line in enumerate(handle, 1):
                if bad := _UNDECODED.search(line):
                    raise ConfigError(
                        f"{path}:{number}: not UTF-8 text (byte 0x{ord(bad.group()) - 0xDC00:02x} "
                        f"at column {bad.start() + 1}); save the file as UTF-8"
                    )
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except (ValueError, RecursionError) as err:  # JSONDecodeError, too many digits, too deep
                    detail = f"{err.msg} at column {err.colno}" if isinstance(err, json.JSONDecodeError) else str(err)
                    raise ConfigError(f"{path}:{number}: not valid JSON ({detail})") from None
                yield f"{path}:{number}", record
    except OSError as err:
        raise ConfigError(f"{path}: cannot be read ({err.strerror or err})") from None


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n:,} bytes"
