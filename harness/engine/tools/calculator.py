"""The ``calculator`` tool: exact arithmetic on a model-written expression, never ``eval``.

A small recursive-descent parser over ``+ - * /``, parentheses, unary signs and decimal
numbers, computing with ``fractions.Fraction``. Every input is bounded (length, digits, nesting,
magnitude), so a call costs microseconds whatever the model writes.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import NamedTuple

from harness.engine.tools.tool import Tool, ToolError

MAX_CHARS = 200
MAX_DIGITS = 30
MAX_DEPTH = 20
MAX_MAGNITUDE = 10**40
DECIMALS = 10

_SPACE = re.compile(r"\s*")
_TOKEN = re.compile(r"(?P<number>[0-9]+(?:\.[0-9]+)?|\.[0-9]+)|(?P<op>[-+*/()])")

PARAMETERS = {
    "type": "object",
    "properties": {
        "expression": {
            "type": "string",
            "description": "numbers, + - * /, parentheses, e.g. (256*37)/4",
        }
    },
    "required": ["expression"],
    "additionalProperties": False,
}


def calculator_tool(task) -> Tool:
    """The calculator (it needs nothing from the task)."""
    return Tool(
        name="calculator",
        description="Evaluate an arithmetic expression exactly and return its value.",
        parameters=PARAMETERS,
        run=lambda arguments: calculate(arguments["expression"]),
        bounded=True,
    )


def calculate(expression: str) -> str:
    """The value of ``expression``: an integer when whole, else a decimal rounded (half to even)
    to 10 places without trailing zeros. Raises ``ToolError`` for anything outside the grammar
    or the bounds."""
    if len(expression) > MAX_CHARS:
        raise ToolError(f"the expression has {len(expression)} characters; at most {MAX_CHARS}")
    return _format(_Parser(_tokens(expression), len(expression)).parse())


class _Token(NamedTuple):
    kind: str  # "number" or "op"
    text: str
    pos: int


def _tokens(expression: str) -> list[_Token]:
    tokens = []
    pos = _SPACE.match(expression).end()
    while pos < len(expression):
        match = _TOKEN.match(expression, pos)
        if match is None:
            raise ToolError(f"unexpected character {expression[pos]!r} at position {pos}")
        tokens.append(_Token(match.lastgroup, match.group(), pos))
        pos = _SPACE.match(expression, match.end()).end()
    return tokens


class _Parser:
    """expr := term (('+'|'-') term)*;  term := factor (('*'|'/') factor)*;
    factor := ('+'|'-') factor | '(' expr ')' | number"""

    def __init__(self, tokens: list[_Token], end: int) -> None:
        self._tokens = tokens
        self._end = end
        self._next = 0
        self._depth = 0

    def parse(self) -> Fraction:
        value = self._expr()
        token = self._peek()
        if token is not None:
            raise ToolError(f"unexpected {token.text!r} at position {token.pos}")
        return value

    def _peek(self) -> _Token | None:
        return self._tokens[self._next] if self._next < len(self._tokens) else None

    def _take_op(self, ops: str) -> str | None:
        token = self._peek()
        if token is not None and token.kind == "op" and token.text in ops:
            self._next += 1
            return token.text
        return None

    def _expr(self) -> Fraction:
        value = self._term()
        while op := self._take_op("+-"):
            right = self._term()
            value = _bounded(value + right if op == "+" else value - right)
        return value

    def _term(self) -> Fraction:
        value = self._factor()
        while op := self._take_op("*/"):
            right = self._factor()
            if op == "/" and right == 0:
                raise ToolError("division by zero")
            value = _bounded(value * right if op == "*" else value / right)
        return value

    def _factor(self) -> Fraction:
        if sign := self._take_op("+-"):
            value = self._nested(self._factor)
            return -value if sign == "-" else value
        if self._take_op("("):
            value = self._nested(self._expr)
            if not self._take_op(")"):
                raise self._unexpected("')'")
            return value
        token = self._peek()
        if token is None or token.kind != "number":
            raise self._unexpected("a number")
        self._next += 1
        digits = sum(ch.isdigit() for ch in token.text)
        if digits > MAX_DIGITS:
            raise ToolError(f"the number at position {token.pos} has {digits} digits; at most {MAX_DIGITS}")
        return Fraction(token.text)

    def _nested(self, parse) -> Fraction:
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise ToolError(f"the expression nests deeper than {MAX_DEPTH} levels")
        value = parse()
        self._depth -= 1
        return value

    def _unexpected(self, wanted: str) -> ToolError:
        token = self._peek()
        if token is None:
            return ToolError(f"expected {wanted} at the end of the expression (position {self._end})")
        return ToolError(f"expected {wanted}, got {token.text!r} at position {token.pos}")


def _bounded(value: Fraction) -> Fraction:
    if abs(value) > MAX_MAGNITUDE:
        raise ToolError("a result is beyond 1e40 in magnitude")
    return value


def _format(value: Fraction) -> str:
    rounded = round(value, DECIMALS)
    if rounded.denominator == 1:
        return str(rounded.numerator)
    whole, fraction = divmod(int(abs(rounded) * 10**DECIMALS), 10**DECIMALS)
    sign = "-" if rounded < 0 else ""
    return f"{sign}{whole}.{fraction:0{DECIMALS}d}".rstrip("0")
