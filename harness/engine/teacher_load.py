"""Which teacher a trial's algorithm names, loaded (``teacher.py`` has what the step reads of it)."""

from __future__ import annotations

import torch

from harness.engine.model_prepare import local_model
from harness.engine.models import LoadedModel, load_pretrained
from harness.engine.spec import TinyModelConfig, TrialSpec
from harness.engine.tasks.base import Task
from harness.engine.teacher import Teacher
from harness.engine.warmstart import load_policy
from harness.errors import ConfigError

#: the testbed teacher's size against the trial's tiny model: width and depth times this
TINY_TEACHER_SCALE = 2
#: the testbed teacher's SFT stops only at a perfect greedy validation accuracy, so it trains as far
#: as ``warmstart.steps`` allows (the policy's warm start stops at its lower target)
TINY_TEACHER_TARGET = 1.0


def tiny_teacher_spec(spec: TrialSpec) -> TrialSpec:
    """The trial spec whose warm start is the testbed teacher: the tiny model scaled up, no LoRA,
    its SFT run to ``TINY_TEACHER_TARGET`` (else the trial's warm-start settings)."""
    tiny = spec.model.tiny
    bigger = TinyModelConfig(
        hidden_size=tiny.hidden_size * TINY_TEACHER_SCALE,
        layers=tiny.layers * TINY_TEACHER_SCALE,
        heads=tiny.heads,
        intermediate_size=tiny.intermediate_size * TINY_TEACHER_SCALE,
    )
    model = spec.model.model_copy(update={"tiny": bigger, "lora": None})
    warmstart = spec.warmstart.model_copy(update={"enabled": True, "target_accuracy": TINY_TEACHER_TARGET})
    return spec.model_copy(update={"model": model, "warmstart": warmstart})


def load_teacher(spec: TrialSpec, task: Task, lm: LoadedModel) -> Teacher | None:
    """The teacher ``spec``'s algorithm names (None without ``distill``), on the policy's device."""
    cfg = spec.algorithm
    if getattr(cfg, "distill", "none") == "none":
        return None
    name = cfg.teacher_model
    if name == "tiny":
        if spec.model.name != "tiny":
            raise ConfigError(
                f"teacher_model tiny scores the built-in model's tokens, but model.name is {spec.model.name}: "
                "name a teacher that shares that model's tokenizer"
            )
        with torch.random.fork_rng():  # building it seeds torch: the trial's own draws stay as they were
            teacher_lm, info, _ = load_policy(tiny_teacher_spec(spec), task)
        metrics = {f"teacher/{key.removeprefix('warmstart/')}": value for key, value in info.items()}
    else:
        metrics = {}
        teacher_lm = load_pretrained(local_model(name, spec.cache_dir), spec.model.model_copy(update={"lora": None}))
        if teacher_lm.tokenizer.get_vocab() != lm.tokenizer.get_vocab():
            raise ConfigError(
                f"teacher_model {name} has another tokenizer than the policy {spec.model.name}: on-policy "
                "distillation scores the policy's token ids, so name a teacher of the same tokenizer family"
            )
    return Teacher(teacher_lm.model.to(lm.device), name, metrics)
