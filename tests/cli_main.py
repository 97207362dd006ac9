"""``harness ...`` through the console entry point, in this process (tests import it by name:
the tests folder is on the path because its conftest is there)."""

from __future__ import annotations

import sys

from harness.cli.app import main


def run_main(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """The console entry point in this process: (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["harness", *args])
    try:
        main()
        code = 0
    except SystemExit as exit_:
        code = exit_.code or 0
    captured = capsys.readouterr()
    return code, captured.out, captured.err
