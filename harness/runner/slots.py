"""Where workers run: one slot per GPU (or ``--workers`` slots sharing them), else CPU slots that
split the cores; each slot's environment pins its device and thread count."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field

from harness.runner.child import THREADS_ENV

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", THREADS_ENV)


@dataclass
class Slot:
    """Where one worker runs: its name, its device, and the environment that pins it there."""

    name: str
    device: str
    env: dict[str, str] = field(default_factory=dict)
    threads: int = 1


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def visible_gpus() -> list[str]:
    """GPU ids this machine may use: ``CUDA_VISIBLE_DEVICES`` if set, else ``nvidia-smi -L``.

    Asks no CUDA library, so the runner stays light and never initialises a GPU itself.
    """
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        ids = [part.strip() for part in env.split(",") if part.strip()]
        return [] if not ids or ids[0] == "-1" else ids
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(out.stdout.splitlines()) if line.startswith("GPU ")]


def plan_slots(
    workers: int | None = None, *, gpus: list[str] | None = None, cores: int | None = None, gpus_per_trial: int = 1
) -> list[Slot]:
    """One worker per GPU when there are GPUs (``workers`` > GPUs shares them round-robin),
    else ``workers`` CPU workers (default 1) that split the cores evenly.

    ``gpus_per_trial`` > 1 (a study's ``resources.gpus``) groups the GPUs: each worker gets its own
    set of that many (``CUDA_VISIBLE_DEVICES=0,1``), one worker per set; GPUs left over are idle."""
    gpus = visible_gpus() if gpus is None else gpus
    cores = usable_cores() if cores is None else cores
    if workers is not None and workers < 1:
        raise ValueError("--workers must be at least 1")
    if gpus:
        per = max(1, gpus_per_trial)
        sets = [gpus[i : i + per] for i in range(0, len(gpus) - per + 1, per)]
        n = workers or len(sets)
        threads = max(1, cores // n)
        return [
            Slot(
                name=f"gpu{'+'.join(sets[i % len(sets)])}" + (f".{i // len(sets)}" if n > len(sets) else ""),
                device=f"cuda:{','.join(sets[i % len(sets)])}",
                env={"CUDA_VISIBLE_DEVICES": ",".join(sets[i % len(sets)]), **{v: str(threads) for v in THREAD_VARS}},
                threads=threads,
            )
            for i in range(n)
        ]
    n = workers or 1
    threads = max(1, cores // n)
    return [
        Slot(name=f"cpu{i}", device="cpu", env={v: str(threads) for v in THREAD_VARS}, threads=threads)
        for i in range(n)
    ]
