"""Trial functions for the runner tests (``--trial-fn tests.runner.fake_trials:NAME``).

They behave by arm name, so one study can mix outcomes:

- ``ok*``: succeed with deterministic metrics (from the seed and the arm);
- ``raise*``: raise ``RuntimeError``;
- ``nan*``: raise ``NonFiniteError`` (what the trainer does on a NaN loss);
- ``hang*``: sleep far past any test timeout;
- ``flaky*``: fail on the first call for a trial id, succeed after;
- ``die*``: kill its own process with SIGKILL (a crash or an OOM kill);
- ``badmetric*``: return (not raise) a NaN primary metric;
- ``slowfirst*``: the first call for a trial id sleeps ``FAKE_SLOW_FIRST_S`` seconds (default
  60) before succeeding, later calls succeed at once (a trial to kill its worker in).

Every call appends a line to ``$FAKE_TRIALS_DIR/<trial_id>.started`` and, on success,
``<trial_id>.done``, so a test can count how often each trial ran. ``FAKE_TRIAL_SLEEP`` (seconds)
makes successful trials slow. With ``FAKE_TRIALS_DUMP_ENV`` set, each call also writes the
trial process's environment to ``<trial_id>.env`` (JSON), to check what a trial can see.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from harness.engine.spec import TrialResult, TrialSpec
from harness.errors import NonFiniteError


def _dir() -> Path:
    path = Path(os.environ["FAKE_TRIALS_DIR"])
    path.mkdir(parents=True, exist_ok=True)
    return path


def _mark(spec: TrialSpec, what: str) -> int:
    path = _dir() / f"{spec.trial_id}.{what}"
    with open(path, "a") as fh:
        fh.write(f"{os.getpid()}\n")
    return len(path.read_text().splitlines())


def metrics(spec: TrialSpec) -> dict[str, float]:
    """Deterministic final metrics: depend only on the seed, the arm and the learning rate."""
    bump = sum(map(ord, spec.arm)) % 7 / 100
    acc = round(0.3 + 0.05 * (spec.seed % 5) + bump + min(spec.algorithm.lr, 0.1), 6)
    return {"eval/accuracy": acc, "eval/mean_reward": acc / 2, "tokens/total": 100.0}


def _succeed(spec: TrialSpec) -> TrialResult:
    time.sleep(float(os.environ.get("FAKE_TRIAL_SLEEP", "0")))
    final = metrics(spec)
    _mark(spec, "done")
    return TrialResult(
        trial_id=spec.trial_id,
        final=final,
        history=[{"step": 0, "train/reward_mean": 0.0}, {"step": 1, "train/reward_mean": final["eval/accuracy"]}],
        wall_time_s=0.01,
    )


def by_arm(spec: TrialSpec) -> TrialResult:
    calls = _mark(spec, "started")
    if os.environ.get("FAKE_TRIALS_DUMP_ENV"):
        (_dir() / f"{spec.trial_id}.env").write_text(json.dumps(dict(os.environ)))
    arm = spec.arm
    if arm.startswith("raise"):
        raise RuntimeError(f"boom in {spec.trial_id}")
    if arm.startswith("nan"):
        raise NonFiniteError("loss is nan at step 3")
    if arm.startswith("hang"):
        time.sleep(600)
    if arm.startswith("flaky") and calls == 1:
        raise RuntimeError("transient failure")
    if arm.startswith("die"):
        os.kill(os.getpid(), signal.SIGKILL)
    if arm.startswith("slowfirst") and calls == 1:
        time.sleep(float(os.environ.get("FAKE_SLOW_FIRST_S", "60")))
    if arm.startswith("badmetric"):
        return TrialResult(trial_id=spec.trial_id, final={"eval/accuracy": float("nan")})
    return _succeed(spec)
