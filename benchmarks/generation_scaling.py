"""Generation time per new token as completions grow: the sampler against the loop it replaced.

The old loop (kept below as the baseline, ``old_sample``) prefilled every prompt once per sample,
grew its KV cache and attention mask by concatenation at every token, and read "all done" from
the device at every token. The sampler (``harness.engine.rollout.sample``) prefills each prompt
once per group into a preallocated cache written in place and reads the device every few tokens.
Both run alternately, call by call, in one process on the same model and prompts, with EOS
disabled (the tokenizer's EOS id is replaced by one no token has), so every row runs to the budget.

Prints, for 8 prompts x group 8 on the testbed model (2 layers x 64) and on 4 layers x 256, the
median time per new token at 8, 32 and 128 new tokens for both, the speed-up (old time / new
time) and the ratio of the time per token at 128 tokens to that at 32. Target: that ratio within 1.2 (flat).

    python benchmarks/generation_scaling.py [--reps 5] [--warmup 1] [--threads 2]
        [--tokens 8 32 128] [--models 2x64 4x256] [--prompts 8] [--group 8] [--clock wall|cpu]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import replace
from types import SimpleNamespace

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import torch
import torch.nn.functional as F

from harness.engine.models import LoadedModel, build_tiny_model, char_tokenizer
from harness.engine.rollout import encode_prompts, sample
from harness.engine.spec import ModelConfig, TinyModelConfig
from harness.engine.task_config import TaskConfig
from harness.engine.tasks import build_task

TARGET = 1.2


@torch.no_grad()
def old_sample(lm, prompt_ids, prompt_mask, *, max_new_tokens, temperature, generator, group_size):
    """The replaced loop, compacted: one prefill per sample, the cache and mask grown by
    concatenation, a host sync per token. Returns the completion ids only."""
    ids, attention = prompt_ids.repeat_interleave(group_size, 0), prompt_mask.repeat_interleave(group_size, 0)
    eos, pad = lm.tokenizer.eos_token_id, lm.tokenizer.pad_token_id
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    out = lm.model(input_ids=ids, attention_mask=attention, position_ids=positions, use_cache=True)
    next_pos, done, tokens = positions[:, -1:] + 1, torch.zeros(ids.shape[0], dtype=torch.bool), []
    for _ in range(max_new_tokens):
        logp_all = F.log_softmax(out.logits[:, -1, :].float() / temperature, dim=-1)
        token = torch.multinomial(logp_all.exp(), 1, generator=generator).squeeze(-1)
        alive = ~done
        tokens.append(torch.where(alive, token, torch.full_like(token, pad)))
        done = done | (token == eos)
        if bool(done.all()):
            break
        attention = torch.cat([attention, alive.long()[:, None]], dim=1)
        out = lm.model(
            input_ids=tokens[-1][:, None],
            attention_mask=attention,
            position_ids=next_pos,
            use_cache=True,
            cache=out.cache,
        )
        next_pos = next_pos + 1
    return torch.stack(tokens, 1)


def new_sample(lm, prompt_ids, prompt_mask, **kw):
    return sample(lm, prompt_ids, prompt_mask, **kw).completion_ids


def _model_and_prompts(layers: int, width: int, prompts: list[str]):
    """The model with an EOS-less tokenizer (EOS id -1), and the prompts encoded by the real one."""
    tokenizer = char_tokenizer(build_task(TaskConfig()).alphabet)
    tiny = TinyModelConfig(hidden_size=width, layers=layers, heads=4, intermediate_size=2 * width)
    model = build_tiny_model(ModelConfig(tiny=tiny), len(tokenizer), tokenizer, seed=0).eval()
    lm = LoadedModel(model, tokenizer, torch.device("cpu"), use_chat_template=False)
    ids, mask = encode_prompts(lm, prompts)
    return replace(lm, tokenizer=SimpleNamespace(eos_token_id=-1, pad_token_id=tokenizer.pad_token_id)), ids, mask


ALGORITHMS = {"old": old_sample, "new": new_sample}
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def _per_token(lm, ids, mask, tokens: int, group: int, reps: int, warmup: int, clock) -> dict[str, float]:
    """Median seconds per new token of each algorithm over ``reps`` calls after ``warmup``, the two
    alternating call by call so that load drift on the machine falls on both alike."""
    times: dict[str, list[float]] = {name: [] for name in ALGORITHMS}
    for rep in range(warmup + reps):
        for name, fn in ALGORITHMS.items():
            gen = torch.Generator().manual_seed(rep)
            start = clock()
            out = fn(lm, ids, mask, max_new_tokens=tokens, temperature=1.0, generator=gen, group_size=group)
            spent = clock() - start
            assert out.shape[1] == tokens, "a row stopped before the budget"
            if rep >= warmup:
                times[name].append(spent)
    return {name: statistics.median(spent) / tokens for name, spent in times.items()}


def _parse_model(text: str) -> tuple[int, int]:
    layers, width = text.lower().split("x")
    return int(layers), int(width)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="timed calls per cell and algorithm")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tokens", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--models", nargs="+", default=["2x64", "4x256"], help="LAYERSxWIDTH")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="cpu: this process's CPU time, steadier on a shared machine (with --threads 1)",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    prompts = [item.prompt for item in build_task(TaskConfig()).train[: args.prompts]]
    print(
        f"torch {torch.__version__}, {args.threads} threads, {args.prompts} prompts x group {args.group}, "
        f"{args.clock} clock, median of {args.reps}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(f"\n{'model':<8}{'tokens':>7}{'old ms/tok':>12}{'new ms/tok':>12}{'speed-up':>10}")
    flat = []
    for name in args.models:
        lm, ids, mask = _model_and_prompts(*_parse_model(name), prompts)
        per_token = {}
        for tokens in args.tokens:
            timed = _per_token(lm, ids, mask, tokens, args.group, args.reps, args.warmup, CLOCKS[args.clock])
            old, new = per_token[tokens] = timed["old"], timed["new"]
            print(f"{name:<8}{tokens:>7}{old * 1e3:>12.3f}{new * 1e3:>12.3f}{old / new:>10.2f}")
        if {32, 128} <= per_token.keys():
            (old32, new32), (old128, new128) = per_token[32], per_token[128]
            flat.append(new128 / new32)
            print(f"{name:<8} per-token time 128 / 32 tokens: old {old128 / old32:.2f}, new {new128 / new32:.2f}")
    if flat:
        worst = max(flat)
        print(
            f"\nworst new per-token ratio 128 / 32: {worst:.2f} (target <= {TARGET}: "
            f"{'met' if worst <= TARGET else 'NOT met'}); load average at the end {os.getloadavg()[0]:.2f}"
        )


if __name__ == "__main__":
    main()
