"""What the benchmarks that time one step of a stored study share (imported by
``real_model_step.py`` and ``vllm_backend.py``, which run as scripts from this folder): the trial
spec of a study's arm at the benchmark's shape."""

from __future__ import annotations

from harness.engine.spec import TrialSpec
from harness.study.expand import condition_spec
from harness.study.load import load_study


def trial_spec(args, **train) -> TrialSpec:
    """The study's control arm (or ``--arm``) at its first seed, at the benchmark's shape:
    ``--prompts``, ``--tokens``, ``--threads`` and ``--cache-dir`` where given, and the ``train``
    fields a benchmark sets beside them (None or 0 keeps the study's)."""
    study = load_study(args.study)
    spec = condition_spec(study, args.arm or study.control, study.seeds[0])
    shape = {"prompts_per_step": args.prompts, "max_new_tokens": args.tokens, "threads": args.threads, **train}
    update = {key: value or getattr(spec.train, key) for key, value in shape.items()}
    return spec.model_copy(
        update={"train": spec.train.model_copy(update=update), "cache_dir": args.cache_dir or spec.cache_dir}
    )
