"""Our GRPO step against TRL's GRPOTrainer on identical work, interleaved step by step.

Both trainers get the same model weights, prompts, group size and completion budget, and do the
same work per batch; each setting that had to be matched is listed in ``MATCHED``. The two are
interleaved in one process: after each TRL step (timed between the Trainer's ``on_step_begin``
and ``on_step_end``) one of our steps runs, so load drift on the machine falls on both alike.
EOS is suppressed in both (a -1e4 bias on its logit), so every completion runs to the budget and
"new tokens" means what it says.

Prints, for every cell of a grid of {new tokens} x {model} x {group}, per-phase medians of both
and the ratio of median step times. Target: ours / TRL <= 0.6 in every cell. TRL's phases are
read from its own methods (``_generate``, ``_calculate_rewards``; the reference pass is the rest
of ``_generate_and_score_completions``; the update is the rest of the step).

    pip install trl   # not a dependency of harness
    python benchmarks/step_breakdown.py [--steps 6] [--warmup 2] [--threads 2]
        [--tokens 8 32 128] [--models 2x64 4x256] [--groups 8 16]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import torch
from trl_match import grpo_config, interleave, quiet, suppress_eos

from harness.algorithms import resolve_algorithm
from harness.engine.learner import Learner, make_optimizer
from harness.engine.models import LoadedModel, build_tiny_model, char_tokenizer
from harness.engine.reference import Reference
from harness.engine.rl_step import rl_step
from harness.engine.spec import ModelConfig, TinyModelConfig, TrainConfig
from harness.engine.task_config import TaskConfig
from harness.engine.tasks import build_task

PROMPTS, KL_COEF, LR = 8, 0.04, 1e-5
PHASES = ("generate", "score", "reference", "update")
MATCHED = (
    "dtype float32 in both (TRL: bf16=False, the policy and its reference loaded in float32)",
    "no gradient checkpointing in either (TRL: gradient_checkpointing=False)",
    "one rollout, one reference pass, no old-log-prob pass (ours: fp32 needs none; TRL: "
    "num_iterations=1, steps_per_generation=1), one forward+backward and one AdamW step per batch",
    "fused AdamW in both, lr 1e-5, no weight decay, gradient clipping at 1.0",
    "GRPO loss: group-normalised advantages, per-sequence token mean, k3 KL in the loss at 0.04",
    "sampling: temperature 1, no top-k/top-p/repetition penalty, KV cache, EOS suppressed",
    "a separate frozen reference model in both (no LoRA)",
)


@dataclass
class Cell:
    new_tokens: int
    layers: int
    width: int
    group: int
    ours: list[dict[str, float]] = field(default_factory=list)
    trl: list[dict[str, float]] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.new_tokens:>4} tok  {self.layers}x{self.width:<4} G={self.group:<3}"


def _parse_model(text: str) -> tuple[int, int]:
    layers, width = text.lower().split("x")
    return int(layers), int(width)


def _model_folder(task, layers: int, width: int) -> str:
    folder = tempfile.mkdtemp(prefix="bench-model-")
    tokenizer = char_tokenizer(task.alphabet)
    tiny = TinyModelConfig(hidden_size=width, layers=layers, heads=4, intermediate_size=2 * width)
    build_tiny_model(ModelConfig(tiny=tiny), len(tokenizer), tokenizer, seed=0).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _our_stepper(folder: str, cell: Cell):
    """One of our GRPO steps per call, on its own batch of prompts; returns its timings."""
    from harness.engine.models import load_pretrained

    lm: LoadedModel = load_pretrained(folder, ModelConfig(name=folder, device="cpu", dtype="float32"))
    suppress_eos(lm.model, lm.tokenizer.eos_token_id)
    algorithm = resolve_algorithm("grpo", {"minibatches": 1, "kl_coef": KL_COEF, "group_size": cell.group, "lr": LR})
    learner = Learner(
        lm=lm,
        reference=Reference(lm.model),
        critic=None,
        optimizer=make_optimizer([{"params": list(lm.model.parameters()), "lr": LR}], lm.device),
        algorithm=algorithm,
        train=TrainConfig(prompts_per_step=PROMPTS, max_new_tokens=cell.new_tokens),
        generator=torch.Generator().manual_seed(0),
    )

    def step(task, items) -> dict[str, float]:
        clock = time.perf_counter()
        metrics = rl_step(learner, task, items)
        total = time.perf_counter() - clock
        assert metrics["train/completion_len"] == cell.new_tokens, "EOS was not suppressed"
        return {**{phase: metrics[f"time/{phase}_s"] for phase in PHASES}, "step": total}

    return step


def run_cell(cell: Cell, task, steps: int, warmup: int) -> None:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import GRPOTrainer

    folder = _model_folder(task, cell.layers, cell.width)
    ours = _our_stepper(folder, cell)
    total = steps + warmup
    items = list(task.train[: PROMPTS * total])
    by_prompt = {item.prompt: item for item in items}

    def reward(prompts, completions, **_):
        return [task.reward(by_prompt[p], c) for p, c in zip(prompts, completions)]

    def after(step: int, trl_row: dict[str, float]) -> None:
        ours_row = ours(task, items[step * PROMPTS : (step + 1) * PROMPTS])
        if step >= warmup:
            cell.trl.append(trl_row)
            cell.ours.append(ours_row)

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    config = grpo_config(
        rows=PROMPTS * cell.group,
        group=cell.group,
        new_tokens=cell.new_tokens,
        rl_steps=total,
        minibatches=1,
        lr=LR,
        kl_coef=KL_COEF,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=config,
        train_dataset=Dataset.from_list([{"prompt": item.prompt} for item in items]),
    )
    eos = trainer.processing_class.eos_token_id
    suppress_eos(trainer.model, eos)
    suppress_eos(trainer.ref_model, eos)
    quiet(trainer)
    interleave(trainer, 1, after)
    trainer.train()


def _median(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(row[key] for row in rows)


def print_cell(cell: Cell) -> float:
    print(f"\n{cell.label}  (median of {len(cell.ours)} interleaved steps)")
    print(f"  {'phase':<12}{'ours s':>10}{'trl s':>10}{'ratio':>8}")
    for key in (*PHASES, "step"):
        mine, theirs = _median(cell.ours, key), _median(cell.trl, key)
        print(f"  {key:<12}{mine:>10.4f}{theirs:>10.4f}{mine / theirs:>8.2f}")
    return _median(cell.ours, "step") / _median(cell.trl, "step")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6, help="timed steps per cell")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tokens", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--models", nargs="+", default=["2x64", "4x256"], help="LAYERSxWIDTH")
    parser.add_argument("--groups", type=int, nargs="+", default=[8, 16])
    args = parser.parse_args()
    try:
        import trl
    except ImportError:
        raise SystemExit("trl is not installed: `pip install trl` to compare with TRL's GRPOTrainer") from None
    torch.set_num_threads(args.threads)
    # dense partial credit, so a freshly initialised model's groups are mixed and both trainers
    # really update (with 0/1 rewards every group is degenerate and the update is trivial)
    task = build_task(TaskConfig(reward="partial_match"))
    print(
        f"ours vs trl {trl.__version__} GRPOTrainer, torch {torch.__version__}, {args.threads} threads, "
        f"{PROMPTS} prompts per step, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print("matched:")
    for line in MATCHED:
        print(f"  - {line}")
    cells = [
        Cell(tokens, *_parse_model(model), group)
        for tokens in args.tokens
        for model in args.models
        for group in args.groups
    ]
    ratios = []
    for cell in cells:
        run_cell(cell, task, args.steps, args.warmup)
        ratios.append(print_cell(cell))
    print(f"\n{'cell':<26}{'ours s':>9}{'trl s':>9}{'ratio':>8}")
    for cell, ratio in zip(cells, ratios):
        print(f"{cell.label:<26}{_median(cell.ours, 'step'):>9.3f}{_median(cell.trl, 'step'):>9.3f}{ratio:>8.2f}")
    worst = max(ratios)
    print(
        f"worst ratio ours / trl: {worst:.2f} (target <= 0.60: {'met' if worst <= 0.6 else 'NOT met'}); "
        f"load average at the end {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
