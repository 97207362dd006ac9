"""The no-op probe's results, kept under the cache, so ``harness validate`` and ``plan`` compare a
study's arms without importing torch once their configurations have been probed.

A result depends only on the configuration, the generation budget and the code that computes it,
so its key hashes all three: the configuration as dumped, ``max_new_tokens``, the source of every
module of ``harness.algorithms`` and torch's version. An edit to a loss gives every configuration
a fresh probe.

Each result is an entry of the checked cache (``harness.ground.checked_cache``): a folder
``<cache_dir>/probe/<key>/`` holding ``result.json`` and a manifest with its sha256. An entry
whose file does not match its checksum, or cannot be read, is probed again after a one-line
``ProbeCacheWarning``: a result is never trusted unchecked. One that cannot be written is not kept
(the check still holds).
"""

from __future__ import annotations

import hashlib
import json
import warnings
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

import harness.algorithms
from harness.algorithms.config import RLConfig
from harness.algorithms.probe_result import ProbeResult
from harness.errors import one_line
from harness.ground.checked_cache import Unusable, get_or_build

PROBE_FOLDER = "probe"  # under a trial spec's cache_dir, beside the warm starts
RESULT_FILE = "result.json"  # {"loss": float, "gradient": [float, ...]}


class ProbeCacheWarning(UserWarning):
    """A kept probe result failed its checks and is being probed again."""


def probe_result(cfg: RLConfig, max_new_tokens: int, cache_dir: str | Path) -> ProbeResult:
    """``harness.algorithms.probe.probe(cfg, max_new_tokens)``, from the cache when it holds it."""
    key = _key(cfg, max_new_tokens)
    folder = Path(cache_dir) / PROBE_FOLDER / key

    probed: list[ProbeResult] = []

    def probe() -> ProbeResult:
        from harness.algorithms.probe import probe  # torch, imported only for a configuration not probed yet

        probed.append(probe(cfg, max_new_tokens))
        return probed[-1]

    def probing_again(problem: str) -> None:
        warnings.warn(f"probe cache {folder}: {problem}; probing again", ProbeCacheWarning, stacklevel=4)

    try:
        return get_or_build(
            folder, key_fields={"key": key}, work=probe, save=_save, load=_load, on_unusable=probing_again
        ).value
    except OSError:  # the cache cannot be written here: the result is not kept
        return probed[-1] if probed else probe()


def _key(cfg: RLConfig, max_new_tokens: int) -> str:
    payload = {"config": cfg.model_dump(mode="json"), "max_new_tokens": max_new_tokens, "code": _code_digest()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


@cache
def _code_digest() -> str:
    digest = hashlib.sha256(metadata.version("torch").encode())
    for path in sorted(Path(harness.algorithms.__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _save(folder: Path, result: ProbeResult) -> tuple[dict[str, Any], ProbeResult]:
    (folder / RESULT_FILE).write_text(json.dumps({"loss": result.loss, "gradient": result.gradient}))
    return {}, result


def _load(folder: Path, manifest: dict[str, Any]) -> ProbeResult:
    try:
        kept = json.loads((folder / RESULT_FILE).read_text())
        return ProbeResult(loss=float(kept["loss"]), gradient=tuple(float(g) for g in kept["gradient"]))
    except (OSError, ValueError, TypeError, KeyError) as err:
        raise Unusable(f"{RESULT_FILE} is unreadable ({one_line(err, limit=300)})") from err
