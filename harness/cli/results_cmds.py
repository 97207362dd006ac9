"""Commands: results_cmds."""

from harness.cli.app import app  # noqa: F401
