"""Preference pairs for a reward model: read from a JSONL file, or built from a task's verifier on
a policy's samples; split into train and held-out pairs by prompt.

A pair file has one JSON object a line with string fields ``prompt``, ``chosen`` (the preferred
completion) and ``rejected``; other fields are ignored and blank lines skipped. A line that is not
JSON, lacks a field, has a non-string one, or whose chosen and rejected are the same text is a
one-line ``ConfigError`` naming ``file:line``, and so is a file with no pairs: all checked before
any model is built.

Built pairs (``verifier_pairs``) take, per prompt, ``samples_per_prompt`` samples of the policy and
pair a sample the verifier scores higher (with binary rewards: a correct one) against one it
scores lower, at most ``pairs_per_prompt`` per prompt, drawn with a seeded generator. Each label is
then flipped with probability ``label_noise``: the proxy is trained on labels that disagree with
the verifier as a human labeller's would, and each pair keeps its noise-free label (``gold``) so
the reward model's agreement with the verifier can be measured apart from its agreement with
the labels it was given.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.engine.tasks.jsonl_file import jsonl_records
from harness.errors import ConfigError, HarnessError

FIELDS = ("prompt", "chosen", "rejected")
SAMPLE_CHUNK = 64  # prompts sampled per call of the sampler


@dataclass(frozen=True)
class Pair:
    prompt: str
    chosen: str  # the completion labelled preferred
    rejected: str
    gold: bool | None = None  # built pairs: whether the label agrees with the verifier (None: unknown)


def read_pairs(path: str | Path, where: str = "--pairs") -> list[Pair]:
    """The pairs of a JSONL file, every line checked (one-line ``ConfigError`` naming file:line);
    ``where`` names where the path came from, for the error of a missing file."""
    pairs = [
        _pair(record, line)
        for line, record in jsonl_records(path, where, '{"prompt": ..., "chosen": ..., "rejected": ...}')
    ]
    if not pairs:
        raise ConfigError(f"{path}: the file holds no pairs; each line needs string fields prompt, chosen, rejected")
    return pairs


def _pair(record: Any, where: str) -> Pair:
    if not isinstance(record, dict):
        raise ConfigError(
            f"{where}: a line must be a JSON object with string fields prompt, chosen and rejected, "
            f"not a {type(record).__name__}"
        )
    missing = [name for name in FIELDS if name not in record]
    if missing:
        raise ConfigError(
            f"{where}: missing field{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
            "(each line needs prompt, chosen and rejected)"
        )
    for name in FIELDS:
        if not isinstance(record[name], str):
            raise ConfigError(f"{where}: field {name} must be a string, not {type(record[name]).__name__}")
    if record["chosen"] == record["rejected"]:
        raise ConfigError(f"{where}: chosen and rejected are identical; a pair must compare two different completions")
    return Pair(record["prompt"], record["chosen"], record["rejected"])


def pairs_sha256(pairs: list[Pair]) -> str:
    """The content hash of the pairs (not of the file's bytes: formatting and extra fields do not count)."""
    rows = [[p.prompt, p.chosen, p.rejected] for p in pairs]
    return hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode()).hexdigest()


def split_pairs(pairs: list[Pair], held_out: float, seed: int) -> tuple[list[Pair], list[Pair]]:
    """(train, held-out): whole prompts held out, drawn in a seeded order, until their pairs are
    ``held_out`` of all (at least one pair on each side), so no held-out prompt is trained on;
    with a single prompt, the pairs themselves are split."""
    if len(pairs) < 2:
        raise ConfigError(f"{len(pairs)} pair: too few to hold any out; give at least 2 (preferably hundreds)")
    want = min(max(1, round(held_out * len(pairs))), len(pairs) - 1)
    prompts = list(dict.fromkeys(p.prompt for p in pairs))
    rng = random.Random(seed)
    if len(prompts) == 1:
        order = list(range(len(pairs)))
        rng.shuffle(order)
        held = set(order[:want])
        return [p for i, p in enumerate(pairs) if i not in held], [p for i, p in enumerate(pairs) if i in held]
    rng.shuffle(prompts)
    count: dict[str, int] = {}
    for p in pairs:
        count[p.prompt] = count.get(p.prompt, 0) + 1
    chosen: set[str] = set()
    total = 0
    for prompt in prompts:
        if total >= want or len(chosen) == len(prompts) - 1:
            break
        chosen.add(prompt)
        total += count[prompt]
    return [p for p in pairs if p.prompt not in chosen], [p for p in pairs if p.prompt in chosen]


def label_pairs(candidates: list[tuple[str, str, str]], label_noise: float, rng: random.Random) -> list[Pair]:
    """(prompt, better, worse) candidates as pairs, each label flipped with probability ``label_noise``."""
    out = []
    for prompt, better, worse in candidates:
        flip = rng.random() < label_noise
        out.append(Pair(prompt, worse, better, gold=False) if flip else Pair(prompt, better, worse, gold=True))
    return out


def group_candidates(
    prompt: str, texts: list[str], scores: list[float], per_prompt: int, rng: random.Random
) -> list[tuple[str, str, str]]:
    """Up to ``per_prompt`` distinct (prompt, higher-scored, lower-scored) text pairs of one prompt's samples."""
    best: dict[str, float] = {}
    for text, score in zip(texts, scores):
        best.setdefault(text, score)
    distinct = list(best.items())
    options = [(a, b) for a, sa in distinct for b, sb in distinct if sa > sb]
    rng.shuffle(options)
    return [(prompt, a, b) for a, b in options[:per_prompt]]


def verifier_pairs(lm, task, config, seed: int) -> tuple[list[Pair], dict[str, float]]:
    """Pairs built from ``task.reward`` (the verifier) on ``lm``'s samples of ``config.prompts`` train
    prompts (``config``: a ``VerifierPairs``), with seeded prompt choice, sampling and label noise;
    and what was built (prompts with a pair, pairs, flipped share)."""
    import torch

    from harness.engine.rollout import decode_completions, sample_groups

    rng = random.Random(seed)
    items = rng.sample(list(task.train), min(config.prompts or len(task.train), len(task.train)))
    generator = torch.Generator(device=lm.device).manual_seed(seed)
    candidates = []
    for start in range(0, len(items), SAMPLE_CHUNK):
        chunk = items[start : start + SAMPLE_CHUNK]
        rollout = sample_groups(
            lm,
            [i.prompt for i in chunk],
            config.samples_per_prompt,
            max_new_tokens=config.max_new_tokens,
            temperature=config.temperature,
            generator=generator,
        )
        texts = decode_completions(lm, rollout)
        group = config.samples_per_prompt
        for k, item in enumerate(chunk):
            mine = texts[k * group : (k + 1) * group]
            candidates += group_candidates(
                item.prompt, mine, [task.reward(item, t) for t in mine], config.pairs_per_prompt, rng
            )
    pairs = label_pairs(candidates, config.label_noise, rng)
    if len(pairs) < 2:
        raise HarnessError(
            f"the verifier separated the samples of only {len(pairs)} pair(s) in {len(items)} prompts x "
            f"{config.samples_per_prompt} samples (every sample of a prompt scored alike): the warm-started "
            "policy is always right or always wrong; sample more prompts or change the warm start's target accuracy"
        )
    info = {
        "pairs/prompts_sampled": float(len(items)),
        "pairs/prompts_with_pairs": float(len({p.prompt for p in pairs})),
        "pairs/total": float(len(pairs)),
        "pairs/flipped_share": sum(p.gold is False for p in pairs) / len(pairs),
    }
    return pairs, info
