"""A GGUF model prepared once as a normal transformers folder, which every trial then loads.

Loading a GGUF file dequantises every tensor (about 26 s for SmolLM2-135M on 2 cores); a folder
of safetensors loads in about a second, so the first trial that needs the model converts it and
the rest load the folder. The folder is an entry of the checked cache
(``harness.ground.checked_cache``) under ``<cache_dir>/models/<sha256 of the GGUF file>``: built
under a lock (two workers convert it once), its manifest records the source's digest, and every
file is checked against its sha256 before any load; a changed or half-written folder is one
``ModelCacheWarning`` line and is converted again.

The conversion keeps the dequantised weights in float32 (the dtype a trial asks for is applied
when it loads the folder), drops the GGUF quantisation marker (``save_pretrained`` refuses a
model that carries it, and the folder holds plain weights), saves the tokenizer with its chat
template, and checks that the folder reloads to the same next-token logits as the GGUF file did.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from harness.engine.model_source import check_folder, content_key, is_gguf, looks_local, prepared_folder, read_gguf
from harness.errors import ConfigError, one_line
from harness.ground.checked_cache import get_or_build
from harness.ground.console import say

CHECK_TEXT = "The quick brown fox"  # the prompt whose next-token logits the converted folder must reproduce
LOGITS_TOLERANCE = 1e-4


class ModelCacheWarning(UserWarning):
    """A prepared model folder failed its checks and is being converted again."""


def local_model(name: str, cache_dir: str | Path) -> str:
    """What ``from_pretrained`` loads for ``model.name``: the prepared folder of a GGUF source
    (converted now when it is not in the cache), else ``name`` as it is (a local folder checked
    for its config.json first, so a mistyped path is not looked up on the hub)."""
    if not is_gguf(name):
        if looks_local(name):
            check_folder(name)
        return name
    folder = prepared_folder(name, cache_dir)
    entry = get_or_build(
        folder,
        key_fields={"source": content_key(name)},
        # the header is read (and checked) to convert only: parsing it takes seconds (its
        # vocabulary is thousands of fields), and a trial finds the folder prepared twice
        work=lambda: _convert(read_gguf(name)),
        save=_save,
        load=lambda path, manifest: path,
        on_unusable=lambda line: warnings.warn(
            f"prepared model {folder}: {line}; converting it again", ModelCacheWarning, stacklevel=2
        ),
    )
    if not entry.cached:
        say(f"model: {name} converted once into {folder}")
    return str(folder)


def _convert(source):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    say(f"model: converting {source.path} ({source.architecture}, {source.parameters / 1e6:.0f}M parameters) once")
    folder, file = str(source.path.parent), source.path.name
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=file)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=file, dtype=torch.float32)
    except Exception as err:  # transformers raises many kinds for a GGUF it cannot map
        raise ConfigError(
            f"model.name {source.name!r}: transformers cannot load {file} ({one_line(err, limit=300)})"
        ) from err
    model.hf_quantizer = None  # the weights are dequantised: save them as plain float32
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return source, model.eval(), tokenizer


def _save(folder: Path, converted) -> tuple[dict, Path]:
    source, model, tokenizer = converted
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    _check_reload(folder, model, tokenizer)
    return {"gguf_file": source.path.name, "architecture": source.architecture, "parameters": source.parameters}, folder


def _check_reload(folder: Path, model, tokenizer) -> None:
    """The saved folder gives the converted model's logits (else the conversion lost something)."""
    import torch
    from transformers import AutoModelForCausalLM

    ids = tokenizer(CHECK_TEXT, return_tensors="pt")["input_ids"]
    reloaded = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.no_grad():
        gap = (model(ids).logits - reloaded(ids).logits).abs().max().item()
    if not gap <= LOGITS_TOLERANCE:
        raise ConfigError(
            f"model: the converted folder {folder} does not reproduce the GGUF model's logits (they differ by "
            f"{gap:.3g}); this transformers version cannot convert it faithfully: use another version or a folder"
        )
