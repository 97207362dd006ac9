"""The trial program of ``trainer: trl``: ``python -m harness.trainers.trl_adapter TRIAL_FILE``.

It reads the trial file (the contract in the README), trains the warm-started policy
(``model.start``) with TRL's ``GRPOTrainer`` (``RLOOTrainer`` for leave-one-out advantages) as
``trl_mapping`` maps the arm, and writes what the contract asks: the final checkpoint in
``checkpoint_dir``, periodic ones in ``checkpoints_dir/step-<N>`` when ``train.eval_every`` asks
for a curve, and ``metrics.jsonl`` with TRL's log under the harness's metric names, one line per
harness step (``epochs x minibatches`` TRL optimiser steps).

Where it keeps the builtin trainer's choices so that the two trainers differ in their trainer only:

- prompts are the trial file's ``text`` (the chat template already applied, or none), as plain
  strings; with no template, the tokenizer's BOS goes in front, as the builtin rollout encodes them;
- the reward is the task's own (rebuilt from the trial's task config): its learned scorer where the
  task has one, else its verifier, so a completion earns what it earns in the builtin trainer;
- the policy loads through the engine's ``load_pretrained``, so a LoRA adapter is initialised from
  the trial seed exactly as the builtin trainer's; the final checkpoint is then the adapter alone
  (``adapter_config.json`` names ``model.start`` as its base), not merged.

Errors are one line on stderr and a non-zero exit code.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from harness.algorithms.config import AlgorithmConfig
from harness.engine.spec import ModelConfig
from harness.engine.task_config import TaskConfig
from harness.errors import ConfigError, HarnessError, one_line, squeeze
from harness.ground.console import error, say
from harness.trainers.trl_mapping import no_grad_passes, plan

CONTRACT = 1
#: TRL's log key -> the harness's metric name
METRIC_NAMES = {
    "reward": "train/reward_mean",
    "reward_std": "train/reward_std",
    "kl": "train/kl_ref",
    "clip_ratio/region_mean": "train/clip_frac",
    "cispo_clip_ratio": "train/clip_frac",
    "loss": "train/loss",
    "grad_norm": "train/grad_norm",
    "completions/mean_length": "train/completion_len",
}


def read_trial(path: str | Path) -> dict[str, Any]:
    """The trial file, checked for the contract version and the fields this program reads."""
    try:
        trial = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ConfigError(f"trial file {path}: cannot read it ({one_line(err)})") from None
    if not isinstance(trial, dict) or trial.get("contract") != CONTRACT:
        raise ConfigError(f"trial file {path}: not a contract {CONTRACT} trial file (its 'contract' field)")
    needed = ("seed", "algorithm", "train", "model", "task", "train_prompts", "output_dir", "checkpoint_dir")
    missing = [key for key in needed if key not in trial]
    if missing or "start" not in trial["model"]:
        raise ConfigError(f"trial file {path}: missing {', '.join(missing or ['model.start'])}")
    return trial


def training_rows(trial: dict[str, Any], task, tokenizer, use_chat_template: bool) -> list[dict[str, str]]:
    """One dataset row per train prompt: ``prompt`` (what TRL tokenizes) and ``question`` (the raw
    prompt, which finds the task's item for the reward)."""
    known = {item.prompt for item in task.train}
    bos = _bos_prefix(tokenizer, use_chat_template)
    rows = []
    for line in Path(trial["train_prompts"]).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if row["prompt"] not in known:
            raise ConfigError(
                f"train prompt {row['id']} is not one of task {task.name}'s train prompts: the trial file's task "
                "config and train_prompts disagree"
            )
        rows.append({"prompt": bos + row["text"], "question": row["prompt"]})
    if not rows:
        raise ConfigError(f"{trial['train_prompts']}: no train prompts")
    return rows


def _bos_prefix(tokenizer, use_chat_template: bool) -> str:
    """The BOS token's text when the builtin rollout would put it in front and the tokenizer does not."""
    if use_chat_template or tokenizer.bos_token_id is None:
        return ""
    ids = tokenizer("x")["input_ids"]
    return "" if ids and ids[0] == tokenizer.bos_token_id else tokenizer.bos_token


def task_reward(task):
    """TRL's reward function: the task's score of each completion, its item found by the raw prompt."""
    items = {item.prompt: item for item in task.train}

    def reward(prompts, completions, question, **_):
        batch = [items[q] for q in question]
        if task.scorer is not None:
            return [float(s) for s in task.scorer(batch, completions)]
        return [float(task.reward(item, text)) for item, text in zip(batch, completions, strict=True)]

    reward.__name__ = f"{task.name}_reward"
    return reward


class HarnessMetrics:
    """TRL's log lines as the contract's ``{"step": N, metric: value}`` lines, with the cumulative
    compute: generated tokens (completion tokens sampled), trained tokens (prompt and completion
    tokens the updates read, once per epoch), the steps' wall seconds, and FLOPs estimated by the
    builtin trainer's formula (``harness.engine.compute``) from the tokens TRL sampled, the no-grad
    passes it runs over them (``no_grad_passes``) and the updates' epochs: each pass runs the trunk
    over every prompt and completion token of every row (TRL samples each row's prompt on its own)
    and the LM head at the completion tokens."""

    def __init__(self, path: Path, *, updates_per_step: int, rows_per_step: int, epochs: int, flops: TokenFlops):
        self.path, self.updates, self.rows, self.epochs = path, updates_per_step, rows_per_step, epochs
        self.flops = flops
        self.generated = 0.0
        self.wall = 0.0
        self.last = time.perf_counter()

    def restart_clock(self) -> None:
        self.last = time.perf_counter()

    def exclude(self, seconds: float) -> None:
        """Leave ``seconds`` (a checkpoint's save) out of the step's time."""
        self.last += seconds

    def line(self, global_step: int, logs: dict[str, float]) -> dict[str, float] | None:
        if "reward" not in logs:  # the end-of-training summary, not a step
            return None
        now = time.perf_counter()
        step_s, self.last = now - self.last, now
        self.wall += step_s
        out: dict[str, float] = {"step": global_step // self.updates}
        out |= {name: float(logs[key]) for key, name in METRIC_NAMES.items() if logs.get(key) is not None}
        self.generated += float(logs.get("completions/mean_length", 0.0)) * self.rows
        out["time/step_s"] = step_s
        out["compute/generated_tokens"] = self.generated
        sampled = float(logs.get("num_tokens", 0.0))  # prompt and completion tokens of every row so far
        out["compute/trained_tokens"] = sampled * self.epochs
        out["compute/flops"] = sampled * self.flops.context + self.generated * self.flops.completion
        out["compute/wall_s"] = self.wall
        return out

    def write(self, line: dict[str, float]) -> None:
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")


def _callbacks(trial: dict[str, Any], metrics: HarnessMetrics, tokenizer, *, updates_per_step: int, steps: int):
    from transformers import TrainerCallback

    eval_every = int(trial["train"].get("eval_every") or 0)
    checkpoints = Path(trial.get("checkpoints_dir") or Path(trial["output_dir"]) / "checkpoints")

    class Relay(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            metrics.restart_clock()

        def on_log(self, args, state, control, logs=None, **kwargs):
            line = metrics.line(state.global_step, logs or {})
            if line is not None:
                metrics.write(line)

        def on_step_end(self, args, state, control, model=None, **kwargs):
            step, rest = divmod(state.global_step, updates_per_step)
            if eval_every and not rest and step % eval_every == 0 and step < steps:
                started = time.perf_counter()
                folder = checkpoints / f"step-{step}"
                model.save_pretrained(folder)
                tokenizer.save_pretrained(folder)
                metrics.exclude(time.perf_counter() - started)  # saving is not training compute

    return [Relay()]


@dataclass(frozen=True)
class TokenFlops:
    """The FLOPs of a sampled row's tokens in all of TRL's passes over them (sampling, no-grad
    passes, the updates' epochs): of each prompt or completion token through the trunk, and
    more of each completion token through the LM head."""

    context: float
    completion: float


def token_flops(size, *, no_grad_passes: int, epochs: int) -> TokenFlops:
    """``TokenFlops`` of a model of ``size`` (``harness.engine.compute.ModelSize``; TRL keeps the
    head's logits for the backward pass, so they are not recomputed)."""
    from harness.engine.compute import PassTokens, StepTokens, step_flops

    size = replace(size, head_recomputed=False)

    def per_token(one: PassTokens) -> float:
        return float(step_flops(StepTokens(sampled=one, forward=one * no_grad_passes, updated=one * epochs), size))

    return TokenFlops(context=per_token(PassTokens(trunk=1.0)), completion=per_token(PassTokens(head=1.0)))


def _harness_metrics(trial: dict[str, Any], trl_plan, algorithm, model) -> HarnessMetrics:
    """The writer of ``metrics_file`` (emptied: a retried attempt starts its curve again), with the
    FLOPs of the tokens TRL samples as the builtin trainer would count TRL's passes over them."""
    from harness.engine.compute import model_size

    path = Path(trial.get("metrics_file") or Path(trial["output_dir"]) / "metrics.jsonl")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    size = model_size(model, checkpointed=bool(trl_plan.kwargs["gradient_checkpointing"]))
    passes = no_grad_passes(trl_plan.trainer, trl_plan.kwargs)
    return HarnessMetrics(
        path,
        updates_per_step=algorithm.minibatches * algorithm.epochs,
        rows_per_step=trial["train"]["prompts_per_step"] * algorithm.group_size,
        epochs=algorithm.epochs,
        flops=token_flops(size, no_grad_passes=passes, epochs=algorithm.epochs),
    )


def run(trial_path: str | Path) -> Path:
    """Train as the trial file says; returns the final checkpoint's folder."""
    trial = read_trial(trial_path)
    algorithm = TypeAdapter(AlgorithmConfig).validate_python(trial["algorithm"])
    model_config = ModelConfig.model_validate({k: v for k, v in trial["model"].items() if k != "start"})
    task_config = TaskConfig.model_validate(trial["task"])
    if task_config.tools:
        raise ConfigError("task.tools: the TRL adapter trains single-turn completions; use the builtin trainer")

    import torch

    if trial["train"].get("threads"):
        torch.set_num_threads(int(trial["train"]["threads"]))
    on_gpu = bool(trial.get("devices")) and torch.cuda.is_available()
    trl_plan = plan(trial, algorithm, on_gpu=on_gpu)
    for note in trl_plan.notes:
        say(note, prefix="[trl]")

    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer, RLOOConfig, RLOOTrainer

    from harness.engine.models import load_pretrained
    from harness.engine.tasks import build_task

    task = build_task(task_config)
    lm = load_pretrained(trial["model"]["start"], model_config, adapter_seed=int(trial["seed"]))
    rows = training_rows(trial, task, lm.tokenizer, lm.use_chat_template)
    config_type, trainer_type = {"grpo": (GRPOConfig, GRPOTrainer), "rloo": (RLOOConfig, RLOOTrainer)}[trl_plan.trainer]
    try:
        args = config_type(**trl_plan.kwargs)
    except TypeError as err:  # a trainer.vllm key TRL does not have
        raise ConfigError(f"TRL {config_type.__name__}: {one_line(err)}; check trainer.vllm's keys") from None
    updates = algorithm.minibatches * algorithm.epochs
    metrics = _harness_metrics(trial, trl_plan, algorithm, lm.model)
    trainer = trainer_type(
        model=lm.model,
        reward_funcs=task_reward(task),
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=lm.tokenizer,
        callbacks=_callbacks(trial, metrics, lm.tokenizer, updates_per_step=updates, steps=trial["train"]["steps"]),
    )
    trainer.train()
    final = Path(trial["checkpoint_dir"])
    trainer.model.save_pretrained(final)
    lm.tokenizer.save_pretrained(final)
    return final


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        error("usage: python -m harness.trainers.trl_adapter TRIAL_FILE")
        return 2
    try:
        run(argv[0])
    except HarnessError as err:
        error(squeeze(str(err)))
        return 2
    except Exception as err:  # noqa: BLE001 - the contract: any failure is one line and a non-zero exit
        error(one_line(err))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
