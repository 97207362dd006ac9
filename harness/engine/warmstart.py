"""The warm start: supervised fine-tuning on solved examples, cached by content hash.

Every trial with the same model, task and warm-start settings loads the same cached weights, so
the arms of a study start from one policy. SFT stops at the first check where greedy accuracy on
a validation slice of the *train* prompts reaches ``target_accuracy`` (or after ``steps``), which
puts the starting policy where groups are mixed and RL has something to learn. Held-out prompts
are never used here.

The warm start reads only ``WarmStartInputs`` (the model, the task, its own settings and the
generation budget its accuracy checks use), and the cache key hashes all of it: a setting it
reads cannot be left out of the key, because it can read nothing else. The inputs, the key and
the folder are in ``warmstart_key.py`` (torch-free: the plan reads them).

The cache is a checked cache (``harness.ground.checked_cache``): the folder holds the saved model
and tokenizer, ``warmstart.json`` (the metrics a trial reports, unchanged from older caches) and,
written last and atomically, ``manifest.json``: the sha256 of every other file and the greedy val
accuracy of the model as loaded back from the folder. A folder without a manifest is unfinished
or from before checksums. Every load, under the cache's lock, checks the checksums; a cache
without them is loaded and its greedy val accuracy re-measured against the one it recorded (then,
if it agrees, given a manifest, so this happens once). Any mismatch or load error is one
``WarmStartCacheWarning`` line naming what failed, and the cache is rebuilt, under the same lock,
by the same seeded SFT. A cache whose checksums match is loaded as it is, with no re-measurement:
its bytes are those that were measured.

``model.dtype: auto`` is keyed as the dtype it resolves to on this machine, so a trial that says
``auto`` (``harness trial``'s default) and a study that names the same dtype share one cache.

It says what it does on stderr (the trial's log in a study): which cache it uses or builds, SFT
progress (step, val accuracy, time left) every ``PROGRESS_EVERY_S``, and where SFT stopped. A
warm-started policy whose val accuracy (as loaded, the manifest's) is below ``target_accuracy``
gives the trial a ``warmstart_below_target`` warning, whether it was built now or cached.
"""

from __future__ import annotations

import json
import random
import time
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

from harness.engine.episodes import demonstration, format_of
from harness.engine.evaluation import greedy_accuracy
from harness.engine.learner import make_optimizer
from harness.engine.model_prepare import local_model
from harness.engine.models import (
    LoadedModel,
    build_tiny_model,
    char_tokenizer,
    load_pretrained,
    pick_device,
    with_lora,
)
from harness.engine.rollout import pad_rows
from harness.engine.spec import (
    WARMSTART_BELOW_TARGET,
    WARMSTART_SAYS,
    ModelConfig,
    TrialSpec,
    WarmStartConfig,
)
from harness.engine.tasks.base import Item, Task
from harness.engine.warmstart_key import WarmStartInputs, cache_folder
from harness.errors import one_line
from harness.ground.checked_cache import MANIFEST_FILE, Unusable, get_or_build
from harness.ground.console import say

VALIDATION_PROMPTS = 128
CHECK_EVERY = 25
INFO_FILE = "warmstart.json"  # the metrics trials report: {"warmstart/steps", "warmstart/val_accuracy"}
ACCURACY_SLACK_PROMPTS = 2  # a cache without checksums may re-measure this many prompts' worth off
PROGRESS_EVERY_S = 15.0  # SFT prints a progress line at the first accuracy check after this long
SAYS = WARMSTART_SAYS  # the prefix of what it says on stderr


class WarmStartCacheWarning(UserWarning):
    """A cached warm start failed its checks (or would not load) and is being rebuilt."""


def initial_model(inputs: WarmStartInputs, task: Task, adapter_seed: int, cache_dir: str) -> LoadedModel:
    """The policy before any warm start: a fresh tiny model (no adapter: built from scratch, its
    warm start trains every weight), or the pretrained one with its LoRA adapter, when configured,
    initialised from ``adapter_seed``; a GGUF model loads from its prepared folder under ``cache_dir``."""
    if inputs.model.name != "tiny":
        return load_pretrained(local_model(inputs.model.name, cache_dir), inputs.model, adapter_seed=adapter_seed)
    tokenizer = char_tokenizer(task.alphabet)
    model = build_tiny_model(inputs.model, len(tokenizer), tokenizer, seed=inputs.warmstart.seed)
    device = pick_device(inputs.model)
    return LoadedModel(model.to(device), tokenizer, device, use_chat_template=False)


