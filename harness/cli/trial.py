"""Commands: trial."""

from harness.cli.app import app  # noqa: F401
