"""Synthetic Results frames for the report tests (no real study needed).

Three conditions x five seeds (0..4), seed-matched: ``grpo`` (control), ``big`` (a planted large
effect, +0.3 on eval/accuracy with small seed noise) and ``null`` (same distribution as the
control). ``null`` seed 4 failed. Curves: 10 steps of train/reward_mean, eval/accuracy every
3 steps, tokens/total cumulative (``big`` processes more tokens per step). ``full_disk_at`` makes
a write run out of space; ``write_study_folder`` writes a real study folder (records and an
optional study.yaml) for the tests that load results the way the commands do.
"""

from __future__ import annotations

import datetime as dt
import errno
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from harness.ground import files

PRIMARY = "eval/accuracy"
CONTROL = "grpo"
CONDITIONS = ["grpo", "big", "null"]
EFFECT = {"grpo": 0.0, "big": 0.3, "null": 0.0}
TOKENS_PER_STEP = {"grpo": 100.0, "big": 130.0, "null": 100.0}
PARAMS = {
    "grpo": {"algorithm.eps_high": 0.2, "algorithm.loss_agg": "token-mean"},
    "big": {"algorithm.eps_high": 0.28, "algorithm.loss_agg": "token-mean"},
    "null": {"algorithm.eps_high": 0.2, "algorithm.loss_agg": "seq-mean-token-sum-norm"},
}
FAILED_ID = "null-s4"
FAILED_REASON = "NonFiniteError: loss is nan at step 7"


@dataclass
class FakeResults:
    trials: pd.DataFrame
    curves: pd.DataFrame
    meta: dict = field(default_factory=dict)
    prompts: pd.DataFrame | None = None


def make_results(
    seeds=(0, 1, 2, 3, 4),
    *,
    failed: dict[str, str] | None = None,
    pending: dict[str, str] | None = None,
    noise: float = 0.02,
) -> FakeResults:
    """``failed``/``pending`` map trial ids (``<cond>-s<seed>``) to a reason / a status."""
    failed = {FAILED_ID: FAILED_REASON} if failed is None else failed
    pending = pending or {}
    rng = np.random.default_rng(123)
    seed_effect = {s: rng.normal(0, noise) for s in seeds}  # shared by all arms: pairing helps
    trials, curves = [], []
    for seed in seeds:
        for cond in CONDITIONS:
            tid = f"{cond}-s{seed}"
            status = "failed" if tid in failed else pending.get(tid, "completed")
            acc = 0.5 + EFFECT[cond] + seed_effect[seed] + rng.normal(0, noise)
            tokens = TOKENS_PER_STEP[cond] * 10 + seed
            row = {
                "trial_id": tid,
                "arm": cond,
                "seed": seed,
                "status": status,
                "error": failed.get(tid),
                "wall_time_s": 10.0 + seed + (5.0 if cond == "big" else 0.0),
                "config_hash": f"h{cond}",
                PRIMARY: acc if status == "completed" else np.nan,
                "train/reward_mean": acc - 0.1 if status == "completed" else np.nan,
                "tokens/total": tokens if status != "waiting" else np.nan,
                "param/arm": cond,
                "param/seed": seed,
                "param/study": "synthetic",
                "param/algorithm.lr": 0.001,
                "param/train.steps": 10,
                **{f"param/{k}": v for k, v in PARAMS[cond].items()},
            }
            if status in ("waiting", "running"):
                row["wall_time_s"] = np.nan
            trials.append(row)
            if status == "waiting":
                continue
            last = 7 if status == "failed" else (4 if status == "running" else 9)
            for step in range(last + 1):
                frac = (step + 1) / 10
                curves.append((tid, cond, seed, step, "train/reward_mean", frac * (acc - 0.1) + rng.normal(0, 0.01)))
                curves.append((tid, cond, seed, step, "tokens/total", TOKENS_PER_STEP[cond] * (step + 1) + seed))
                if step % 3 == 0:
                    curves.append((tid, cond, seed, step, PRIMARY, 0.4 + frac * (acc - 0.4)))
    meta = {
        "study": "synthetic",
        "primary_metric": PRIMARY,
        "direction": "maximize",
        "control": CONTROL,
        "conditions": list(CONDITIONS),
        "comparisons": [("big", CONTROL), ("null", CONTROL)],
        "seeds": list(seeds),
        "seed_matched": True,
        "harness_version": "0.1.0",
        "git_commit": "abc1234",
        "metric_ranges": {PRIMARY: (0.0, 1.0)},
    }
    return FakeResults(
        trials=pd.DataFrame(trials),
        curves=pd.DataFrame(curves, columns=["trial_id", "arm", "seed", "step", "metric", "value"]),
        meta=meta,
    )


