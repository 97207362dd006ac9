"""Training a reward model, cached: the pairs (from a file, or built from the verifier on the warm
start's samples), the fit of the Bradley-Terry loss, the held-out metrics, and the cache entry.

AdamW (``learner.make_optimizer``), gradient clipping, seeded pair order and head initialisation,
so the same inputs give the same model. The trunk is trained whole, or only its LoRA adapter when
the model config has one (merged into the trunk before saving).

The base is the study's warm-started policy (InstructGPT initialises its reward model from the
SFT model), the model as configured (a fresh tiny model over the task's and the pairs' characters,
or the pretrained one), or any hub id / local folder. Held-out pairs (whole prompts) give the
metrics (``bradley_terry.pair_metrics``), measured on the model as loaded back from its folder, and
so are the mean and sd of its scores over the held-out completions, by which the scorer normalises.

The cache (``<cache_dir>/reward_models/<key>/``, key in ``key``) is a checked cache
(``harness.ground.checked_cache``), as the warm start's: under a lock, a folder whose manifest
(written last) records this key and lists checksums that all match is used without training; any
other content is one ``RewardModelCacheWarning`` line and a rebuild.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harness.engine.learner import make_optimizer
from harness.engine.model_prepare import local_model
from harness.engine.models import (
    LoadedModel,
    build_tiny_model,
    char_tokenizer,
    load_pretrained,
    lost_characters,
    pick_device,
)
from harness.engine.reward_model.bradley_terry import bradley_terry_loss, pair_metrics
from harness.engine.reward_model.key import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST_FILE,
    RewardModelInputs,
    cache_folder,
    cache_key,
    manifest_problem,
    reward_model_id,
)
from harness.engine.reward_model.model import (
    RewardModel,
    load_saved,
    new_reward_model,
    save_reward_model,
)
from harness.engine.reward_model.pairs import (
    Pair,
    pairs_sha256,
    read_pairs,
    split_pairs,
    verifier_pairs,
)
from harness.engine.reward_model.settings import RewardModelRecipe, RewardTraining
from harness.engine.spec import REWARD_MODEL_SAYS, TrialSpec
from harness.engine.tasks import build_task
from harness.engine.tasks.base import Task
from harness.engine.tasks.coverage import MAX_LOST_SHARE
from harness.engine.warmstart import load_policy
from harness.engine.warmstart_key import gold_task
from harness.errors import ConfigError, HarnessError
from harness.ground.checked_cache import Unusable, get_or_build
from harness.ground.console import say

PROGRESS_EVERY_S = 15.0
SAYS = REWARD_MODEL_SAYS  # the prefix of what it says on stderr


class RewardModelCacheWarning(UserWarning):
    """A cached reward model failed its checks and is being rebuilt."""


@dataclass
class TrainedRewardModel:
    folder: Path
    id: str
    manifest: dict[str, Any]
    cached: bool  # loaded from the cache: nothing was trained


@dataclass
class _Fitted:
    """A reward model trained, not saved yet: what its manifest and held-out metrics need."""

    rm: RewardModel
    held: list[Pair]
    steps: int
    metrics: dict[str, float]  # the fit's (train/*) and the pairs' (pairs/*)
    started: float  # perf_counter at the start of the work: the manifest's time/train_s


def train_reward_model(spec: TrialSpec, recipe: RewardModelRecipe) -> TrainedRewardModel:
    """The reward model ``recipe`` trains in ``spec``'s set-up: from the cache when it holds it
    (checked), else trained and saved there. ``spec`` gives the task, the model, the warm start,
    the sampling budget of pairs built from the verifier and ``cache_dir``.

    Every input is checked before any work: the pair file line by line, the task, the base."""
    task = build_task(gold_task(spec.task))
    pairs = read_pairs(recipe.pairs) if recipe.pairs is not None else None
    inputs = RewardModelInputs.of(spec, recipe, pairs_sha256(pairs) if pairs is not None else None)
    pick_device(spec.model)  # a device this machine lacks is its own error
    key = cache_key(inputs)
    folder = cache_folder(spec.cache_dir, key)

    def rebuilding(problem: str) -> None:
        warnings.warn(f"reward-model cache {folder}: {problem}; rebuilding it", RewardModelCacheWarning, stacklevel=4)

    entry = get_or_build(
        folder,
        key_fields={"key": key},
        work=lambda: _fit(folder, inputs, spec, task, pairs),
        save=lambda into, fitted: (_save(into, fitted, key, inputs, spec), None),
        load=_check_manifest,
        on_unusable=rebuilding,
    )
    metrics = entry.manifest["metrics"]
    if entry.cached:
        say(
            f"using the cached reward model {folder} (held-out pair accuracy {metrics['heldout/accuracy']:.3f})",
            prefix=SAYS,
        )
    else:
        say(
            f"done: held-out pair accuracy {metrics['heldout/accuracy']:.3f}"
            + (
                f" (against the noise-free labels {metrics['heldout/accuracy_gold']:.3f})"
                if "heldout/accuracy_gold" in metrics
                else ""
            )
            + f", in {metrics['time/train_s']:.0f} s",
            prefix=SAYS,
        )
    return TrainedRewardModel(folder, reward_model_id(key), entry.manifest, cached=entry.cached)


def _check_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    """A cached entry's manifest (its files already match it) has what a reward model records."""
    problem = manifest_problem(manifest)
    if problem:
        raise Unusable(f"{MANIFEST_FILE} {problem}")


