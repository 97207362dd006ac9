"""Commands: runner_cmds."""

from harness.cli.app import app  # noqa: F401
