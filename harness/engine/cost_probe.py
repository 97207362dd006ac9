"""What a real model's trial costs on this machine, measured by a short probe, for ``harness plan``.

The testbed's default costs say nothing about a pretrained model: its trial is dominated by
passes through a hundred million parameters or more, and how long those take depends on the
model, its dtype and adapters, the threads and the CPU. So the plan measures them: the probe
loads the trial's policy exactly as a trial does (its task, model, LoRA, dtype, device and
threads; no warm start: the plan prices building one apart, and loading a cached one is a
fraction of loading the model), runs one step of the arm's update on up to ``PROBE_PROMPTS`` of
its prompts (sampling, the reference's pass, the updates: the study's group, budget and
minibatches) and one evaluation of up to ``PROBE_EVAL_PROMPTS`` held-out prompts (greedy and
``eval_samples`` samples each), and reports the seconds of each with the shape it ran. The
study's plan scales them to a trial's counts (``harness.study.plan``): with the same model and
prompts, the work of each phase grows with its rows (``harness.engine.compute``: 2 N FLOPs a
token forward, about 4 N with LoRA's backward).

The probe's step is the study's own batch up to ``PROBE_PROMPTS`` prompts, not a smaller one: on
a CPU, sampling a small batch is mostly per-call overhead (every decoded token runs each layer's
small matmuls once, whatever the rows), so a step of 2 prompts scaled up 4 times priced the
SmolLM2 study's generation several times too high. The machine's load average is recorded
beside the seconds: a probe measured while other work ran is slow, and the plan says so.

A result is an entry of the checked cache (``harness.ground.checked_cache``), under
``<cache_dir>/cost_probe/<key>/``: the key hashes what the seconds depend on (the model's content
and configuration, the task, the trial's shape and threads, the arm's algorithm, torch's version
and the machine: its architecture, CPU model and count), so a second ``harness plan`` reads it
without importing torch. Building the key and reading an entry are torch-free; only a probe
imports it.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import time
import warnings
from dataclasses import asdict, dataclass, fields, replace
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from harness.engine.model_source import content_key
from harness.engine.spec import TrialSpec
from harness.errors import one_line
from harness.ground.checked_cache import Unusable, get_or_build
from harness.ground.console import say, warn
from harness.ground.files import file_lock

PROBE_FOLDER = "cost_probe"  # under a trial spec's cache_dir, beside the warm starts and the models
RESULT_FILE = "result.json"
PROBE_PROMPTS = 8  # at most this many prompts in the probe's step, each with the arm's group of samples
PROBE_EVAL_PROMPTS = 32  # at most this many held-out prompts in the probe's evaluation
PROBE_VERSION = 1  # raised when what the probe measures changes: every kept result is probed again


class CostProbeWarning(UserWarning):
    """A kept probe result failed its checks and is being probed again."""


@dataclass(frozen=True)
class CostProbe:
    """What the probe measured, and the shape it measured it at."""

    model: str  # model.name as the study gives it
    parameters: int  # the policy's matmul parameters (``harness.engine.compute.model_size``)
    load_s: float  # the task built and the policy loaded, as a trial starts
    step_rows: int  # the probe step's sampled rows (prompts x group)
    row_tokens: int  # a row's token budget (max_new_tokens, times max_turns for tool episodes)
    sample_s: float  # the step but its updates: sampling, scoring, the reference's and other no-grad passes
    update_s: float  # the step's updates, all ``epochs`` of them
    epochs: int
    eval_prompts: int  # held-out prompts of the probe's evaluation
    eval_samples: int  # sampled completions per prompt, besides the greedy one
    eval_s: float
    probe_s: float  # the probe as a whole, loading included
    load_average: float  # the machine's 1-minute load average as the probe started (other work: a slower probe)
    cpus: int
    cached: bool = False  # read from the cache (not measured by this call)


def probe_costs(spec: TrialSpec, *, again: bool = False) -> CostProbe:
    """The cost probe of ``spec``'s trial, from the cache when it holds it, else measured now
    (and kept); ``again``: measured now whatever the cache holds (a probe taken on a busy
    machine). A probe that cannot be kept is measured anyway."""
    key = probe_key(spec)
    folder = Path(spec.cache_dir) / PROBE_FOLDER / key
    lock = folder.with_name(folder.name + ".lock")
    if again and folder.exists():
        with file_lock(lock):
            shutil.rmtree(folder)

    def probing_again(problem: str) -> None:
        warnings.warn(f"cost probe cache {folder}: {problem}; probing again", CostProbeWarning, stacklevel=4)

    measured: list[CostProbe] = []

    def measure() -> CostProbe:
        measured.append(_measure(spec))
        return measured[-1]

    try:
        entry = get_or_build(
            folder, key_fields={"key": key}, work=measure, save=_save, load=_load, on_unusable=probing_again
        )
    except OSError:  # the cache cannot be written here: the result is not kept
        return measured[-1] if measured else measure()
    return replace(entry.value, cached=entry.cached)


def probe_key(spec: TrialSpec) -> str:
    """What a probe's seconds depend on, hashed: torch-free (the model by its content's hash)."""
    train = spec.train.model_dump(mode="json", exclude={"steps", "eval_every", "max_eval_prompts"})
    payload = {
        "version": PROBE_VERSION,
        "model": {**spec.model.model_dump(mode="json"), "name": content_key(spec.model.name)},
        "task": spec.task.model_dump(mode="json"),
        "train": train,
        "algorithm": spec.algorithm.model_dump(mode="json"),
        "machine": _machine(),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


@cache
def _machine() -> dict[str, Any]:
    """What makes this machine's seconds its own: torch's version, the architecture, the CPU."""
    return {
        "torch": metadata.version("torch"),
        "arch": platform.machine(),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _probe_spec(spec: TrialSpec) -> TrialSpec:
    """``spec`` at the probe's shape: ``PROBE_PROMPTS`` prompts a step, ``PROBE_EVAL_PROMPTS``
    held-out prompts, no warm start."""
    train = spec.train.model_copy(
        update={
            "prompts_per_step": min(PROBE_PROMPTS, spec.train.prompts_per_step),
            "max_eval_prompts": min(PROBE_EVAL_PROMPTS, spec.train.max_eval_prompts or PROBE_EVAL_PROMPTS),
        }
    )
    return spec.model_copy(update={"train": train, "warmstart": spec.warmstart.model_copy(update={"enabled": False})})


def _measure(spec: TrialSpec) -> CostProbe:
    """One trial's start, one step and one evaluation at the probe's shape, each timed."""
    from harness.engine.compute import model_size
    from harness.engine.evaluation import evaluate
    from harness.engine.model_prepare import local_model
    from harness.engine.trial import STEPS, make_learner, start_policy

    probe = _probe_spec(spec)
    local_model(spec.model.name, spec.cache_dir)  # a GGUF source converted once: not a trial's cost
    say(f"plan: probing the costs of {spec.model.name} on this machine (one step and one evaluation, cached after)")
    load_average, cpus = os.getloadavg()[0], os.cpu_count() or 1
    if load_average > cpus:  # threads that wait for a core: each pass takes many times its own time
        warn(
            f"plan: the machine is busy (load average {load_average:.1f} on {cpus} CPUs): the probe measures "
            "that work too and takes longer; --no-probe skips it"
        )
    began = time.perf_counter()
    task, lm, _, _ = start_policy(probe)
    learner = make_learner(probe, lm, task)
    loaded = time.perf_counter()
    items = list(task.train[: probe.train.prompts_per_step])
    metrics = STEPS[probe.algorithm.kind](learner, task, items)
    stepped = time.perf_counter()
    held_out = evaluate(lm, task, probe.train, step=0)
    done = time.perf_counter()
    update_s = metrics.get("time/update_s", 0.0)
    return CostProbe(
        model=spec.model.name,
        parameters=model_size(lm.model).matmul,
        load_s=loaded - began,
        step_rows=len(items) * probe.algorithm.group_size,
        row_tokens=probe.train.max_new_tokens * (probe.task.max_turns if probe.task.tools else 1),
        sample_s=stepped - loaded - update_s,
        update_s=update_s,
        epochs=probe.algorithm.epochs,
        eval_prompts=len(held_out.prompt_ids),
        eval_samples=probe.train.eval_samples,
        eval_s=done - stepped,
        probe_s=done - began,
        load_average=load_average,
        cpus=cpus,
    )


def _save(folder: Path, result: CostProbe) -> tuple[dict[str, Any], CostProbe]:
    (folder / RESULT_FILE).write_text(json.dumps(asdict(result)))
    return {}, result


def _load(folder: Path, manifest: dict[str, Any]) -> CostProbe:
    try:
        kept = json.loads((folder / RESULT_FILE).read_text())
        return CostProbe(**{f.name: kept[f.name] for f in fields(CostProbe)})
    except (OSError, ValueError, TypeError, KeyError) as err:
        raise Unusable(f"{RESULT_FILE} is unreadable ({one_line(err, limit=300)})") from err
