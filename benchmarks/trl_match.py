"""What the benchmarks that time our GRPO step against TRL's GRPOTrainer share (imported by
``step_breakdown.py`` and ``real_model_step.py``, which run as scripts from this folder).

TRL's GRPO step is read from its own methods: ``_generate`` (sampling), ``_calculate_rewards``
(scoring), the rest of ``_generate_and_score_completions`` (the reference pass, and the
old-log-prob pass when TRL runs one), and the rest of the step (the updates). With ``minibatches``
> 1 one RL step is that many Trainer steps (one generation, then one optimiser step per minibatch,
``steps_per_generation``), timed together. After each RL step of TRL's a callback runs one of
ours, so load drift on the machine falls on both alike.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable

import torch

TRL_METHODS = ("_generate", "_calculate_rewards", "_generate_and_score_completions")


def suppress_eos(model, eos_id: int) -> None:
    """Give the LM head a frozen bias of -1e4 on EOS (the tied weight is kept), so no completion
    ends before the budget, in sampling and in every log-prob pass alike."""
    head = model.get_output_embeddings()
    biased = torch.nn.Linear(head.in_features, head.out_features, bias=True)
    biased.weight = head.weight
    with torch.no_grad():
        biased.bias.zero_()
        biased.bias[eos_id] = -1e4
    biased.bias.requires_grad_(False)
    model.set_output_embeddings(biased)


class PhaseClock:
    """Time spent in named methods of one object, per step."""

    def __init__(self, owner, names: tuple[str, ...]):
        self.spent = dict.fromkeys(names, 0.0)
        for name in names:
            setattr(owner, name, self._timed(name, getattr(owner, name)))

    def _timed(self, name, method):
        def timed(*args, **kwargs):
            clock = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.spent[name] += time.perf_counter() - clock

        return timed

    def take(self) -> dict[str, float]:
        spent, self.spent = self.spent, dict.fromkeys(self.spent, 0.0)
        return spent


def grpo_config(*, rows: int, group: int, new_tokens: int, rl_steps: int, minibatches: int, lr: float, kl_coef: float):
    """TRL's ``GRPOConfig`` for ``rl_steps`` of our GRPO step on ``rows`` completions (``group``
    per prompt): fp32, no gradient checkpointing, one generation per RL step split into
    ``minibatches`` optimiser steps, one epoch, the GRPO loss (group-normalised advantages,
    per-sequence token mean, k3 KL in the loss), temperature 1 with no top-k/top-p, fused
    AdamW with no weight decay and clipping at 1.0, no logging or saving."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="bench-trl-"),
        per_device_train_batch_size=rows // minibatches,
        gradient_accumulation_steps=1,
        steps_per_generation=minibatches,
        num_iterations=1,
        num_generations=group,
        max_completion_length=new_tokens,
        max_steps=rl_steps * minibatches,
        beta=kl_coef,
        loss_type="grpo",
        scale_rewards="group",
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        learning_rate=lr,
        weight_decay=0.0,
        max_grad_norm=1.0,
        optim="adamw_torch_fused",
        bf16=False,
        fp16=False,
        gradient_checkpointing=False,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        log_level="error",
        disable_tqdm=True,
        shuffle_dataset=False,
        seed=0,
    )


def interleave(trainer, minibatches: int, after: Callable[[int, dict[str, float]], None]) -> None:
    """Time each RL step of ``trainer`` (``minibatches`` Trainer steps) by phase and call
    ``after(index, phases)`` at its end, where the caller runs one of its own steps; ``phases``
    has ``generate``, ``score``, ``reference``, ``update`` and ``step`` seconds."""
    from transformers import TrainerCallback

    clock = PhaseClock(trainer, TRL_METHODS)

    class Interleave(TrainerCallback):
        def __init__(self):
            self.trainer_steps, self.started = 0, 0.0

        def on_step_begin(self, *args, **kwargs):
            if self.trainer_steps % minibatches == 0:
                clock.take()
                self.started = time.perf_counter()

        def on_step_end(self, *args, **kwargs):
            self.trainer_steps += 1
            if self.trainer_steps % minibatches:
                return
            whole = time.perf_counter() - self.started
            spent = clock.take()
            inner = spent["_generate_and_score_completions"]
            phases = {
                "generate": spent["_generate"],
                "score": spent["_calculate_rewards"],
                "reference": inner - spent["_generate"] - spent["_calculate_rewards"],
                "update": whole - inner,
                "step": whole,
            }
            after(self.trainer_steps // minibatches - 1, phases)

    trainer.add_callback(Interleave())


def quiet(trainer) -> None:
    """Drop the Trainer's printer, whose dict of training metrics would land among the timings."""
    from transformers import PrinterCallback

    trainer.remove_callback(PrinterCallback)
