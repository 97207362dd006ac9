"""Command: ``harness schema`` (the reference of every study-file key)."""

from __future__ import annotations

from typing import Annotated

import typer

from harness.cli.app import app


@app.command("schema")
def schema_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="print the keys as JSON, for programs")] = False,
) -> None:
    """Print every study-file key: its type, default, what reads it and what it means.

    Markdown by default; docs/study-reference.md is this output.
    """
    from harness.study.key_reference import as_json as reference_json
    from harness.study.key_reference import markdown

    typer.echo(reference_json() if as_json else markdown(), nl=as_json)
