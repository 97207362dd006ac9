"""A learned reward model: a causal LM's trunk with a scalar head, fitted to preference pairs with
the Bradley-Terry loss, cached by content hash, and loaded to score completions.

The score of a completion is a linear head (no bias: Bradley-Terry identifies only differences)
on the trunk's last, normed hidden state (``model.get_decoder()``, through a peft wrapper too) at
the last real token of prompt + completion + EOS. Training minimises, over pairs (x, y_w, y_l),

    L = -log sigmoid(r(x, y_w) - r(x, y_l))                      (Bradley & Terry 1952; seed §2 (2))

whose gradient, with Delta = r(x, y_w) - r(x, y_l), is -(1 - sigmoid(Delta)) (grad r_w - grad r_l):
each pair pushes its two scores apart by the model's probability of ranking it wrong. AdamW
(``learner.make_optimizer``), gradient clipping, seeded pair order and head initialisation, so the
same inputs give the same model. The trunk is trained whole, or only its LoRA adapter when the
model config has one (merged into the trunk before saving).

The base is the study's warm-started policy (InstructGPT initialises its reward model from the
SFT model), the model as configured (a fresh tiny model over the task's and the pairs' characters,
or the pretrained one), or any hub id / local folder. Held-out pairs (whole prompts) give the
metrics: pair accuracy against the labels, the BT loss, the Brier score of sigmoid(Delta) and its
expected calibration error over ``ECE_BINS`` bins of confidence; for pairs built from the
verifier also against the noise-free labels (``*_gold``). They are measured on the model as
loaded back from its folder, and so are the mean and sd of its scores over the held-out
completions, by which the scorer normalises.

The cache (``<cache_dir>/reward_models/<key>/``, key in ``reward_model_key``) works like the warm
start's: under a lock, a folder whose manifest (written last) lists checksums that all match is
used without training; any other content is one ``RewardModelCacheWarning`` line and a rebuild.
"""

from __future__ import annotations

import math
import shutil
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from harness.engine.checked_folder import (
    Unusable,
    locked,
    one_line,
    verify,
    write_manifest,
)
from harness.engine.learner import make_optimizer
from harness.engine.models import (
    MAX_LOST_SHARE,
    LoadedModel,
    build_tiny_model,
    char_tokenizer,
    load_pretrained,
    lost_characters,
    pick_device,
)
from harness.engine.preference_pairs import (
    Pair,
    pairs_sha256,
    read_pairs,
    split_pairs,
    verifier_pairs,
)
from harness.engine.reward_model_key import (  # noqa: F401 - RewardTraining, VerifierPairs: the CLI's
    FORMAT,
    FORMAT_VERSION,
    HEAD_FILE,
    MANIFEST_FILE,
    RewardModelInputs,
    RewardTraining,
    VerifierPairs,
    cache_folder,
    cache_key,
    read_manifest,
    reward_model_id,
)
from harness.engine.rollout import pad_rows, position_ids_of
from harness.engine.spec import ModelConfig, TrialSpec
from harness.engine.tasks import build_task
from harness.engine.tasks.base import Task
from harness.engine.warmstart_key import gold_task
from harness.errors import ConfigError, HarnessError

ECE_BINS = 10
SCORE_BATCH = 64  # rows per forward pass when measuring
PROGRESS_EVERY_S = 15.0


class RewardModelCacheWarning(UserWarning):
    """A cached reward model failed its checks and is being rebuilt."""


# ---------------------------------------------------------------------------------------------
# The loss and the metrics


def bradley_terry_loss(chosen: torch.Tensor, rejected: torch.Tensor) -> torch.Tensor:
    """Mean of -log sigmoid(r_w - r_l) over pairs (seed §2, eq. 2)."""
    return -F.logsigmoid(chosen - rejected).mean()


def expected_calibration_error(delta, bins: int = ECE_BINS) -> float:
    """ECE of the pairs' predicted preferences: each pair's confidence in the winner it predicts,
    sigmoid(|Delta|) in [0.5, 1], in ``bins`` equal bins; the sum over bins of the bin's share of
    pairs times |its accuracy - its mean confidence| (a tie counts as half right)."""
    d = np.asarray(delta, dtype=float)
    confidence = 1.0 / (1.0 + np.exp(-np.abs(d)))
    correct = (d > 0) + 0.5 * (d == 0)
    edges = np.linspace(0.5, 1.0, bins + 1)
    index = np.clip(np.searchsorted(edges, confidence, side="right") - 1, 0, bins - 1)
    total = 0.0
    for b in range(bins):
        inside = index == b
        if inside.any():
            total += inside.mean() * abs(correct[inside].mean() - confidence[inside].mean())
    return float(total)


