"""The no-op probe's results, kept under the cache, so ``harness validate`` and ``plan`` compare a
study's arms without importing torch once their configurations have been probed.

A result depends only on the configuration, the generation budget and the code that computes it,
so its key hashes all three: the configuration as dumped, ``max_new_tokens``, the source of every
module of ``harness.algorithms`` and torch's version. An edit to a loss gives every configuration
a fresh probe. An entry that cannot be read is probed again; one that cannot be written is not
kept (the check still holds).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import cache
from importlib import metadata
from pathlib import Path

import harness.algorithms
from harness.algorithms.config import RLConfig
from harness.algorithms.probe_result import ProbeResult

PROBE_FOLDER = "probe"  # under a trial spec's cache_dir, beside the warm starts


def probe_result(cfg: RLConfig, max_new_tokens: int, cache_dir: str | Path) -> ProbeResult:
    """``harness.algorithms.probe.probe(cfg, max_new_tokens)``, from the cache when it holds it."""
    path = Path(cache_dir) / PROBE_FOLDER / f"{_key(cfg, max_new_tokens)}.json"
    kept = _read(path)
    if kept is not None:
        return kept
    # torch, imported only for a configuration not probed yet
    from harness.algorithms.probe import probe

    result = probe(cfg, max_new_tokens)
    _write(path, result)
    return result


def _key(cfg: RLConfig, max_new_tokens: int) -> str:
    payload = {"config": cfg.model_dump(mode="json"), "max_new_tokens": max_new_tokens, "code": _code_digest()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


@cache
def _code_digest() -> str:
    digest = hashlib.sha256(metadata.version("torch").encode())
    for path in sorted(Path(harness.algorithms.__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _read(path: Path) -> ProbeResult | None:
    try:
        kept = json.loads(path.read_text())
        return ProbeResult(loss=float(kept["loss"]), gradient=tuple(float(g) for g in kept["gradient"]))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _write(path: Path, result: ProbeResult) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False) as handle:
            json.dump({"loss": result.loss, "gradient": result.gradient}, handle)
        os.replace(handle.name, path)  # atomic: an entry is whole or absent
    except OSError:
        pass
