"""Errors the user can fix. Each message names the problem and what to do about it.

Here too the two ways an error is written down: :func:`one_line` (the one formatter for a
reason on one line) and :class:`ErrorRecord` (an error crossing a process boundary as a typed
``{"type", "message"}`` record, never parsed back out of text).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


class HarnessError(Exception):
    """Base class: the CLI prints these as one line, without a traceback."""


class ConfigError(HarnessError, ValueError):
    """Bad input (a study file, a preset name, an override): nothing has been started."""


def unknown_name(kind: str, name: str, valid) -> ConfigError:
    """The standard 'unknown X' error, listing the valid choices."""
    return ConfigError(f"unknown {kind} {name!r}; valid: {', '.join(sorted(valid))}")


class NonFiniteError(HarnessError):
    """A loss or metric became NaN or infinite: the trial fails with this as its reason."""


def squeeze(text: str, limit: int = 500) -> str:
    """``text`` on one line (runs of white space, newlines included, become one space), cut to
    ``limit`` characters with ``...``."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def one_line(err: BaseException, limit: int = 500) -> str:
    """``Type: message`` on one line: the reason recorded for a failed trial or printed for a
    failed step."""
    text = " ".join(str(err).split())
    return squeeze(f"{type(err).__name__}: {text}" if text else type(err).__name__, limit)


@dataclass(frozen=True)
class ErrorRecord:
    """An error as it crosses a process boundary: its type's name and its message, as data.

    A trial process writes one into its result file; the parent reads the fields, so whether a
    failure was, say, the seed check's own finding is a comparison of ``type``, not a prefix of a
    text that a message could happen to start with."""

    type: str
    message: str

    @classmethod
    def of(cls, err: BaseException, limit: int = 500) -> ErrorRecord:
        """``err`` as a record whose ``line()`` is ``one_line(err, limit)``: the message is cut
        to what is left of ``limit`` after ``Type: ``."""
        name = type(err).__name__
        return cls(type=name, message=squeeze(str(err), max(limit - len(name) - 2, 4)))

    @classmethod
    def from_dict(cls, data: dict) -> ErrorRecord:
        return cls(type=str(data.get("type", "Error")), message=str(data.get("message", "")))

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    def line(self) -> str:
        """``Type: message`` on one line, as a failed trial's reason reads."""
        return f"{self.type}: {self.message}" if self.message else self.type