def pair_metrics(delta, gold=None, bins: int = ECE_BINS) -> dict[str, float]:
    """Accuracy, BT loss, Brier score and ECE of score differences Delta = r(chosen) - r(rejected)
    against the labels; with ``gold`` (per pair: does its label agree with the verifier) the same
    against the noise-free labels, as ``*_gold``."""
    d = np.asarray(delta, dtype=float)

    def of(x: np.ndarray, suffix: str) -> dict[str, float]:
        p = 1.0 / (1.0 + np.exp(-x))
        return {
            f"accuracy{suffix}": float(np.mean((x > 0) + 0.5 * (x == 0))),
            f"loss{suffix}": float(np.mean(np.logaddexp(0.0, -x))),
            f"brier{suffix}": float(np.mean((1.0 - p) ** 2)),
            f"ece{suffix}": expected_calibration_error(x, bins),
        }

    out = of(d, "")
    if gold is not None:
        out.update(of(np.where(np.asarray(gold, dtype=bool), d, -d), "_gold"))
    return out


# ---------------------------------------------------------------------------------------------
# The model


class ScalarRewardModel(torch.nn.Module):
    """A causal LM's trunk and a linear head on the hidden state of each row's last real token."""

    def __init__(self, trunk, head: torch.nn.Linear):
        super().__init__()
        self.trunk, self.head = trunk, head

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        out = self.trunk.get_decoder()(input_ids=input_ids, attention_mask=attention_mask,
                                       position_ids=position_ids_of(attention_mask), use_cache=False)
        last = attention_mask.sum(-1) - 1  # right-padded rows
        hidden = out.last_hidden_state[torch.arange(len(last), device=last.device), last]
        return self.head(hidden.float()).squeeze(-1)


def hidden_size(model) -> int:
    config = model.config.get_text_config(decoder=True) if hasattr(model.config, "get_text_config") else model.config
    return int(config.hidden_size)


