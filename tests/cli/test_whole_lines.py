"""Every message of `harness plan` and `harness validate` is whole lines, also where stdout and
stderr run into one stream (`2>&1`, a CI log): no message starts in the middle of another's line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from stored_study import write_study

REAL_MODEL = textwrap.dedent("""\
    name: big
    control: grpo
    seeds: 2
    model: {name: Qwen/Qwen2.5-0.5B-Instruct}
    arms:
      - {name: grpo, algorithm: grpo}
      - {name: rloo, algorithm: rloo}
    """)  # two warnings: too few seeds, and the tiny model's costs for a real model


def merged(*args: str) -> list[str]:
    """`harness ARGS 2>&1`: its lines, in the order the two streams wrote them."""
    out = subprocess.run(
        [sys.executable, "-c", "from harness.cli import main; main()", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"},
    )
    return out.stdout.splitlines()


def assert_whole(lines: list[str]) -> None:
    for line in lines:
        inside = re.search(r"\S(warning|error|ok): ", line)
        assert inside is None, f"a message starts inside another's line: {line!r}"


@pytest.mark.slow
def test_plan_prints_its_warnings_as_whole_lines():
    path = write_study(REAL_MODEL, name="big")
    records = Path("runs/big/records")
    records.mkdir(parents=True)
    (records / "broken.json").write_text("{")  # a warning on stderr while the plan goes to stdout
    lines = merged("plan", str(path))
    assert_whole(lines)
    warnings = [line for line in lines if line.startswith("warning: ")]
    assert len(warnings) == 2, lines
    assert warnings[1].endswith("its completed records replace the defaults")
    assert any("unreadable trial record" in line for line in lines)


@pytest.mark.slow
def test_validate_prints_warnings_and_errors_as_whole_lines():
    warned = write_study(REAL_MODEL, name="big")
    bad = write_study("name: bad\narms: 3\n", name="bad")
    good = write_study()
    lines = merged("validate", str(warned), str(bad), str(good))
    assert_whole(lines)
    assert [line.split(":")[0] for line in lines if re.match(r"(ok|warning|error): ", line)] == [
        "ok",
        "warning",
        "error",
        "ok",
    ]
    assert f"error: {bad}: required field missing: seeds (+1 more)" in lines