def _fit(folder: Path, inputs: RewardModelInputs, spec: TrialSpec, task: Task, pairs: list[Pair] | None) -> _Fitted:
    """The pairs (built from the verifier when no file gave them) and the fit: all the work that
    happens before the cache folder is touched."""
    training = inputs.training
    started = time.perf_counter()
    info: dict[str, float] = {}
    # the trunk first (a base that does not load fails before any sampling), unless it is the policy sampled
    lm = None if inputs.base == "warmstart" and pairs is None else _base_model(inputs, spec, task, pairs or [])
    if pairs is None:
        policy, _, _ = load_policy(spec, task)
        config = inputs.verifier_pairs
        prompts = min(config.prompts or len(task.train), len(task.train))
        say(
            f"sampling {config.samples_per_prompt} completions of {prompts} train prompts from the warm-started "
            f"policy; pairs labelled by the verifier, label noise {config.label_noise:g}",
            prefix=SAYS,
        )
        pairs, info = verifier_pairs(policy, task, config, training.seed)
        lm = lm or policy
    _check_characters(lm, pairs)
    train, held = split_pairs(pairs, training.held_out, training.seed)
    rm = new_reward_model(lm, training.seed)
    steps = training.steps or training.epochs * math.ceil(len(train) / training.batch_size)
    say(f"building {folder}: {len(pairs)} pairs ({len(train)} train, {len(held)} held out), {steps} steps", prefix=SAYS)
    fit_info = fit(rm, train, training, steps)
    return _Fitted(
        rm,
        held,
        steps,
        {**fit_info, **info, "pairs/train": float(len(train)), "pairs/heldout": float(len(held))},
        started,
    )


def _save(folder: Path, fitted: _Fitted, key: str, inputs: RewardModelInputs, spec: TrialSpec) -> dict[str, Any]:
    """The fitted model saved into ``folder`` and loaded back; its manifest's fields, with the
    held-out metrics and score statistics of the model as loaded."""
    lm = fitted.rm.lm
    dtype = str(next(lm.model.parameters()).dtype).removeprefix("torch.")
    save_reward_model(fitted.rm.module, lm, folder)
    prompt_format = "chat" if lm.use_chat_template else "plain"
    loaded = load_saved(folder, {"dtype": dtype, "prompt_format": prompt_format}, lm.device)
    metrics = {**{f"heldout/{k}": v for k, v in measure(loaded, fitted.held).items()}, **fitted.metrics}
    mean, std = _score_stats(loaded, fitted.held)
    metrics["time/train_s"] = time.perf_counter() - fitted.started
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "id": reward_model_id(key),
        "key": key,
        "base": inputs.base if inputs.base != "model" else spec.model.name,
        "dtype": dtype,
        "prompt_format": prompt_format,
        "inputs": inputs.model_dump(mode="json"),
        "training": {**inputs.training.model_dump(mode="json"), "steps_run": fitted.steps},
        "metrics": metrics,
        "score_mean": mean,
        "score_std": std,
    }