@dataclass
class RewardModel:
    """A reward model ready to score: the module, the tokenizer and how prompts are written."""

    module: ScalarRewardModel
    lm: LoadedModel  # the trunk's tokenizer, device and prompt format (``format_prompt``)
    manifest: dict[str, Any]

    def encode(self, prompts: list[str], completions: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-padded ids and mask of prompt + completion + EOS per row (BOS first for plain prompts)."""
        tok = self.lm.tokenizer
        prefix = [tok.bos_token_id] if tok.bos_token_id is not None and not self.lm.use_chat_template else []
        limit = getattr(self.module.trunk.config, "max_position_embeddings", None)
        rows = []
        for prompt, completion in zip(prompts, completions, strict=True):
            ids = (prefix + tok(self.lm.format_prompt(prompt), add_special_tokens=False)["input_ids"]
                   + tok(completion, add_special_tokens=False)["input_ids"] + [tok.eos_token_id])
            rows.append(ids[-limit:] if limit else ids)
        return pad_rows(rows, tok.pad_token_id, left=False, device=self.lm.device)

    def forward(self, prompts: list[str], completions: list[str]) -> torch.Tensor:
        return self.module(*self.encode(prompts, completions))

    @torch.no_grad()
    def scores(self, prompts: list[str], completions: list[str], batch_size: int = SCORE_BATCH) -> list[float]:
        """The raw score of each completion, in eval mode, without gradients, ``batch_size`` rows a pass."""
        training = self.module.training
        self.module.eval()
        try:
            out: list[float] = []
            for start in range(0, len(prompts), batch_size):
                part = slice(start, start + batch_size)
                out += self.forward(prompts[part], completions[part]).tolist()
            return out
        finally:
            self.module.train(training)

    def normalised(self, raw: list[float]) -> list[float]:
        """Scores shifted and scaled to zero mean and unit sd over the held-out completions."""
        mean, std = self.manifest["score_mean"], self.manifest["score_std"]
        return [(r - mean) / std for r in raw]


def load_reward_model(folder: str | Path, device: torch.device | str | None = None) -> RewardModel:
    """The reward model saved in ``folder``, its files checked against the manifest's checksums;
    a folder that is not one, or whose files do not match, is a one-line ``ConfigError``."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    try:
        verify(folder, manifest["sha256"])
    except Unusable as problem:
        raise ConfigError(f"reward model {folder}: {problem}; train it again") from None
    return _load(folder, manifest, device)


def _load(folder: Path, manifest: dict[str, Any], device=None) -> RewardModel:
    device = torch.device(device) if device is not None else pick_device(ModelConfig())
    config = ModelConfig(dtype=manifest["dtype"], device="cuda" if device.type == "cuda" else "cpu",
                         chat_template=manifest["prompt_format"] == "chat")
    lm = load_pretrained(str(folder), config)
    lm.use_chat_template = manifest["prompt_format"] == "chat"
    head = torch.nn.Linear(hidden_size(lm.model), 1, bias=False)
    try:
        head.load_state_dict(load_file(str(folder / HEAD_FILE)))
    except Exception as err:  # noqa: BLE001 - any unreadable head: not this format
        raise ConfigError(f"reward model {folder}: its head {HEAD_FILE} does not load ({one_line(err)})") from None
    module = ScalarRewardModel(lm.model, head.to(lm.device)).eval()
    for p in module.parameters():
        p.requires_grad_(False)
    return RewardModel(module, lm, manifest)


# ---------------------------------------------------------------------------------------------
# Training, cached


@dataclass
class TrainedRewardModel:
    folder: Path
    id: str
    manifest: dict[str, Any]
    cached: bool  # loaded from the cache: nothing was trained


def train_reward_model(spec: TrialSpec, *, training: RewardTraining, base: str = "warmstart",
                       pairs_file: str | Path | None = None,
                       from_verifier: VerifierPairs | None = None) -> TrainedRewardModel:
    """The reward model of these inputs: from the cache when it holds it (checked), else trained
    and saved there. ``spec`` gives the task, the model, the warm start and ``cache_dir``.

    Every input is checked before any work: the pair file line by line, the task, the base."""
    task = build_task(gold_task(spec.task))
    pairs = read_pairs(pairs_file) if pairs_file is not None else None
    if base not in ("warmstart", "model") and not base.strip():
        raise ConfigError("--base: give warmstart, model, or a hub id / local folder")
    inputs = RewardModelInputs.of(spec, base=base, training=training, verifier_pairs=from_verifier,
                                  pairs_sha256=pairs_sha256(pairs) if pairs is not None else None)
    pick_device(spec.model)  # a device this machine lacks is its own error
    key = cache_key(inputs)
    folder = cache_folder(spec.cache_dir, key)
    with locked(folder.with_suffix(".lock")):
        if folder.is_dir() and any(folder.iterdir()):
            try:
                manifest = _open_cache(folder, key)
                _say(f"using the cached reward model {folder} (held-out pair accuracy "
                     f"{manifest['metrics']['heldout/accuracy']:.3f})")
                return TrainedRewardModel(folder, reward_model_id(key), manifest, cached=True)
            except Unusable as problem:
                warnings.warn(f"reward-model cache {folder}: {problem}; rebuilding it",
                              RewardModelCacheWarning, stacklevel=2)
        manifest = _build(folder, key, inputs, spec, task, pairs)
    return TrainedRewardModel(folder, reward_model_id(key), manifest, cached=False)


def _build(folder: Path, key: str, inputs: RewardModelInputs, spec: TrialSpec, task: Task,
           pairs: list[Pair] | None) -> dict[str, Any]:
    training = inputs.training
    started = time.perf_counter()
    info: dict[str, float] = {}
    # the trunk first (a base that does not load fails before any sampling), unless it is the policy sampled
    lm = None if inputs.base == "warmstart" and pairs is None else _base_model(inputs, spec, task, pairs or [])
    if pairs is None:
        from harness.engine.warmstart import load_policy

        policy, _, _ = load_policy(spec, task)
        config = inputs.verifier_pairs
        prompts = min(config.prompts or len(task.train), len(task.train))
        _say(f"sampling {config.samples_per_prompt} completions of {prompts} train prompts from the warm-started "
             f"policy; pairs labelled by the verifier, label noise {config.label_noise:g}")
        pairs, info = verifier_pairs(policy, task, config, training.seed)
        lm = lm or policy
    _check_characters(lm, pairs)
    train, held = split_pairs(pairs, training.held_out, training.seed)
    rm = new_reward_model(lm, training.seed)
    steps = training.steps or training.epochs * math.ceil(len(train) / training.batch_size)
    _say(f"building {folder}: {len(pairs)} pairs ({len(train)} train, {len(held)} held out), {steps} steps")
    fit_info = fit(rm, train, training, steps)
    if folder.is_dir():
        shutil.rmtree(folder)
    elif folder.exists():
        folder.unlink()
    dtype = str(next(lm.model.parameters()).dtype).removeprefix("torch.")
    _save(rm.module, lm, folder)
    prompt_format = "chat" if lm.use_chat_template else "plain"
    loaded = _load(folder, {"dtype": dtype, "prompt_format": prompt_format}, lm.device)
    metrics = {**{f"heldout/{k}": v for k, v in measure(loaded, held).items()}, **fit_info, **info,
               "pairs/train": float(len(train)), "pairs/heldout": float(len(held))}
    mean, std = _score_stats(loaded, held)
    metrics["time/train_s"] = time.perf_counter() - started
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "id": reward_model_id(key), "key": key,
        "base": inputs.base if inputs.base != "model" else spec.model.name, "dtype": dtype,
        "prompt_format": prompt_format, "inputs": inputs.model_dump(mode="json"),
        "training": {**training.model_dump(mode="json"), "steps_run": steps}, "metrics": metrics,
        "score_mean": mean, "score_std": std,
    }
    manifest = write_manifest(folder, manifest)
    _say(f"done: held-out pair accuracy {metrics['heldout/accuracy']:.3f}"
         + (f" (against the noise-free labels {metrics['heldout/accuracy_gold']:.3f})"
            if "heldout/accuracy_gold" in metrics else "") + f", in {metrics['time/train_s']:.0f} s")
    return manifest


