"""A hand-built ``Analysis`` with known numbers, for the figure and MLflow tests.

It follows the analysis contract (verdicts with their simultaneous interval and level,
``min_effect``, ``metric_ranges``, variance components) without running ``analyze``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.decide.analysis import Analysis
from harness.decide.frames import seed_values

METRIC = "eval/accuracy"
CONDS = ["ctrl", "up", "same", "tiny"]


def verdict_rows() -> pd.DataFrame:
    """Three comparisons vs ``ctrl``, one of each kind the forest must tell apart."""
    rows = [  # condition, verdict, diff, ci_low, ci_high, smaller_than_min_effect
        ("up", "better", 0.20, 0.12, 0.28, False),
        ("same", "equivalent", 0.004, -0.01, 0.018, False),
        ("tiny", "better", 0.01, 0.004, 0.016, True),
    ]
    return pd.DataFrame(
        [
            {
                "condition": c,
                "control": "ctrl",
                "metric": METRIC,
                "n": 3,
                "n_control": 3,
                "failed": 0,
                "failed_control": 0,
                "paired": True,
                "mean": 0.5 + d,
                "mean_control": 0.5,
                "diff": d,
                "ci_low": lo,
                "ci_high": hi,
                "ci_level": 0.9917,
                "test": "paired t",
                "p_value": 0.01,
                "p_adjusted": 0.03,
                "verdict": v,
                "smaller_than_min_effect": small,
                "seeds_needed_null": None,
                "seeds_needed_effect": 4,
                "reason": "",
            }
            for c, v, d, lo, hi, small in rows
        ]
    )


def trial_rows() -> pd.DataFrame:
    """Seeds 0-2 of every condition; ``tiny`` seed 2 failed (no value)."""
    rows = []
    for i, cond in enumerate(CONDS):
        for seed in (0, 1, 2):
            failed = cond == "tiny" and seed == 2
            rows.append(
                {
                    "trial_id": f"{cond}-s{seed}",
                    "arm": cond,
                    "seed": seed,
                    "status": "failed" if failed else "completed",
                    METRIC: np.nan if failed else 0.5 + 0.1 * i + 0.01 * seed,
                }
            )
    return pd.DataFrame(rows)


def make_analysis(**header) -> Analysis:
    h = {
        "study": "hand-built",
        "primary_metric": METRIC,
        "direction": "maximize",
        "control": "ctrl",
        "conditions": list(CONDS),
        "comparisons": [f"{c} vs ctrl" for c in CONDS[1:]],
        "seeds": [0, 1, 2],
        "seed_matched": True,
        "alpha": 0.05,
        "correction": "holm",
        "min_effect": 0.02,
        "noise_line": "training-seed sd (component) 0.01 (ctrl); MDE at 3 seeds 0.05",
        "metric_ranges": {METRIC: (0.0, 1.0)},
        "state": [],
        "description": "",
        "harness_version": "0.1.0",
        "git_commit": "abc1234",
        "report_harness_version": "0.1.0",
        "date": "2025-01-01 00:00 UTC",
        "n_trials": 12,
        "n_completed": 11,
        "n_failed": 1,
        "n_pending": 0,
        "trials_line": "11 completed, 1 failed, 0 running/waiting, 12 in all",
        "complete": False,
        **header,
    }
    conditions = pd.DataFrame(
        {
            "condition": CONDS,
            "n": [3, 3, 3, 2],
            "mean": [0.51, 0.61, 0.71, 0.805],
            "ci_low": [0.48, 0.58, 0.68, -0.4],
            "ci_high": [0.54, 0.64, 0.74, 2.0],
        }
    )
    components = pd.DataFrame(
        {
            "source": ["seed", "prompt", "eval sampling"],
            "variance": [4e-4, 5e-4, 1e-4],
            "sd": [0.02, np.sqrt(5e-4), 0.01],
            "share": [0.4, 0.5, 0.1],
            "note": ["", "", "from 4 samples per prompt"],
        }
    )
    steps = np.arange(4.0)
    curves = {
        (METRIC, "step"): pd.DataFrame(
            {  # a band that leaves [0, 1] on both sides
                "condition": "ctrl",
                "x": steps,
                "mean": [0.1, 0.4, 0.7, 0.95],
                "low": [-0.3, 0.2, 0.5, 0.8],
                "high": [0.5, 0.6, 0.9, 1.3],
                "n_seeds": 3,
            }
        )
    }
    curves[("train/kl_ref", "step")] = pd.DataFrame(
        {  # unbounded: drawn as computed
            "condition": "ctrl",
            "x": steps,
            "mean": [0.0, 3.0, 6.0, 9.0],
            "low": [-1.0, 2.0, np.nan, 8.0],
            "high": [1.0, 4.0, np.nan, 10.0],
            "n_seeds": 3,
        }
    )
    empty = pd.DataFrame()
    return Analysis(
        header=h,
        conditions=conditions,
        verdicts=verdict_rows(),
        robustness=empty,
        noise_floor=empty,
        cost=empty,
        failed=empty,
        pending=empty,
        config_diff=empty,
        trials=trial_rows(),
        seed_values={c: seed_values(trial_rows(), c, METRIC) for c in h["conditions"]},
        curves=curves,
        components=components,
    )
