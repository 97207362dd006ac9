"""A device check, prepared: GRPO in bf16 on a ~270M-parameter Llama, with and without LoRA.

On a CUDA machine with nothing downloaded it builds a Llama-architecture model from a config
(random weights, the testbed's character tokenizer), saves it to a folder and runs one trial of
the ``grpo`` preset through the harness's own entry point (``run_trial``) on that folder, in
bf16, for a few steps, once with full weights and once with a LoRA adapter. For each it prints
the generation and update throughput (tokens/s, the steps after the first), the peak GPU memory
and the largest per-token gap between the sampler's log-probs and the training forward pass's
(``train/old_logprob_gap``: bf16 makes ``old_logprobs: auto`` recompute them). When ``trl`` is
installed it times TRL's GRPOTrainer on the same folder, prompts, group size, completion budget
and update schedule; otherwise it says so in one line.

When a vLLM environment is found (``$HARNESS_VLLM_PYTHON`` or ``.venv-vllm/``, README "vLLM
backend"; with CUDA, the ``vllm`` wheel) it also runs both generation backends on the LoRA policy
side by side (``benchmarks/vllm_backend.py``'s ``compare``: the same prompts, every completion to
the budget, interleaved repeats): tokens/s of ``hf`` and ``vllm``, their ratio, the adapter sync
of a step, a full-weights reload and the server's start; without one it says so in one line. It
finishes in well under 8 minutes; the vLLM and TRL parts are skipped, with a line, past their
share of the budget.

    python benchmarks/gpu_check.py              # CUDA only; without a device: one line, exit 0
    python benchmarks/gpu_check.py --cpu-smoke  # the same path at a tiny size on the CPU
    python benchmarks/gpu_check.py --cpu-smoke --vllm   # and the two backends (a vLLM server start)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import torch

from harness.algorithms import resolve_algorithm
from harness.engine.models import build_tiny_model, char_tokenizer
from harness.engine.spec import ModelConfig, TrialSpec
from harness.engine.task_config import TaskConfig
from harness.engine.tasks import build_task
from harness.engine.trial import prompt_batches, run_trial, start_policy
from harness.engine.vllm.environment import check_vllm_environment, vllm_python
from harness.errors import ConfigError, one_line

#: hidden 1024, 16 layers, MLP 4096: about 268M parameters (the char vocabulary adds ~16k)
GPU_SIZE = {"hidden_size": 1024, "layers": 16, "heads": 16, "intermediate_size": 4096}
#: one head of 64: vLLM's CPU attention has no kernel for heads of 16 (``--cpu-smoke --vllm``)
CPU_SIZE = {"hidden_size": 64, "layers": 2, "heads": 1, "intermediate_size": 128}
#: 5-digit addition (13-token prompts), dense partial credit so groups are mixed and updates real
TASK = {"name": "addition", "min_digits": 5, "max_digits": 5, "n_train": 1024, "n_eval": 16, "reward": "partial_match"}
LORA = {"r": 16, "alpha": 32}
#: the whole check must end inside this; TRL is skipped (with a line) past it
BUDGET_S = 7 * 60
#: the two backends start only with this much of the budget left (a vLLM server's start, with CUDA
#: graphs captured, is most of it), and the server gets this long to answer /health
VLLM_RESERVE_S = 3 * 60
#: interleaved repeats of the backend comparison (the first is a warm-up) and full reloads timed
VLLM_REPEATS, VLLM_RELOADS = 4, 2


def model_folder(size: dict, task, dtype: torch.dtype) -> tuple[str, int]:
    """A random-weight Llama of ``size`` with the task's char tokenizer, saved as a model folder."""
    folder = tempfile.mkdtemp(prefix="gpu-check-model-")
    tokenizer = char_tokenizer(task.alphabet)
    model = build_tiny_model(ModelConfig(tiny=size), len(tokenizer), tokenizer, seed=0)
    n_params = sum(p.numel() for p in model.parameters())
    model.to(dtype).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder, n_params


def _peak(cuda: bool) -> str:
    """Peak GPU memory allocated since the last reset."""
    return f"{torch.cuda.max_memory_allocated() / 2**30:.2f} GiB" if cuda else "n/a (CPU)"


def trial_spec(folder: str, device: str, lora: bool, steps: int, scale: dict) -> TrialSpec:
    return TrialSpec(
        arm="grpo-lora" if lora else "grpo",
        task=TASK,
        model={"name": folder, "dtype": "bfloat16", "device": device, "lora": LORA if lora else None},
        warmstart={"enabled": False},  # the folder is the starting policy
        train={
            "steps": steps,
            "prompts_per_step": scale["prompts"],
            "max_new_tokens": scale["new_tokens"],
            "eval_every": 0,
            "eval_samples": 1,
            "max_eval_prompts": 16,
        },
        algorithm=resolve_algorithm("grpo"),
        cache_dir=tempfile.mkdtemp(prefix="gpu-check-cache-"),
    )