def load_policy(spec: TrialSpec, task: Task) -> tuple[LoadedModel, dict[str, float], list[str]]:
    """The starting policy for a trial, the warm start's own metrics, and its warnings. A LoRA
    adapter on it is initialised from the trial seed (the warm start's own, from its seed)."""
    inputs = WarmStartInputs.of(spec)
    if not inputs.warmstart.enabled:
        lm = initial_model(inputs, task, spec.seed, spec.cache_dir)
        if inputs.model.name == "tiny" and inputs.model.lora is not None:  # no warm start: on the fresh model
            lm.model = with_lora(lm.model, inputs.model, spec.seed)
        return lm, {}, []
    pick_device(inputs.model)  # a device this machine lacks is its own error, not a broken cache
    folder = cache_folder(spec)

    def rebuilding(problem: str) -> None:
        warnings.warn(f"warm-start cache {folder}: {problem}; rebuilding it", WarmStartCacheWarning, stacklevel=4)

    def build() -> tuple[LoadedModel, dict[str, float]]:
        say(
            f"building {folder}: SFT of up to {inputs.warmstart.steps} steps until greedy accuracy on "
            f"{len(_validation(task))} train-validation prompts reaches {inputs.warmstart.target_accuracy:g}",
            prefix=SAYS,
        )
        lm = initial_model(inputs, task, inputs.warmstart.seed, spec.cache_dir)
        return lm, supervised_fine_tune(lm, task, inputs)

    entry = get_or_build(
        folder,
        key_fields={},  # the folder's name is the key
        work=build,
        save=lambda into, built: _save(into, *built, task, inputs, spec.seed),
        load=lambda cached, manifest: _open(cached, manifest, inputs, spec.seed),
        adopt=lambda cached: _adopt(cached, task, inputs, spec.seed),
        on_unusable=rebuilding,
    )
    (lm, info), accuracy = entry.value, entry.manifest["val_accuracy"]
    if entry.cached:
        say(
            f"using the cached warm start {folder} ({info['warmstart/steps']:.0f} SFT steps, "
            f"val accuracy {accuracy:.3f})",
            prefix=SAYS,
        )
    return lm, info, below_target(info, accuracy, inputs.warmstart)


def below_target(info: dict[str, float], accuracy: float, config: WarmStartConfig) -> list[str]:
    """The ``warmstart_below_target`` warning of a warm start whose policy, as loaded, has greedy
    val accuracy ``accuracy`` (the manifest's); none when it reached its target."""
    if accuracy >= config.target_accuracy:
        return []
    return [
        f"{WARMSTART_BELOW_TARGET}: after {info['warmstart/steps']:.0f} of at most {config.steps} SFT steps "
        f"the warm-started policy has greedy val accuracy {accuracy:.3f}, below warmstart.target_accuracy "
        f"{config.target_accuracy:g}, so RL starts weaker than planned (more groups in which every sample "
        "fails): raise warmstart.steps or warmstart.lr, or lower warmstart.target_accuracy"
    ]


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


def _save(
    folder: Path, lm: LoadedModel, info: dict[str, float], task: Task, inputs: WarmStartInputs, adapter_seed: int
) -> tuple[dict[str, float], tuple[LoadedModel, dict[str, float]]]:
    """The fine-tuned policy saved into ``folder`` (a LoRA warm start merged into the base
    weights) with its metrics, and loaded back, as a trial that finds the cache gets it (a LoRA
    adapter on it from ``adapter_seed``). The manifest records the greedy val accuracy of the
    policy as loaded back: the accuracy of these bytes."""
    model = lm.model
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    model.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    (folder / INFO_FILE).write_text(json.dumps(info, indent=2))
    loaded = _load(folder, inputs.model, adapter_seed)
    return {"val_accuracy": validation_accuracy(loaded, task, inputs)}, (loaded, _read_info(folder))


def _open(
    folder: Path, manifest: dict, inputs: WarmStartInputs, adapter_seed: int
) -> tuple[LoadedModel, dict[str, float]]:
    """The policy and metrics of an entry whose files match their checksums."""
    accuracy = manifest.get("val_accuracy")
    if isinstance(accuracy, bool) or not isinstance(accuracy, (int, float)):
        raise Unusable(f"{MANIFEST_FILE} records no val_accuracy")
    info = _read_info(folder)
    return _load_checked(folder, inputs.model, adapter_seed), info


def _adopt(
    folder: Path, task: Task, inputs: WarmStartInputs, adapter_seed: int
) -> tuple[dict[str, float], tuple[LoadedModel, dict[str, float]]]:
    """A cache from before checksums (or stopped just before its manifest): kept when the greedy
    val accuracy of the policy, as loaded, agrees with the one it recorded."""
    info = _read_info(folder)
    lm = _load_checked(folder, inputs.model, adapter_seed)
    recorded = info["warmstart/val_accuracy"]
    if info["warmstart/steps"] == 0:
        raise Unusable(f"{MANIFEST_FILE} is missing and {INFO_FILE} records no measured accuracy")
    measured = validation_accuracy(lm, task, inputs)
    if abs(measured - recorded) > ACCURACY_SLACK_PROMPTS / len(_validation(task)) + 1e-9:
        raise Unusable(
            f"{MANIFEST_FILE} is missing and the greedy val accuracy re-measured "
            f"{measured:.4f}, but {INFO_FILE} records {recorded:.4f}"
        )
    return {"val_accuracy": measured}, (lm, info)


