"""The calculator: hand-worked values, every bound and error, and random expressions checked
against ``fractions`` arithmetic done while building them."""

from __future__ import annotations

import random
import re
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction

import pytest

from harness.engine.tools import ToolError
from harness.engine.tools.calculator import calculate, calculator_tool


@pytest.mark.parametrize(
    "expression, value",
    [
        ("256*37", "9472"),
        ("-(2+3)*4", "-20"),
        ("1/3", "0.3333333333"),
        ("2/3", "0.6666666667"),
        ("2.5*4", "10"),
        ("-5/2", "-2.5"),
        ("0.1+0.2", "0.3"),  # exact, unlike floats
        ("2+3*4", "14"),
        ("(2+3)*4", "20"),
        ("10-4-3", "3"),  # left-associative
        ("64/4/2", "8"),
        ("2*-3", "-6"),
        ("--3", "3"),
        ("+7", "7"),
        ("-2*-2", "4"),
        ("  12 \t+\n 3 ", "15"),
        (".5*4", "2"),
        ("007", "7"),
        ("1/3*3", "1"),
        ("0.00000000001", "0"),  # rounds to 10 places
        ("-0.00000000001", "0"),
        ("123456789012345678901234567890*2", "246913578024691357802469135780"),
        ("1/7", "0.1428571429"),
    ],
)
def test_values(expression, value):
    assert calculate(expression) == value


@pytest.mark.parametrize(
    "expression, message",
    [
        ("1" * 201, "at most 200"),
        ("1" * 31, "31 digits; at most 30"),
        ("(" * 21 + "1" + ")" * 21, "deeper than 20"),
        ("-" * 21 + "1", "deeper than 20"),
        ("10000000000*10000000000*10000000000*10000000000*10", "beyond 1e40"),
        ("1/0.00000000000000000000000000001/0.0000000000001", "beyond 1e40"),
        ("1/0", "division by zero"),
        ("1/(2-2)", "division by zero"),
        ("__import__('os')", "unexpected character '_' at position 0"),
        ("2**8", "got '*' at position 2"),
        ("2^8", "unexpected character '^' at position 1"),
        ("1e5", "unexpected character 'e' at position 1"),
        ("3 x 4", "unexpected character 'x' at position 2"),
        ("2 3", "unexpected '3' at position 2"),
        ("1.2.3", "unexpected '.3' at position 3"),
        ("(2+3", "expected ')' at the end"),
        ("(2+3))", "unexpected ')' at position 5"),
        ("2+", "expected a number at the end"),
        ("", "expected a number at the end"),
        ("()", "expected a number, got ')' at position 1"),
        ("٣+1", "unexpected character '٣' at position 0"),  # only ASCII digits
    ],
)
def test_errors(expression, message):
    with pytest.raises(ToolError, match=re.escape(message)):
        calculate(expression)


def test_bounds_edges_pass():
    assert calculate("(" * 20 + "1" + ")" * 20) == "1"
    assert calculate("1" * 30) == "1" * 30
    assert calculate("0." + "1" * 29) == "0.1111111111"
    at_length_bound = "1+" * 99 + "1 "
    assert len(at_length_bound) == 200 and calculate(at_length_bound) == "100"
    assert calculate("10000000000*10000000000*10000000000*10000000000") == "1" + "0" * 40


def test_the_tool_wraps_calculate():
    tool = calculator_tool(task=None)
    assert tool.name == "calculator"
    assert tool.run({"expression": "6*7"}) == "42"
    assert tool.parameters["required"] == ["expression"]


def _expected_text(value: Fraction) -> str:
    """The value written the calculator's way, by way of ``decimal`` (independent of its code)."""
    with localcontext() as context:
        context.prec = 120
        rounded = (Decimal(value.numerator) / Decimal(value.denominator)).quantize(
            Decimal("1e-10"), rounding=ROUND_HALF_EVEN
        )
        if rounded == rounded.to_integral_value():
            return str(int(rounded))
        return format(rounded.normalize(), "f")


_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}


class _TooBig(Exception):
    pass


def _random_expression(rng: random.Random, depth: int) -> tuple[str, Fraction, int]:
    """A random expression as (text, exact value, precedence of its top node: 3 for atoms)."""
    if depth == 0 or rng.random() < 0.25:
        if rng.random() < 0.3:
            whole, decimals = rng.randint(0, 99), rng.randint(1, 99)
            text = f"{whole}.{decimals}"
        else:
            text = str(rng.randint(0, 999))
        return text, Fraction(text), 3
    if rng.random() < 0.15:
        text, value, precedence = _random_expression(rng, depth - 1)
        inner = text if precedence == 3 else f"({text})"
        return f"-{inner}", -value, 3
    op = rng.choice("+-*/")
    left, left_value, left_precedence = _random_expression(rng, depth - 1)
    right, right_value, right_precedence = _random_expression(rng, depth - 1)
    if op == "/" and right_value == 0:
        op = "*"
    value = {
        "+": lambda: left_value + right_value,
        "-": lambda: left_value - right_value,
        "*": lambda: left_value * right_value,
        "/": lambda: left_value / right_value,
    }[op]()
    if abs(value) > 10**40:
        raise _TooBig
    if left_precedence < _PRECEDENCE[op] or rng.random() < 0.1:
        left = f"({left})"
    if right_precedence <= _PRECEDENCE[op] or rng.random() < 0.1:
        right = f"({right})"
    space = rng.choice(["", " ", "  "])
    return f"{left}{space}{op}{space}{right}", value, _PRECEDENCE[op]


def test_random_expressions_match_fraction_arithmetic():
    rng = random.Random(20240611)
    checked = 0
    while checked < 400:
        try:
            text, value, _ = _random_expression(rng, depth=rng.randint(1, 4))
        except _TooBig:
            continue
        if len(text) > 200:
            continue
        assert calculate(text) == _expected_text(value), text
        checked += 1
