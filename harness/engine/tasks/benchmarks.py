"""A study's held-out benchmarks as tasks: each one's held-out prompts, none it trained on.

``benchmark_task(config, study_task)`` builds the benchmark's task (``BenchmarkConfig.task``),
keeps its held-out split only, and leaves out every prompt that is also one of the study's
training prompts, so a benchmark (an in-distribution one above all) never scores a prompt the
policy trained on. The result is the same in every trial of a study, so every arm and seed is
scored on the same prompts. Its ``alphabet`` is the study task's: the testbed model's tokenizer
covers that one, so a benchmark with other characters is refused like a task would be.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from harness.engine.tasks import build_task
from harness.engine.tasks.base import Task
from harness.errors import ConfigError

if TYPE_CHECKING:
    from harness.engine.spec import BenchmarkConfig


def benchmark_task(config: BenchmarkConfig, study_task: Task, *, cache_dir: str | None = None) -> Task:
    """The held-out prompts of benchmark ``config`` that are not training prompts of ``study_task``;
    a ``ConfigError`` naming the benchmark when its task cannot be built or has no such prompt."""
    where = f"benchmarks: {config.name}"
    try:
        task = build_task(config.task_config(), cache_dir=cache_dir)
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from None
    except (ValueError, OSError, KeyError) as err:
        raise ConfigError(f"{where}: {' '.join(str(err).split())}") from None
    trained = {item.prompt for item in study_task.train}
    held_out = tuple(item for item in task.eval if item.prompt not in trained)
    if not held_out:
        raise ConfigError(
            f"{where}: all {len(task.eval)} of its held-out prompts are training prompts of the study's task; "
            "give it another task or other sizes"
        )
    return replace(task, name=config.name, train=(), eval=held_out, alphabet=study_task.alphabet)