def new_reward_model(lm: LoadedModel, seed: int) -> RewardModel:
    """``lm``'s trunk with a new scalar head (torch's default init, seeded), to be trained."""
    torch.manual_seed(seed)
    head = torch.nn.Linear(hidden_size(lm.model), 1, bias=False).to(lm.device)
    return RewardModel(ScalarRewardModel(lm.model, head), lm, {})


def _base_model(inputs: RewardModelInputs, spec: TrialSpec, task: Task, pairs: list[Pair]) -> LoadedModel:
    """The trunk before training, when it is not the warm-started policy used for sampling."""
    if inputs.base == "warmstart":
        from harness.engine.warmstart import load_policy

        return load_policy(spec, task)[0]
    name = spec.model.name if inputs.base == "model" else inputs.base
    if name != "tiny":
        return load_pretrained(name, spec.model.model_copy(update={"name": name}), adapter_seed=inputs.training.seed)
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
        raise ConfigError(f"the reward model's tokenizer cannot encode {len(lost)} of the pairs' characters ({shown}), "
                          f"{share:.0%} of their text; use --base model (a fresh tiny model covers the pairs' "
                          "characters) or a model whose tokenizer covers them")


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
            _say(f"step {step}/{steps}, BT loss {np.mean(losses[-per_epoch:]):.4f}, "
                 f"{now - started:.0f} s so far, about {(now - started) / step * (steps - step):.0f} s left")
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


# ---------------------------------------------------------------------------------------------
# The folder


def _save(module: ScalarRewardModel, lm: LoadedModel, folder: Path) -> None:
    trunk = module.trunk
    if hasattr(trunk, "merge_and_unload"):  # a LoRA adapter is merged into the trunk's weights
        trunk = trunk.merge_and_unload()
    trunk.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    save_file({"weight": module.head.weight.detach().float().cpu().contiguous()}, str(folder / HEAD_FILE))


def _open_cache(folder: Path, key: str) -> dict[str, Any]:
    try:
        manifest = read_manifest(folder)
    except ConfigError as err:
        raise Unusable(str(err).split(": ", 1)[-1]) from None
    if manifest.get("key") != key:
        raise Unusable(f"{MANIFEST_FILE} records key {manifest.get('key')!r}, not {key!r}")
    verify(folder, manifest["sha256"])
    return manifest


def _say(line: str) -> None:
    print(f"reward model: {line}", file=sys.stderr, flush=True)