def _read_info(folder: Path) -> dict[str, float]:
    path = folder / INFO_FILE
    if not path.is_file():
        raise Unusable(f"{INFO_FILE} is missing (the build did not finish)")
    try:
        info = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise Unusable(f"{INFO_FILE} is unreadable ({one_line(err, limit=300)})") from err
    keys = ("warmstart/steps", "warmstart/val_accuracy")
    if not (isinstance(info, dict) and all(isinstance(info.get(k), (int, float)) for k in keys)):
        raise Unusable(f"{INFO_FILE} lacks {' or '.join(keys)}")
    return info


def _load_checked(folder: Path, model: ModelConfig, adapter_seed: int) -> LoadedModel:
    try:
        return _load(folder, model, adapter_seed)
    except Exception as err:  # any load error means this cache cannot be used as it is
        raise Unusable(f"cannot load it ({one_line(err, limit=300)})") from err


def _load(folder: Path, model: ModelConfig, adapter_seed: int) -> LoadedModel:
    lm = load_pretrained(str(folder), model, adapter_seed=adapter_seed)
    if model.name == "tiny":
        lm.use_chat_template = False
    return lm


def _sft_example(lm: LoadedModel, task: Task, item: Item, fmt) -> tuple[list[int], list[int], list[float]]:
    """An item's prompt tokens, target tokens (EOS last) and the target's loss mask: a
    tool-calling episode's demonstration (in the turn format ``fmt``) has its tools' tokens out of
    the loss, as in RL."""
    if task.tool_use is not None:
        return demonstration(fmt, task.tool_use, item.prompt, item.turns or (item.target,))
    tok = lm.tokenizer
    prefix = [tok.bos_token_id] if tok.bos_token_id is not None and not lm.use_chat_template else []
    prompt = prefix + tok(lm.format_prompt(item.prompt), add_special_tokens=False)["input_ids"]
    target = tok(item.target, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    return prompt, target, [1.0] * len(target)


def _sft_batch(lm: LoadedModel, task: Task, items: list[Item]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded prompt+target ids, attention mask and loss mask (the target's policy tokens)."""
    fmt = format_of(lm, task.tool_use) if task.tool_use is not None else None
    rows = [_sft_example(lm, task, item, fmt) for item in items]
    ids, attention = pad_rows([p + t for p, t, _ in rows], lm.tokenizer.pad_token_id, left=False, device=lm.device)
    loss_mask, _ = pad_rows(
        [[0.0] * len(p) + m for p, _, m in rows], 0.0, left=False, dtype=torch.float, device=lm.device
    )
    return ids, attention, loss_mask


def _validation(task: Task) -> list[Item]:
    """The train prompts SFT checks its greedy accuracy on (never trained on when the set is large)."""
    return list(task.train[:VALIDATION_PROMPTS])


def validation_accuracy(lm: LoadedModel, task: Task, inputs: WarmStartInputs) -> float:
    """Greedy accuracy on the validation prompts: the check SFT stops on, and the cache's own."""
    return greedy_accuracy(lm, task, _validation(task), inputs.max_new_tokens)


def supervised_fine_tune(lm: LoadedModel, task: Task, inputs: WarmStartInputs) -> dict[str, float]:
    config = inputs.warmstart
    validation = _validation(task)
    pool = list(task.train[VALIDATION_PROMPTS:]) or list(task.train)
    rng = random.Random(config.seed)
    torch.manual_seed(config.seed)
    optimizer = make_optimizer([{"params": list(lm.model.parameters()), "lr": config.lr}], lm.device)
    budget = inputs.max_new_tokens
    accuracy, step = 0.0, 0
    started = shown = time.perf_counter()
    for step in range(1, config.steps + 1):
        lm.model.train()
        ids, attention, loss_mask = _sft_batch(lm, task, rng.sample(pool, min(config.batch_size, len(pool))))
        logits = lm.model(input_ids=ids, attention_mask=attention).logits[:, :-1].float()
        token_loss = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
        loss = (token_loss * loss_mask[:, 1:]).sum() / loss_mask[:, 1:].sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % CHECK_EVERY == 0 or step == config.steps:
            accuracy = greedy_accuracy(lm, task, validation, budget)
            if accuracy >= config.target_accuracy:
                break
            now = time.perf_counter()
            if now - shown >= PROGRESS_EVERY_S and step < config.steps:
                shown, elapsed = now, now - started
                say(
                    f"step {step}/{config.steps}, val accuracy {accuracy:.3f} (target {config.target_accuracy:g}), "
                    f"{_duration(elapsed)} so far, at most {_duration(elapsed / step * (config.steps - step))} left",
                    prefix=SAYS,
                )
    lm.model.eval()
    reached = "reached" if accuracy >= config.target_accuracy else "stopped at its step limit below"
    say(
        f"SFT {reached} its target {config.target_accuracy:g}: val accuracy {accuracy:.3f} after {step} steps "
        f"in {_duration(time.perf_counter() - started)}",
        prefix=SAYS,
    )
    return {"warmstart/steps": step, "warmstart/val_accuracy": accuracy}
