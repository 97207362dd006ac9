"""The typer application that every command module registers on, and the entry point."""

import functools
import sys
from collections.abc import Callable

import typer

from harness.errors import HarnessError
from harness.ground import console
from harness.ground.exit_codes import EXIT_BAD_INPUT

app = typer.Typer(
    name="harness",
    help="Run RL fine-tuning ablation studies and check whether effects clear the noise floor.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    # plain click help: typer's rich panels print a flag as if it took a value (--json <bool>)
    rich_markup_mode=None,
)


def former_name(old: str, new: str, command: Callable[..., None]) -> None:
    """Keep ``harness OLD`` working for one release after a command is renamed to ``harness NEW``:
    the same options, hidden from --help, with one line on stderr naming the new command (a script
    that calls the old name still runs, and its stdout is unchanged)."""

    @functools.wraps(command)
    def renamed(*args, **kwargs) -> None:
        console.warn(f"`harness {old}` is now `harness {new}`; the old name goes in the next release")
        command(*args, **kwargs)

    app.command(old, hidden=True, help=f"Former name of `harness {new}`.")(renamed)


def main() -> None:
    """Console entry point: user errors become one line on stderr and exit code 2."""
    try:
        app()
    except HarnessError as err:
        console.error(str(err))
        sys.exit(EXIT_BAD_INPUT)
