"""What ``harness validate`` can tell about a study's model without torch or the network.

A GGUF source (a ``.gguf`` path or ``package:NAME``) is read as far as its header: the file
exists and is readable, holds a causal language model transformers can read, carries a
tokenizer, and says whether that tokenizer has a chat template. A local folder must hold a
config.json and says whether it saved a chat template. ``model.chat_template: true`` on a model
known to have no template is refused here, as the trial would refuse it. A hub id is left to the
trial (it may need the network).
"""

from __future__ import annotations

from harness.engine.model_source import has_chat_template, is_gguf, looks_local, missing_chat_template
from harness.engine.spec import ModelConfig


def check_model(model: ModelConfig) -> None:
    """A one-line ``ConfigError`` for a model that cannot be loaded, or that has no chat template
    when ``model.chat_template: true`` asks for one, as far as either is known here."""
    if model.name == "tiny" or not (is_gguf(model.name) or looks_local(model.name)):
        return  # the testbed model; or a hub id: only loading it (maybe over the network) tells
    template = has_chat_template(model.name)  # checks the GGUF header, or the folder's config.json
    if model.chat_template is True and not template:
        raise missing_chat_template(model.name)