def ours(spec: TrialSpec, cuda: bool) -> dict:
    """One trial; throughput over the steps after the first (which pays for kernel warm-up)."""
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    clock = time.perf_counter()
    result = run_trial(spec)
    rows = result.history[1:]
    timed = rows[1:] or rows
    gaps = [row["train/old_logprob_gap"] for row in rows if "train/old_logprob_gap" in row]
    return {
        "trial_s": time.perf_counter() - clock,
        "generate_tok_s": sum(r["tokens/generated"] for r in timed) / sum(r["time/generate_s"] for r in timed),
        "update_tok_s": sum(r["tokens/trained"] for r in timed) / sum(r["time/update_s"] for r in timed),
        "step_s": statistics.median(r["time/step_s"] for r in timed),
        "peak": _peak(cuda),
        "old_logprob_gap_max": max(gaps) if gaps else float("nan"),
        "old_logprob_gap_first": gaps[0] if gaps else float("nan"),
        "reward_mean": statistics.mean(r["train/reward_mean"] for r in rows),
    }


def trl(folder: str, task, lora: bool, steps: int, scale: dict, cuda: bool) -> dict | str:
    """TRL's GRPOTrainer on the same folder and schedule: G samples of P prompts per generation,
    one optimiser step per minibatch (``steps_per_generation`` = the preset's minibatches)."""
    try:
        from datasets import Dataset
        from transformers import TrainerCallback
        from trl import GRPOConfig, GRPOTrainer
    except ImportError as err:
        return f"not installed ({err.name}); `pip install trl` to compare with TRL's GRPOTrainer"
    grpo = resolve_algorithm("grpo")
    rollout = scale["prompts"] * grpo.group_size
    by_prompt = {item.prompt: item for item in task.train}

    def reward(prompts, completions, **_):
        return [task.reward(by_prompt[p], c) for p, c in zip(prompts, completions)]

    class StepClock(TrainerCallback):
        def __init__(self):
            self.times, self.lengths, self._start = [], [], 0.0

        def on_step_begin(self, *args, **kwargs):
            self._start = time.perf_counter()

        def on_step_end(self, *args, **kwargs):
            self.times.append(time.perf_counter() - self._start)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "completions/mean_length" in logs:
                self.lengths.append(logs["completions/mean_length"])

    peft_config = None
    if lora:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=LORA["r"], lora_alpha=LORA["alpha"], target_modules="all-linear", task_type="CAUSAL_LM"
        )
    clock = StepClock()
    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="gpu-check-trl-"),
        model_init_kwargs={"dtype": "bfloat16"},
        per_device_train_batch_size=rollout // grpo.minibatches,
        steps_per_generation=grpo.minibatches,
        num_generations=grpo.group_size,
        max_completion_length=scale["new_tokens"],
        max_steps=steps * grpo.minibatches,
        beta=grpo.kl_coef,
        epsilon=grpo.eps_low,
        learning_rate=grpo.lr,
        temperature=1.0,
        bf16=cuda,
        use_cpu=not cuda,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        log_level="error",
        disable_tqdm=True,
        seed=0,
    )
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    trainer = GRPOTrainer(
        model=folder,
        reward_funcs=reward,
        args=config,
        train_dataset=Dataset.from_list([{"prompt": i.prompt} for i in task.train[: scale["prompts"] * steps * 2]]),
        peft_config=peft_config,
        callbacks=[clock],
    )
    trainer.train()
    per_rollout = [sum(clock.times[i : i + grpo.minibatches]) for i in range(0, len(clock.times), grpo.minibatches)]
    timed = per_rollout[1:] or per_rollout
    completion_tokens = statistics.mean(clock.lengths) * rollout if clock.lengths else float("nan")
    return {
        "step_s": statistics.median(timed),  # one rollout and its minibatch updates, as ours
        "completion_tok_s": completion_tokens / statistics.median(timed),
        "peak": _peak(cuda),
    }


