"""Where a learned reward model lives: what its training reads, the key that hashes it, its id and
folder, and the checks that a folder is one (torch-free: ``harness validate`` runs them).

A reward model is cached like the warm start, by the content hash of everything its training
reads (``RewardModelInputs``: the base model's config, the pairs' content hash or the settings
that build them from the verifier, the training settings: a ``settings.RewardModelRecipe`` in a
study's set-up), under ``<cache_dir>/reward_models/<key>/``; its id is ``rm-<key>``. A study
names the id, a folder, or the recipe (``task.reward.train``: its trials build it). The folder
holds the trunk (``save_pretrained``: config.json and weights), its tokenizer, the scalar head
(``reward_head.safetensors``) and, written last and atomically, ``manifest.json``: the format and
its version, the base, the training settings, the held-out metrics, the mean and sd of the
scores of the held-out completions (the scorer normalises by them) and the sha256 of every
other file (and of the manifest's own fields). A folder without a readable manifest of this
format, or without the head, is not a reward model: a one-line ``ConfigError``.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field

from harness.engine.reward_model.pairs import pairs_sha256, read_pairs
from harness.engine.reward_model.settings import (
    RewardModelRecipe,
    RewardTraining,
    VerifierPairs,
)
from harness.engine.spec import ModelConfig, TrialSpec
from harness.engine.task_config import TaskConfig
from harness.engine.warmstart_key import WarmStartInputs, gold_task, keyed_dtype
from harness.engine.warmstart_key import cache_key as warmstart_cache_key
from harness.errors import ConfigError
from harness.ground.checked_cache import MANIFEST_FILE, Unusable
from harness.ground.checked_cache import read_manifest as read_json_manifest
from harness.ground.strict import StrictModel

FORMAT = "harness-reward-model"
FORMAT_VERSION = 1  # bump when training or the folder's layout changes what a key produces
FOLDER = "reward_models"  # under a cache_dir, beside warmstart/
HEAD_FILE = "reward_head.safetensors"  # {"weight": [1, hidden]}: the scalar head on the last token's state
ID_PREFIX = "rm-"
_ID = re.compile(r"^rm-([0-9a-f]{16})$")
#: the command that builds a study's reward model, as error messages name it
TRAIN_COMMAND = "harness reward-model train --study STUDY.yaml --from-verifier --label-noise 0.2"


class RewardModelInputs(StrictModel):
    """Everything a reward model's training reads; the cache key hashes all of it."""

    model_config = ConfigDict(frozen=True)

    base: str = Field(
        description="'warmstart' (the study's warm-started policy), 'model' (the study's model as "
        "configured: a fresh tiny one, or the pretrained one) or a hub id / local folder"
    )
    model: ModelConfig  # dtype, device, LoRA and the tiny model's shape
    task: TaskConfig  # as the warm start reads it (``gold_task``): the verifier, the alphabet, the prompts
    warmstart: str | None = Field(None, description="the warm start's cache key, when it is read")
    pairs_sha256: str | None = Field(None, description="the content hash of a pair file's pairs")
    verifier_pairs: VerifierPairs | None = None
    training: RewardTraining

    @classmethod
    def of(cls, spec: TrialSpec, recipe: RewardModelRecipe, pairs_digest: str | None = None) -> RewardModelInputs:
        """What ``recipe`` reads in ``spec``'s set-up; ``pairs_digest``: the content hash of the
        recipe's pair file (``pairs.pairs_sha256``), when it names one."""
        if (recipe.pairs is None) != (pairs_digest is None):
            raise ValueError("a pair file's recipe is keyed by its pairs' content hash, and only then")
        sampling = recipe.from_verifier
        verifier = sampling.with_budget(spec.train.temperature, spec.train.max_new_tokens) if sampling else None
        reads_warmstart = recipe.base == "warmstart" or verifier is not None
        return cls(
            base=recipe.base,
            model=spec.model,
            task=gold_task(spec.task),
            training=recipe.training(),
            warmstart=warmstart_cache_key(WarmStartInputs.of(spec)) if reads_warmstart else None,
            pairs_sha256=pairs_digest,
            verifier_pairs=verifier,
        )


def cache_key(inputs: RewardModelInputs) -> str:
    payload = {"format": FORMAT_VERSION, **inputs.model_dump(mode="json")}
    payload["model"] = inputs.model.keyed()
    payload["model"]["dtype"] = keyed_dtype(inputs.model)
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def reward_model_id(key: str) -> str:
    return f"{ID_PREFIX}{key}"


