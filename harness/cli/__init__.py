"""Command line: thin wrappers that parse, call library functions and print.

Each module below registers its commands on the shared ``app``.
"""

from harness.cli import (  # noqa: F401
    decide_cmds,
    model_cmds,
    report_cmds,
    results_cmds,
    reward_model_cmds,
    runner_cmds,
    schema_cmds,
    study_cmds,
    trial,
)
from harness.cli.app import app, main

__all__ = ["app", "main"]