def backends(folder: str, device: str, steps: int, scale: dict, started: float) -> dict | str:
    """Both generation backends on the LoRA policy, side by side (``vllm_backend.compare``), printed
    on one line; or, on one line, why not."""
    from vllm_backend import Shape, compare  # a sibling script, as this one is run

    left = BUDGET_S - (time.perf_counter() - started)
    if left < VLLM_RESERVE_S:
        return _backends_line(f"skipped, {left:.0f} s of the {BUDGET_S} s budget left (it needs {VLLM_RESERVE_S} s)")
    python = vllm_python()
    try:
        check_vllm_environment(python)
    except ConfigError as err:
        return _backends_line(f"not measured: {one_line(err)}")
    log_path = Path(tempfile.mkdtemp(prefix="gpu-check-vllm-")) / "vllm-server.log"
    try:
        spec = trial_spec(folder, device, True, steps, scale)
        task, lm, _, _ = start_policy(spec)
        batches = prompt_batches(task.train, scale["prompts"], VLLM_REPEATS, spec.seed)
        shape = Shape(spec.algorithm.group_size, scale["new_tokens"], spec.train.temperature)
        out = compare(
            python,
            lm,
            [[item.prompt for item in batch] for batch in batches],
            shape,
            seed=spec.seed,
            warmup=1,
            reloads=VLLM_RELOADS,
            start_timeout_s=left - 60,
            log_path=log_path,
            progress=lambda line: None,
        )
    except Exception as err:  # noqa: BLE001 - vLLM's engine moves; say why and keep the numbers above
        return _backends_line(f"failed: {one_line(err)} (server log: {log_path})")
    sync = {label: statistics.median(times) for label, times in out.sync.items()}
    reload = out.reload if isinstance(out.reload, str) else f"{statistics.median(out.reload['full sync']):.2f} s"
    row = {
        "hf_tok_s": out.tokens_per_s("hf"),
        "vllm_tok_s": out.tokens_per_s("vllm"),
        "vllm_over_hf": out.ratio(),
        "tokens_per_repeat": {b: sorted({t for _, t in out.runs[b]}) for b in out.runs},
        "adapter_sync_s": sync,
        "full_reload": reload,
        "server_start_s": out.server_start_s,
    }
    print(
        f"backends lora: hf {row['hf_tok_s']:9.0f} tok/s | vllm {row['vllm_tok_s']:9.0f} tok/s | vllm/hf "
        f"{row['vllm_over_hf']:.2f} | {row['tokens_per_repeat']['hf']} tokens a repeat each | adapter sync "
        f"{sync['publish (all of it)']:.2f} s | full reload {reload} | server start {out.server_start_s:.0f} s"
    )
    return row


def _backends_line(why: str) -> str:
    print(f"backends    : hf vs vllm {why}")
    return why


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-smoke", action="store_true", help="run the same path at a tiny size on the CPU")
    parser.add_argument("--steps", type=int, default=None, help="RL steps per trial (default 5; 2 with --cpu-smoke)")
    parser.add_argument(
        "--vllm",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the hf and vllm backends side by side (default: with CUDA, when a vLLM environment is found)",
    )
    args = parser.parse_args()
    cuda = torch.cuda.is_available() and not args.cpu_smoke
    if not cuda and not args.cpu_smoke:
        print(
            "gpu_check: no CUDA device is visible: nothing measured (--cpu-smoke runs the same path "
            "at a tiny size on the CPU)"
        )
        return 0
    started = time.perf_counter()
    size, device = (GPU_SIZE, "cuda") if cuda else (CPU_SIZE, "cpu")
    scale = {"prompts": 16, "new_tokens": 32} if cuda else {"prompts": 4, "new_tokens": 8}
    steps = args.steps or (5 if cuda else 2)
    where = torch.cuda.get_device_name() if cuda else "CPU (smoke run, tiny size)"
    import peft
    import transformers

    print(
        f"gpu_check on {where}: torch {torch.__version__}, transformers {transformers.__version__}, "
        f"peft {peft.__version__}"
    )
    task = build_task(TaskConfig(**TASK))
    folder, n_params = model_folder(size, task, torch.bfloat16)
    print(
        f"model: Llama {size}, {n_params / 1e6:.1f}M parameters, random weights, bf16; "
        f"grpo preset, {scale['prompts']} prompts x 8 samples x {scale['new_tokens']} new tokens, {steps} steps"
    )

    summary: dict[str, dict | str] = {}
    for lora in (False, True):
        name = "lora" if lora else "full"
        summary[f"ours/{name}"] = row = ours(trial_spec(folder, device, lora, steps, scale), cuda)
        print(
            f"ours {name:4s}: generate {row['generate_tok_s']:9.0f} tok/s | update {row['update_tok_s']:9.0f} "
            f"tok/s | step {row['step_s']:6.2f} s | peak {row['peak']} | old-logprob gap "
            f"max {row['old_logprob_gap_max']:.2e} (step 1: {row['old_logprob_gap_first']:.2e}) | "
            f"trial {row['trial_s']:.0f} s"
        )
    if args.vllm if args.vllm is not None else cuda:
        summary["backends"] = backends(folder, device, steps, scale, started)
    else:
        summary["backends"] = _backends_line("not run (--vllm runs it)")
    for lora in (False, True):
        name = "lora" if lora else "full"
        if time.perf_counter() - started > BUDGET_S:
            summary[f"trl/{name}"] = "skipped: past the time budget"
            print(f"trl  {name:4s}: skipped, past the {BUDGET_S} s budget")
            continue
        try:
            outcome = trl(folder, task, lora, steps, scale, cuda)
        except Exception as err:  # noqa: BLE001 - TRL's API moves; say why and keep our numbers
            outcome = f"failed: {type(err).__name__}: {err}"
        summary[f"trl/{name}"] = outcome
        if isinstance(outcome, str):
            print(f"trl  {name:4s}: {outcome}")
            if outcome.startswith("not installed"):
                break
        else:
            print(
                f"trl  {name:4s}: completions {outcome['completion_tok_s']:9.0f} tok/s | step "
                f"{outcome['step_s']:6.2f} s | peak {outcome['peak']}"
            )
    print(f"gpu_check: done in {time.perf_counter() - started:.0f} s")
    print("summary: " + json.dumps(summary, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
