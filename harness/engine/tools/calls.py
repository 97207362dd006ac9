"""Finding the tool calls in a policy turn: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.

Model output is only ever read with ``json.loads``; whatever does not parse into a call is kept
as an invalid call with a one-line reason, so the reward can penalise it and the model can be told.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"


@dataclass(frozen=True)
class ParsedCall:
    """One ``<tool_call>`` block: ``raw`` is the text between the tags; ``name`` and
    ``arguments`` are set when it is a valid call, ``error`` says why not otherwise."""

    raw: str
    name: str | None
    arguments: dict | None
    error: str | None

    @property
    def valid(self) -> bool:
        return self.error is None


def parse_calls(text: str) -> list[ParsedCall]:
    """Every ``<tool_call>...</tool_call>`` block of ``text`` in order, valid or not."""
    return [_parse(raw) for raw in _blocks(text)]


def _blocks(text: str) -> Iterator[str]:
    """The text between each open tag and the first close tag after it, left to right (what the
    lazy pattern ``<tool_call>(.*?)</tool_call>`` matches), in one pass: once no close tag
    follows an open tag none follows a later one, so the search stops there instead of
    rescanning the rest of the text from every further open tag (quadratic in a turn that
    repeats the open tag)."""
    start = text.find(OPEN_TAG)
    while start >= 0:
        body = start + len(OPEN_TAG)
        end = text.find(CLOSE_TAG, body)
        if end < 0:
            return
        yield text[body:end]
        start = text.find(OPEN_TAG, end + len(CLOSE_TAG))


def unclosed(text: str) -> bool:
    """True when ``text`` has a different number of opening and closing call tags."""
    return text.count(OPEN_TAG) != text.count(CLOSE_TAG)


def _parse(raw: str) -> ParsedCall:
    def invalid(error: str) -> ParsedCall:
        return ParsedCall(raw=raw, name=None, arguments=None, error=error)

    try:
        call = json.loads(raw)
    except json.JSONDecodeError as err:
        return invalid(f"not valid JSON: {err.msg} at char {err.pos}")
    except (ValueError, RecursionError) as err:  # an integer too long to convert, nesting too deep
        return invalid(f"not valid JSON: {type(err).__name__}")
    if not isinstance(call, dict):
        kind = type(call).__name__
        return invalid(f'a call must be a JSON object {{"name": ..., "arguments": {{...}}}}, not {kind}')
    name, arguments = call.get("name"), call.get("arguments")
    if not isinstance(name, str) or not name:
        return invalid('the call has no "name" string')
    if not isinstance(arguments, dict):
        return invalid('the call has no "arguments" object')
    return ParsedCall(raw=raw, name=name, arguments=arguments, error=None)
