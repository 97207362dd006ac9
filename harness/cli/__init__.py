"""Command line: thin wrappers that parse, call library functions and print.

Each module below registers its commands on the shared ``app``.
"""

from harness.cli.app import app

__all__ = ["app"]
