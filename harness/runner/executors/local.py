"""The local executor: this machine's worker pool (:mod:`harness.runner.pool`), with each worker
given as many GPUs of its own as the study's trials ask for (``resources.gpus``)."""

from __future__ import annotations

from harness.errors import ConfigError
from harness.runner.executors.base import too_many_gpus
from harness.runner.options import RunOptions
from harness.runner.slots import Slot, plan_slots, visible_gpus


def local_slots(study, opts: RunOptions) -> list[Slot]:
    """The pool's slots: one per GPU set of ``max(resources.gpus)`` GPUs (a trial asking for more
    GPUs than this machine shows is a ``ConfigError``), else CPU workers as before."""
    needs = {arm.name: study.resources_of(arm.name) for arm in study.arms}
    per_trial = max((r.gpus or 0 for r in needs.values()), default=0)
    gpus = visible_gpus() if opts.gpus is None else opts.gpus
    if per_trial:
        error = too_many_gpus(needs, len(gpus), "this machine (its visible GPUs, CUDA_VISIBLE_DEVICES)")
        if error:
            raise ConfigError(error)
    return plan_slots(opts.workers, gpus=gpus, gpus_per_trial=max(per_trial, 1))