def _base_model(inputs: RewardModelInputs, spec: TrialSpec, task: Task, pairs: list[Pair]) -> LoadedModel:
    """The trunk before training, when it is not the warm-started policy used for sampling."""
    if inputs.base == "warmstart":
        return load_policy(spec, task)[0]
    name = spec.model.name if inputs.base == "model" else inputs.base
    if name != "tiny":
        source = local_model(name, spec.cache_dir)
        return load_pretrained(source, spec.model.model_copy(update={"name": name}), adapter_seed=inputs.training.seed)
    alphabet = set(task.alphabet) | {c for p in pairs for text in (p.prompt, p.chosen, p.rejected) for c in text}
    tokenizer = char_tokenizer("".join(sorted(alphabet)))
    model = build_tiny_model(spec.model, len(tokenizer), tokenizer, seed=inputs.training.seed)
    device = pick_device(spec.model)
    return LoadedModel(model.to(device), tokenizer, device, use_chat_template=False)


def _check_characters(lm: LoadedModel, pairs: list[Pair]) -> None:
    """Refuse pairs whose text the trunk's tokenizer cannot encode (it would compare placeholders)."""
    lost, share = lost_characters(lm.tokenizer, [t for p in pairs for t in (p.prompt, p.chosen, p.rejected)])
    if share > MAX_LOST_SHARE:
        shown = " ".join(repr(c) for c in lost[:20])
        raise ConfigError(
            f"the reward model's tokenizer cannot encode {len(lost)} of the pairs' characters ({shown}), "
            f"{share:.0%} of their text; use --base model (a fresh tiny model covers the pairs' "
            "characters) or a model whose tokenizer covers them"
        )


def fit(rm: RewardModel, pairs: list[Pair], training: RewardTraining, steps: int) -> dict[str, float]:
    """``steps`` AdamW steps of the BT loss over ``pairs`` in seeded order (an epoch is a
    permutation; ``batch_size`` pairs a step); the last epoch's mean loss and accuracy."""
    module = rm.module
    params = [p for p in module.parameters() if p.requires_grad]
    optimizer = make_optimizer([{"params": params, "lr": training.lr}], rm.lm.device)
    order_gen = torch.Generator().manual_seed(training.seed)
    per_epoch = math.ceil(len(pairs) / training.batch_size)
    order: list[int] = []
    losses: list[float] = []
    right: list[float] = []
    module.train()
    started = shown = time.perf_counter()
    for step in range(1, steps + 1):
        if not order:
            order = torch.randperm(len(pairs), generator=order_gen).tolist()
            losses, right = [], []
        batch = [pairs[i] for i in order[: training.batch_size]]
        order = order[training.batch_size :]
        scores = rm.forward([p.prompt for p in batch] * 2, [p.chosen for p in batch] + [p.rejected for p in batch])
        chosen, rejected = scores[: len(batch)], scores[len(batch) :]
        loss = bradley_terry_loss(chosen, rejected)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, training.max_grad_norm)
        optimizer.step()
        losses.append(float(loss.detach()))
        right.append(float((chosen > rejected).float().mean()))
        now = time.perf_counter()
        if now - shown >= PROGRESS_EVERY_S and step < steps:
            shown = now
            say(
                f"step {step}/{steps}, BT loss {np.mean(losses[-per_epoch:]):.4f}, {now - started:.0f} s so far, "
                f"about {(now - started) / step * (steps - step):.0f} s left",
                prefix=SAYS,
            )
    if not math.isfinite(float(np.mean(losses))):
        raise HarnessError("the reward model's BT loss became non-finite; lower --lr")
    module.eval()
    return {"train/loss": float(np.mean(losses)), "train/accuracy": float(np.mean(right)), "train/steps": float(steps)}


def measure(rm: RewardModel, pairs: list[Pair]) -> dict[str, float]:
    """``pair_metrics`` of ``rm`` on ``pairs`` (against the noise-free labels too, when known)."""
    chosen = rm.scores([p.prompt for p in pairs], [p.chosen for p in pairs])
    rejected = rm.scores([p.prompt for p in pairs], [p.rejected for p in pairs])
    gold = [p.gold for p in pairs]
    delta = np.asarray(chosen) - np.asarray(rejected)
    return pair_metrics(delta, gold if all(g is not None for g in gold) else None)


def _score_stats(rm: RewardModel, pairs: list[Pair]) -> tuple[float, float]:
    """Mean and sd of the scores of the distinct held-out completions (the scorer's normalisation)."""
    rows = list(dict.fromkeys((p.prompt, text) for p in pairs for text in (p.chosen, p.rejected)))
    scores = np.asarray(rm.scores([r[0] for r in rows], [r[1] for r in rows]), dtype=float)
    return float(scores.mean()), float(max(scores.std(), 1e-6))
