"""Where a warm start is cached: what it reads, the key that hashes it, its folder, and the file
that says the entry is complete.

Torch-free, so ``harness plan`` says whether a study's warm start is cached without importing the
engine (``warmstart.py`` builds, checks and loads the entries). ``model.dtype: auto`` is keyed as
the dtype it resolves to on this machine (``auto_dtype``, the rule ``models.pick_dtype`` loads
by), so a trial that says ``auto`` and a study that names the same dtype share one entry; only a
model whose dtype and device are both ``auto`` asks torch whether CUDA is here.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import ConfigDict, PositiveInt

from harness.engine.model_source import content_key
from harness.engine.spec import ModelConfig, TrialSpec, WarmStartConfig
from harness.engine.task_config import TaskConfig
from harness.ground.checked_cache import MANIFEST_FILE  # noqa: F401 - re-exported: the plan's "is it cached"
from harness.ground.strict import StrictModel

WARMSTART_FORMAT = 2  # bump when the warm start changes what it produces (2: fused AdamW)


class WarmStartInputs(StrictModel):
    """Everything the warm start reads; arms and seeds of a study that agree here share it."""

    model_config = ConfigDict(frozen=True)

    model: ModelConfig
    task: TaskConfig
    warmstart: WarmStartConfig
    max_new_tokens: PositiveInt  # the budget of the greedy accuracy checks that decide when to stop

    @classmethod
    def of(cls, spec: TrialSpec) -> WarmStartInputs:
        return cls(
            model=spec.model,
            task=gold_task(spec.task),
            warmstart=spec.warmstart,
            max_new_tokens=spec.train.max_new_tokens,
        )


def gold_task(task: TaskConfig) -> TaskConfig:
    """The task as the warm start reads it: a learned reward (``task.reward: {model: ...}``) is RL's
    training reward only, and the warm start's accuracy checks use its verifier; so a study trained
    on a reward model shares the warm start of the same study on the verifier (and the reward model,
    trained on that warm start's samples, does not key its own warm start: no cycle)."""
    reward = task.reward
    if reward is None or isinstance(reward, str):
        return task
    return task.model_copy(update={"reward": reward.verifier})


def auto_dtype(device_type: str) -> str:
    """What ``dtype: auto`` loads as on a device of this type: bfloat16 on CUDA, else float32."""
    return "bfloat16" if device_type == "cuda" else "float32"


def cache_key(inputs: WarmStartInputs) -> str:
    payload = {"format": WARMSTART_FORMAT, **inputs.model_dump(mode="json")}
    payload["model"] = inputs.model.keyed()
    payload["model"]["dtype"] = keyed_dtype(inputs.model)
    payload["model"]["name"] = content_key(inputs.model.name)  # a GGUF file by its bytes, not its path
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def keyed_dtype(model: ModelConfig) -> str:
    """The dtype the model loads in here: ``auto`` resolved (without failing on a missing GPU)."""
    if model.dtype != "auto":
        return model.dtype
    if model.device != "auto":
        return auto_dtype(model.device)
    import torch  # only torch knows whether this machine has CUDA

    return auto_dtype("cuda" if torch.cuda.is_available() else "cpu")


def cache_folder(spec: TrialSpec) -> Path:
    """The warm-start cache entry of ``spec``'s set-up (complete once it holds ``MANIFEST_FILE``)."""
    return Path(spec.cache_dir) / "warmstart" / cache_key(WarmStartInputs.of(spec))
