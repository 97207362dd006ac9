"""Peak memory of a GRPO trial at a real vocabulary (151,936 tokens, Qwen2's), where the
full-vocabulary logits of a batch no longer fit.

A 2-layer, 64-wide Llama (built offline) whose embedding and LM head have 151,936 rows: the
character tokenizer of the addition task plus one filler character per remaining id, so every
id is a real token. The random initialisation puts about 1/151,936 of each token's probability
on EOS, so completions run to the budget (the mean completion length is printed). It runs
``run_trial`` at 8 prompts x 8 samples x 256 new tokens and prints the peak resident memory
(``ru_maxrss``) against a target of 4 GB, and the size of the logits tensor that the log-prob
passes no longer build (the old path materialised it, and its log-softmax, in every pass).

    python benchmarks/real_vocab_memory.py [--steps 2] [--tokens 256] [--threads 2] [--micro-batch-size N]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import torch

from harness.algorithms import resolve_algorithm
from harness.engine.logprobs import LOGIT_CHUNK_ELEMENTS
from harness.engine.models import SPECIAL_TOKENS, build_tiny_model, char_tokenizer
from harness.engine.spec import ModelConfig, TrialSpec
from harness.engine.task_config import TaskConfig
from harness.engine.tasks import build_task
from harness.engine.trial import run_trial

VOCAB = 151_936  # Qwen2's
PROMPTS, GROUP = 8, 8
TARGET_GB = 4.0
FILLER_START = 0x10000  # fillers from the supplementary planes: never a task character


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9  # Linux: KiB


def _model_folder(alphabet: str) -> str:
    """A tiny Llama with a true ``VOCAB``-row embedding and head, and its tokenizer, saved."""
    fillers = VOCAB - len(SPECIAL_TOKENS) - len(set(alphabet))
    tokenizer = char_tokenizer(alphabet + "".join(chr(FILLER_START + i) for i in range(fillers)))
    assert len(tokenizer) == VOCAB, len(tokenizer)
    folder = tempfile.mkdtemp(prefix="bench-vocab-")
    build_tiny_model(ModelConfig(), VOCAB, tokenizer, seed=0).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--micro-batch-size", type=int, default=None)
    args = parser.parse_args()
    task_config = {"name": "addition", "n_train": 200, "n_eval": 8}
    folder = _model_folder(build_task(TaskConfig(**task_config)).alphabet)
    before = _peak_gb()
    spec = TrialSpec(
        arm="grpo",
        algorithm=resolve_algorithm("grpo", {"group_size": GROUP}),
        model={"name": folder, "device": "cpu", "dtype": "float32", "chat_template": False},
        task=task_config,
        warmstart={"enabled": False},
        train={
            "steps": args.steps,
            "prompts_per_step": PROMPTS,
            "max_new_tokens": args.tokens,
            "eval_every": 0,
            "eval_samples": 1,
            "threads": args.threads,
            "micro_batch_size": args.micro_batch_size,
        },
        cache_dir=tempfile.mkdtemp(prefix="bench-cache-"),
    )
    clock = time.perf_counter()
    result = run_trial(spec)
    wall = time.perf_counter() - clock
    peak = _peak_gb()
    steps = result.history[1:]
    rows = PROMPTS * GROUP
    completion = statistics.mean(row["train/completion_len"] for row in steps)
    positions = max(len(item.prompt) for item in build_task(TaskConfig(**task_config)).train) + 1 + args.tokens
    full_logits = rows * positions * VOCAB * 4 / 1e9

    print(
        f"GRPO trial: {PROMPTS} prompts x {GROUP} samples x {args.tokens} new tokens, 2x64 Llama, vocabulary "
        f"{VOCAB:,}, {args.steps} steps, {args.threads} threads, micro_batch_size {args.micro_batch_size}, "
        f"torch {torch.__version__}, load average {os.getloadavg()[0]:.2f} (a shared machine: times vary)"
    )
    print(f"mean completion length {completion:.1f} tokens (budget {args.tokens})")
    for key in ("time/generate_s", "time/reference_s", "time/update_s", "time/step_s"):
        print(f"  {key:<20}{statistics.median(row[key] for row in steps):>9.1f} s (median of {len(steps)} steps)")
    print(f"trial wall time {wall:.0f} s")
    print(
        f"peak RSS {peak:.2f} GB (before the trial {before:.2f} GB); target < {TARGET_GB:g} GB: "
        f"{'met' if peak < TARGET_GB else 'NOT met'}"
    )
    print(
        f"not built: the full-logits tensor of one log-prob pass, [{rows}, {positions}, {VOCAB:,}] fp32 = "
        f"{full_logits:.1f} GB (and its log-softmax as much again); one chunk instead: "
        f"{LOGIT_CHUNK_ELEMENTS // VOCAB} tokens x {VOCAB:,} = {LOGIT_CHUNK_ELEMENTS * 4 / 2**20:.0f} MiB"
    )


if __name__ == "__main__":
    main()
