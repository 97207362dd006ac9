"""Finding tool calls in a turn: valid ones, every kind of invalid one, several per turn, tags."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from harness.engine.tools import CLOSE_TAG, OPEN_TAG, parse_calls, unclosed


def _call(body: str) -> str:
    return f"{OPEN_TAG}{body}{CLOSE_TAG}"


def test_a_valid_call():
    [call] = parse_calls("Let me compute. " + _call('{"name": "calculator", "arguments": {"expression": "2+2"}}'))
    assert call.valid and call.error is None
    assert call.name == "calculator"
    assert call.arguments == {"expression": "2+2"}
    assert call.raw == '{"name": "calculator", "arguments": {"expression": "2+2"}}'


def test_newlines_inside_and_several_calls_in_one_turn():
    text = (
        f'{OPEN_TAG}\n{{\n  "name": "lookup",\n  "arguments": {{"key": "a"}}\n}}\n{CLOSE_TAG}\n'
        "and then\n" + _call('{"name": "calculator", "arguments": {"expression": "1"}}') + _call("not json")
    )
    calls = parse_calls(text)
    assert [c.name for c in calls] == ["lookup", "calculator", None]
    assert [c.valid for c in calls] == [True, True, False]
    assert calls[0].arguments == {"key": "a"}


def test_no_calls():
    assert parse_calls("The answer is 4.") == []
    assert parse_calls(OPEN_TAG + '{"name": "x", "arguments": {}}') == []  # never closed: no block


@pytest.mark.parametrize(
    "body, error",
    [
        ('{"name": "calc", arguments: 256*37}', "not valid JSON"),
        ("", "not valid JSON"),
        ("[" * 100_000, "not valid JSON"),  # nests too deep for the JSON parser
        ('{"name": "calc", "arguments": {"n": ' + "9" * 5000 + "}}", "not valid JSON"),  # too many digits
        ('["calc", {}]', "must be a JSON object"),
        ('"calc"', "must be a JSON object"),
        ('{"arguments": {}}', 'no "name"'),
        ('{"name": 3, "arguments": {}}', 'no "name"'),
        ('{"name": "", "arguments": {}}', 'no "name"'),
        ('{"name": "calc"}', 'no "arguments"'),
        ('{"name": "calc", "arguments": "2+2"}', 'no "arguments"'),
        ('{"name": "calc", "arguments": ["2+2"]}', 'no "arguments"'),
        ('{"name": "calc", "arguments": null}', 'no "arguments"'),
    ],
)
def test_invalid_calls(body, error):
    [call] = parse_calls(_call(body))
    assert not call.valid
    assert call.name is None and call.arguments is None
    assert error in call.error and "\n" not in call.error
    assert call.raw == body


def test_the_first_close_tag_ends_a_block():
    calls = parse_calls(_call('{"name": "a", "arguments": {}}') + " " + _call('{"name": "b", "arguments": {}}'))
    assert [c.name for c in calls] == ["a", "b"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("no tags at all", False),
        (_call("{}"), False),
        (_call("{}") + _call("{}"), False),
        (OPEN_TAG + '{"name": "x"}', True),
        ('{"name": "x"}' + CLOSE_TAG, True),
        (OPEN_TAG + _call("{}"), True),
    ],
)
def test_unclosed(text, expected):
    assert unclosed(text) is expected


def test_the_subpackage_imports_neither_torch_nor_transformers():
    code = (
        "import sys, harness.engine.tools, harness.engine.tools.calculator, harness.engine.tools.lookup\n"
        "heavy = sorted(m for m in ('torch', 'transformers') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_many_unclosed_open_tags_parse_in_linear_time():
    """A collapsed policy writes the open tag over and over and never closes it: no block, found
    in one pass (the lazy regex rescanned the rest of the text from every tag: 10,000 tags took
    25 s). With a close tag at the very end, everything after the first open tag is one block."""
    text = OPEN_TAG * 100_000
    started = time.perf_counter()
    assert parse_calls(text) == []
    assert unclosed(text)
    [call] = parse_calls(text + CLOSE_TAG)
    assert call.raw == OPEN_TAG * 99_999 and not call.valid
    assert time.perf_counter() - started < 5, "parsing 100,000 unclosed tags took too long"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "plain text, no tags",
        _call('{"name": "a", "arguments": {}}'),
        _call("x") + "between" + _call("y") + "after",
        OPEN_TAG + "x" + OPEN_TAG + "y" + CLOSE_TAG + "z" + CLOSE_TAG,  # the first close ends the first block
        CLOSE_TAG + OPEN_TAG + "a" + CLOSE_TAG + CLOSE_TAG + OPEN_TAG,
        OPEN_TAG + CLOSE_TAG + OPEN_TAG + "\n\n" + CLOSE_TAG,  # empty blocks, newlines
        "<tool_call<tool_call>a</tool_call</tool_call>",  # near-misses of both tags
        OPEN_TAG + "a" + CLOSE_TAG[:-1] + OPEN_TAG + "b" + CLOSE_TAG,
    ],
)
def test_the_blocks_found_are_those_of_the_lazy_pattern(text):
    """The same blocks, in the same order, as the regex ``<tool_call>(.*?)</tool_call>`` finds."""
    pattern = re.compile(re.escape(OPEN_TAG) + r"(.*?)" + re.escape(CLOSE_TAG), re.DOTALL)
    assert [call.raw for call in parse_calls(text)] == [m.group(1) for m in pattern.finditer(text)]