def values(res: FakeResults, cond: str, metric: str = PRIMARY) -> pd.Series:
    """Completed values of a condition indexed by seed, computed independently of the report."""
    t = res.trials
    t = t[(t["arm"] == cond) & (t["status"] == "completed")].sort_values("seed")
    return pd.Series(t[metric].to_numpy(float), index=t["seed"].to_numpy())


def with_prompts(
    res: FakeResults, n_prompts: int = 32, *, step: int = 9, arm_x_prompt: float = 0.0, seed: int = 5
) -> FakeResults:
    """Give every completed trial 0/1 greedy scores on ``n_prompts`` shared prompts (prompt
    difficulty shared by the arms, plus an optional arm x prompt sd on the latent scale) and set
    its primary metric to their mean, as a real evaluation would. An earlier evaluation at step
    0 is added too, to check that the last one is used."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0.0, 1.0, n_prompts)
    per_arm = {c: rng.normal(0.0, arm_x_prompt, n_prompts) for c in CONDITIONS}
    ids = [f"p{i:03d}" for i in range(n_prompts)]
    rows = []
    trials = res.trials.copy()
    for i, t in trials.iterrows():
        if t["status"] != "completed":
            continue
        latent = np.log(t[PRIMARY] / (1 - t[PRIMARY])) + difficulty + per_arm[t["arm"]]
        scores = (rng.random(n_prompts) < 1 / (1 + np.exp(-latent))).astype(float)
        trials.loc[i, PRIMARY] = scores.mean()
        for p, value in zip(ids, scores):
            rows.append((t["trial_id"], t["arm"], t["seed"], step, p, PRIMARY, value))
            rows.append((t["trial_id"], t["arm"], t["seed"], 0, p, PRIMARY, 0.0))
    prompts = pd.DataFrame(rows, columns=["trial_id", "arm", "seed", "step", "prompt_id", "metric", "value"])
    return FakeResults(trials=trials, curves=res.curves, meta=dict(res.meta), prompts=prompts)


def full_disk_at(monkeypatch, which: int) -> list[str]:
    """Make the ``which``-th temporary file of a write run out of space halfway (at most 28 KB in,
    as a full disk does); returns the names of the files whose temporaries were opened, in order."""
    real = files._new_temporary
    opened: list[str] = []

    class FullDisk:
        def __init__(self, handle):
            self.handle, self.name = handle, handle.name

        def write(self, data):
            self.handle.write(data[: min(28_000, len(data) // 2)])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def __getattr__(self, name):
            return getattr(self.handle, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self.handle.__exit__(*exc)

    def temporary(path):
        handle, name = real(path)
        opened.append(path.name)
        return (FullDisk(handle) if len(opened) == which else handle), name

    monkeypatch.setattr(files, "_new_temporary", temporary)
    return opened


#: when the trials of ``write_study_folder`` ran
T0 = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def write_study_folder(folder: Path, record_study: str, snapshot: dict | None) -> Path:
    """A study folder with 2 arms x 3 completed seeds of records and an optional study.yaml."""
    from harness.algorithms.config import RLConfig
    from harness.engine.spec import TrainConfig, TrialResult, TrialSpec
    from harness.tracking.records import make_record, write_record

    for arm, lift in (("grpo", 0.0), ("wide", 0.1)):
        for seed in range(3):
            spec = TrialSpec(
                study=record_study,
                arm=arm,
                seed=seed,
                train=TrainConfig(steps=2, eval_every=1),
                algorithm=RLConfig(name="grpo", eps_high=0.2 + lift),
            )
            result = TrialResult(
                trial_id=spec.trial_id,
                status="completed",
                final={"eval/accuracy": 0.5 + lift + 0.01 * seed},
                history=[{"step": 0, "eval/accuracy": 0.4}],
                wall_time_s=1.0,
            )
            write_record(
                folder,
                make_record(spec, result, attempt=1, phase="compare", started_at=T0, finished_at=T0, device="cpu"),
            )
    if snapshot is not None:
        (folder / "study.yaml").write_text(yaml.safe_dump(snapshot, sort_keys=False))
    return folder


def design(**extra) -> dict:
    """The study.yaml of ``write_study_folder``'s two arms, with ``extra`` keys."""
    return {
        "control": "grpo",
        "seeds": 3,
        "primary_metric": "eval/accuracy",
        "direction": "maximize",
        "arms": [
            {"name": "grpo", "algorithm": "grpo"},
            {"name": "wide", "algorithm": "grpo", "set": {"eps_high": 0.3}},
        ],
        **extra,
    }
