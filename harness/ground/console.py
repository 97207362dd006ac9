"""The one way the harness says things on stderr: one whole line per message, flushed at once,
with the speaker's prefix (``[harness]``, ``[worker w1]``, ``warm start:``)."""

from __future__ import annotations

import sys
from typing import TextIO


def say(message: str, *, prefix: str = "[harness]", stream: TextIO | None = None) -> None:
    """Print ``prefix message`` as whole lines: a message without its newline never runs into
    the next one, and a multi-line message keeps the prefix on its first line only."""
    text = f"{prefix} {message}" if prefix else message
    print(text.rstrip("\n"), file=stream or sys.stderr, flush=True)


def warn(message: str, *, prefix: str = "[harness]", stream: TextIO | None = None) -> None:
    """``say`` a warning: ``[harness] warning: ...``."""
    say(f"warning: {message}", prefix=prefix, stream=stream)


#: the warnings said once per process (``warn_once``)
_SAID: set[str] = set()


def warn_once(message: str, *, prefix: str = "[harness]", stream: TextIO | None = None) -> None:
    """``warn`` unless this process said the same warning already (a command that reads the
    same files twice says what is wrong with them once)."""
    if message not in _SAID:
        _SAID.add(message)
        warn(message, prefix=prefix, stream=stream)


def error(message: str, *, stream: TextIO | None = None) -> None:
    """The CLI's one-line error: ``error: ...`` (no prefix: it is the command's last word)."""
    say(f"error: {message}", prefix="", stream=stream)
