"""A study whose every trial evaluates the primary metric at 11 points on a saturating curve.

Three conditions x ``seeds`` seeds, seed-matched: ``grpo`` (control), ``high`` (a ceiling 0.15
higher, the same midpoint) and ``fast`` (the control's ceiling, reached with a third of the
compute). Each step costs ``TOKENS_PER_STEP`` tokens (``compute/generated_tokens`` is cumulative, 0 at the
start evaluation); per seed a shift of the ceiling (sd ``seed_sd``) and per point noise (sd
``point_sd``) are drawn from a fixed generator.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from harness.stats import saturating_curve

PRIMARY = "eval/accuracy"
AXIS = "compute/generated_tokens"
R0 = 0.4
TRUE = {"grpo": (0.70, 1.5, 3000.0), "high": (0.85, 1.5, 3000.0), "fast": (0.70, 1.5, 1000.0)}
TOKENS_PER_STEP = 1000.0
STEPS = 10


@dataclass
class FakeResults:
    trials: pd.DataFrame
    curves: pd.DataFrame
    meta: dict = field(default_factory=dict)
    prompts: pd.DataFrame | None = None


def make_scaling_results(
    seeds=(0, 1, 2, 3, 4),
    *,
    seed_sd: float = 0.01,
    point_sd: float = 0.005,
    evaluations: int = STEPS + 1,
    true: dict | None = None,
    prompts: int = 0,
    **meta,
) -> FakeResults:
    """``true``: condition -> (A, B, C_mid), replacing ``TRUE``; ``prompts``: score each
    evaluation on that many prompts (each with its own ceiling shift, sd 0.05, shared by the
    arms; the metric is their mean); ``meta``: keys added to the meta."""
    true = TRUE if true is None else true
    rng = np.random.default_rng(7)
    prompt_shift = rng.normal(0, 0.05, prompts)
    trials, curves, prompt_rows = [], [], []
    eval_steps = np.unique(np.linspace(0, STEPS, evaluations).round().astype(int))
    for cond, (a, b, c_mid) in true.items():
        for seed in seeds:
            tid = f"{cond}-s{seed}"
            shift = rng.normal(0, seed_sd)
            compute = eval_steps * TOKENS_PER_STEP
            score = saturating_curve(compute, R0, a + shift, b, c_mid) + rng.normal(0, point_sd, compute.size)
            score[0] = R0
            if prompts:
                table = saturating_curve(compute[:, None], R0, a + shift + prompt_shift[None, :], b, c_mid)
                table += rng.normal(0, point_sd, table.shape)
                score = table.mean(axis=1)
                prompt_rows += [
                    (tid, cond, seed, int(step), f"p{j:02d}", PRIMARY, float(table[i, j]))
                    for i, step in enumerate(eval_steps)
                    for j in range(prompts)
                ]
            for step, x, y in zip(eval_steps, compute, score):
                curves.append((tid, cond, seed, int(step), PRIMARY, float(y)))
                curves.append((tid, cond, seed, int(step), AXIS, float(x)))
            trials.append(
                {"trial_id": tid, "arm": cond, "seed": seed, "status": "completed", "error": None, PRIMARY: score[-1]}
            )
    base = {
        "study": "scaling",
        "primary_metric": PRIMARY,
        "direction": "maximize",
        "control": "grpo",
        "conditions": list(true),
        "comparisons": [(c, "grpo") for c in true if c != "grpo"],
        "seeds": list(seeds),
        "seed_matched": True,
        "min_effect": 0.05,
        "metric_ranges": {PRIMARY: (0.0, 1.0)},
        "primary_at": {"point": "final", "axis": AXIS, "budget": None},
    }
    return FakeResults(
        trials=pd.DataFrame(trials),
        curves=pd.DataFrame(curves, columns=["trial_id", "arm", "seed", "step", "metric", "value"]),
        meta=base | meta,
        prompts=pd.DataFrame(prompt_rows, columns=["trial_id", "arm", "seed", "step", "prompt_id", "metric", "value"]),
    )
