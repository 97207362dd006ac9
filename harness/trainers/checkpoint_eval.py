"""The one judge: every arm's checkpoints scored by the engine's own evaluator on the study's
held-out prompts and benchmarks, with the same decoding, as a builtin trial scores its policy."""

from __future__ import annotations

from pathlib import Path

from harness.engine.evaluation import evaluate
from harness.engine.models import LoadedModel
from harness.engine.spec import PromptScores, TrainConfig, TrialSpec
from harness.engine.tasks.base import Task
from harness.engine.trial import evaluate_benchmarks
from harness.trainers.checkpoints import Reader, load_checkpoint, periodic_checkpoints


def judged_scores(lm: LoadedModel, task: Task, benchmarks: dict[str, Task], train: TrainConfig, step: int) -> list:
    """The task's per-prompt scores at ``step``, then each benchmark's."""
    return [evaluate(lm, task, train, step), *evaluate_benchmarks(evaluate, lm, benchmarks, train, step)]


def curve_checkpoints(spec: TrialSpec, document: dict) -> dict[int, Path]:
    """The checkpoints the judge scores, by step: the final one at ``train.steps`` and, when
    ``train.eval_every`` asks for a curve, the program's ``step-<N>`` ones at its multiples."""
    every, last = spec.train.eval_every, spec.train.steps
    periodic = periodic_checkpoints(Path(document["checkpoints_dir"]), last) if every else {}
    return {
        **{step: path for step, path in periodic.items() if step % every == 0},
        last: Path(document["checkpoint_dir"]),
    }


def judge_checkpoints(
    spec: TrialSpec, reader: Reader, document: dict, task: Task, benchmarks: dict[str, Task]
) -> list[PromptScores]:
    """Every checkpoint's scores, in step order, one checkpoint in memory at a time; the final
    one is scored first, so a program that wrote none (or a broken one) fails before any periodic
    one is."""
    folders = curve_checkpoints(spec, document)
    last = spec.train.steps
    order = [last, *(step for step in folders if step != last)]
    scores = [
        score
        for step in order
        for score in judged_scores(
            load_checkpoint(folders[step], reader, document["model"]["start"], spec.model),
            task,
            benchmarks,
            spec.train,
            step,
        )
    ]
    return sorted(scores, key=lambda one: one.step)  # stable: the task's first at each step