def recipe_id(spec: TrialSpec, recipe: RewardModelRecipe) -> str:
    """The id of the reward model ``recipe`` trains in ``spec``'s set-up, without training it (a
    pair file is read for its content hash)."""
    digest = pairs_sha256(read_pairs(recipe.pairs)) if recipe.pairs is not None else None
    return reward_model_id(cache_key(RewardModelInputs.of(spec, recipe, digest)))


def cache_folder(cache_dir: str | Path, key: str) -> Path:
    return Path(cache_dir) / FOLDER / key


def default_cache_dir() -> str:
    """Where a study's trials cache (``TrialSpec.cache_dir``'s default): ids are looked up there."""
    return TrialSpec.model_fields["cache_dir"].default


def resolve_reward_model(
    ref: str, cache_dir: str | Path | None = None, *, where: str = "reward.model"
) -> tuple[Path, dict[str, Any]]:
    """The folder and manifest of the reward model ``ref`` names: an id ``rm-<key>`` (looked up
    under ``<cache_dir>/reward_models/``) or a folder. Torch-free and cheap (no checksums: those
    are checked when the model loads); anything else is a one-line ``ConfigError``."""
    match = _ID.match(ref)
    if match:
        folder = cache_folder(cache_dir or default_cache_dir(), match.group(1))
        if not (folder / MANIFEST_FILE).is_file():
            raise ConfigError(
                f"{where} {ref!r}: no such reward model in {folder.parent} (not built here yet); build it with "
                f"`{TRAIN_COMMAND}` (same study, same options: it prints this id), name a reward-model folder, or "
                "say how to train it instead (task.reward.train: {from_verifier: {label_noise: 0.2}}: "
                "the trials build it)"
            )
        return folder, read_manifest(folder, where=f"{where} {ref!r}")
    folder = Path(ref)
    if not folder.exists():
        raise ConfigError(
            f"{where} {ref!r}: no such folder; give a reward-model folder or an id rm-<hash> "
            f"that `{TRAIN_COMMAND}` printed"
        )
    return folder, read_manifest(folder, where=f"{where} {ref!r}")


def read_manifest(folder: Path, *, where: str | None = None) -> dict[str, Any]:
    """The manifest of a reward-model folder, checked for its format, or a one-line ``ConfigError``
    saying why ``folder`` is not a scalar-head reward model (its checksums are checked when it loads)."""
    where = where or str(folder)
    not_one = f"{where}: not a scalar-head reward model folder"
    if not folder.is_dir():
        raise ConfigError(f"{not_one} (it is a file); give the folder `harness reward-model train` wrote")
    if not (folder / MANIFEST_FILE).is_file():
        raise ConfigError(
            f"{not_one} (it has no {MANIFEST_FILE}; `harness reward-model train` writes one last, "
            f"beside the trunk and {HEAD_FILE})"
        )
    try:
        manifest = read_json_manifest(folder)
    except Unusable as problem:
        raise ConfigError(f"{not_one} ({problem})") from None
    if manifest.get("format") != FORMAT:
        raise ConfigError(f"{not_one} ({MANIFEST_FILE} is not a {FORMAT} manifest)")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ConfigError(
            f"{not_one} of this harness (format version {manifest.get('format_version')!r}, this "
            f"harness reads {FORMAT_VERSION}); train it again"
        )
    problem = manifest_problem(manifest)
    if problem:
        raise ConfigError(f"{not_one} ({MANIFEST_FILE} {problem})")
    if not (folder / HEAD_FILE).is_file():
        raise ConfigError(f"{not_one} (its scalar head {HEAD_FILE} is missing)")
    return manifest


def manifest_problem(manifest: dict[str, Any]) -> str | None:
    """What a reward model's manifest lacks (``does not list ...``, ``records no ...``), or None."""
    if manifest.get("format") != FORMAT or manifest.get("format_version") != FORMAT_VERSION:
        return f"is not a {FORMAT} manifest of format version {FORMAT_VERSION}"
    digests = manifest.get("sha256")
    if not (isinstance(digests, dict) and HEAD_FILE in digests and all(isinstance(v, str) for v in digests.values())):
        return f"does not list the files' sha256 checksums, {HEAD_FILE} among them"
    for key in ("score_mean", "score_std"):
        value = manifest.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"records no {key}"
    if not manifest["score_std"] > 0:
        return "records a score_std that is not positive"
    if not isinstance(manifest.get("prompt_format"), str):
        return "records no prompt_format"
    return None
