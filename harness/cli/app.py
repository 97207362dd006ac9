"""The typer application that every command module registers on."""

import typer

app = typer.Typer(
    name="harness",
    help="Run RL fine-tuning ablation studies and check whether effects clear the noise floor.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
