"""Where one RL step's time goes, and how it compares with TRL's GRPOTrainer.

Prints medians (over timed steps after warm-up) of generation, scoring, reference/old log-prob
recomputation and the update, for our GRPO step on the tiny testbed model. When ``trl`` is
installed (it is not a dependency), it trains TRL's GRPOTrainer on the identical model folder,
prompts, group size, completion length and KL setting in the same run, and prints the ratio of
median step times side by side. Target: ours <= 0.5 x TRL at 8 prompts x 8 samples x 8 tokens.

    python benchmarks/step_breakdown.py [--steps 12] [--warmup 2] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import torch  # noqa: E402

from harness.algorithms import resolve_algorithm  # noqa: E402
from harness.engine.learner import Learner  # noqa: E402
from harness.engine.models import LoadedModel, build_tiny_model, char_tokenizer  # noqa: E402
from harness.engine.reference import Reference  # noqa: E402
from harness.engine.rl_step import rl_step  # noqa: E402
from harness.engine.spec import ModelConfig, TaskConfig, TrainConfig  # noqa: E402
from harness.engine.tasks import build_task  # noqa: E402

PROMPTS, GROUP, NEW_TOKENS, KL_COEF = 8, 8, 8, 0.04
PHASES = ("time/generate_s", "time/score_s", "time/reference_s", "time/update_s")


def _model_folder(task) -> str:
    folder = tempfile.mkdtemp(prefix="bench-model-")
    tokenizer = char_tokenizer(task.alphabet)
    build_tiny_model(ModelConfig(), len(tokenizer), tokenizer, seed=0).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def ours(folder: str, task, steps: int, warmup: int) -> list[dict[str, float]]:
    """Our GRPO with one optimiser step per batch (TRL's default schedule)."""
    from harness.engine.models import load_pretrained

    lm: LoadedModel = load_pretrained(folder, ModelConfig(name=folder, device="cpu"))
    algorithm = resolve_algorithm("grpo", {"minibatches": 1, "kl_coef": KL_COEF})
    train = TrainConfig(prompts_per_step=PROMPTS, max_new_tokens=NEW_TOKENS)
    learner = Learner(
        lm=lm,
        reference=Reference(lm.model),
        critic=None,
        optimizer=torch.optim.AdamW(lm.model.parameters(), lr=algorithm.lr),
        algorithm=algorithm,
        train=train,
        generator=torch.Generator().manual_seed(0),
    )
    rows = []
    for step in range(warmup + steps):
        items = list(task.train[step * PROMPTS : (step + 1) * PROMPTS])
        clock = time.perf_counter()
        metrics = rl_step(learner, items, task.reward)
        metrics["time/step_s"] = time.perf_counter() - clock
        if step >= warmup:
            rows.append(metrics)
    return rows


def trl_step_times(folder: str, task, steps: int, warmup: int) -> list[float] | None:
    try:
        from datasets import Dataset
        from transformers import TrainerCallback
        from trl import GRPOConfig, GRPOTrainer
    except ImportError:
        return None

    by_prompt = {item.prompt: item for item in task.train}

    def reward(prompts, completions, **_):
        return [task.reward(by_prompt[p], c) for p, c in zip(prompts, completions)]

    class StepClock(TrainerCallback):
        def __init__(self):
            self.times, self._start = [], None

        def on_step_begin(self, *args, **kwargs):
            self._start = time.perf_counter()

        def on_step_end(self, *args, **kwargs):
            self.times.append(time.perf_counter() - self._start)

    clock = StepClock()
    prompts = [{"prompt": item.prompt} for item in task.train[: PROMPTS * (steps + warmup)]]
    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="bench-trl-"),
        per_device_train_batch_size=PROMPTS * GROUP,
        num_generations=GROUP,
        max_completion_length=NEW_TOKENS,
        max_steps=steps + warmup,
        beta=KL_COEF,
        temperature=1.0,
        learning_rate=1e-4,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        log_level="error",
        disable_tqdm=True,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=folder,
        reward_funcs=reward,
        args=config,
        train_dataset=Dataset.from_list(prompts),
        callbacks=[clock],
    )
    trainer.train()
    return clock.times[warmup:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    # dense partial credit, so a freshly initialised model's groups are mixed and both trainers
    # really update (with 0/1 rewards every group is degenerate and the update is trivial)
    task = build_task(TaskConfig(reward="partial_match"))
    folder = _model_folder(task)

    rows = ours(folder, task, args.steps, args.warmup)
    median = {key: statistics.median(r[key] for r in rows) for key in (*PHASES, "time/step_s")}
    print(f"setting: {PROMPTS} prompts x {GROUP} samples x {NEW_TOKENS} new tokens, tiny Llama, "
          f"{args.threads} threads, median of {args.steps} steps after {args.warmup} warm-up")
    print(f"{'phase':<28}{'median s':>10}{'share':>8}")
    for key in PHASES:
        print(f"{key:<28}{median[key]:>10.4f}{median[key] / median['time/step_s']:>8.0%}")
    print(f"{'ours: whole step':<28}{median['time/step_s']:>10.4f}")

    trl_times = trl_step_times(folder, task, args.steps, args.warmup)
    if trl_times is None:
        print("trl is not installed: `pip install trl` to compare with TRL's GRPOTrainer")
        return
    trl_median = statistics.median(trl_times)
    ratio = median["time/step_s"] / trl_median
    print(f"{'trl GRPOTrainer: step':<28}{trl_median:>10.4f}")
    print(f"ratio ours / trl: {ratio:.2f} (target <= 0.50: {'met' if ratio <= 0.5 else 'NOT met'})")


if __name__ == "__main__":
    main()
