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

With ``FAKE_RELEASE_FILE`` set, a trial holding (a ``slowfirst`` first call, or a ``planted``
trial of seed ``FAKE_HOLD_FROM_SEED`` or later) waits until that file exists instead (at most
its sleep): a test holds trials running until it has done what it must meanwhile, whatever the
load, then releases them by writing the file.

``planted`` (``fake_trials:planted``) gives every arm the same accuracy up to a little seeded
noise, except arms named ``big*``, which get a large effect (+0.3): a sequential study stops
them at the first look.

``looked`` and ``curved`` (``fake_trials:looked``, ``fake_trials:curved``) run the segments of a
study with compute looks: ``looked`` evaluates at each look, ``bad*`` arms trailing by 0.3;
``curved`` at every step on a saturating curve, ``high*`` arms with a higher ceiling.

Every call appends a line to ``$FAKE_TRIALS_DIR/<trial_id>.started`` and, on success,
``<trial_id>.done``, so a test can count how often each trial ran. ``FAKE_TRIAL_SLEEP`` (seconds)
makes successful trials slow. With ``FAKE_TRIALS_DUMP_ENV`` set, each call also writes the
trial process's environment to ``<trial_id>.env`` (JSON), to check what a trial can see.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import time
from pathlib import Path

from harness.engine.spec import TrialResult, TrialSpec
from harness.errors import NonFiniteError
from harness.trainers.trial_dir import checkpoint_dir


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


def _hold(seconds: float) -> None:
    """Sleep ``seconds``, or until ``$FAKE_RELEASE_FILE`` exists when it is set."""
    release = os.environ.get("FAKE_RELEASE_FILE")
    if not release:
        time.sleep(seconds)
        return
    end = time.monotonic() + seconds
    while not Path(release).exists() and (left := end - time.monotonic()) > 0:
        time.sleep(min(0.1, left))


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


PLANTED_EFFECT = 0.3


def planted_accuracy(arm: str, seed: int) -> float:
    """0.5, +0.3 for ``big*`` arms, plus noise in [-0.01, 0.01] drawn from (arm, seed)."""
    noise = int(hashlib.sha256(f"{arm}:{seed}".encode()).hexdigest()[:8], 16) / 2**32 - 0.5
    return round(0.5 + (PLANTED_EFFECT if arm.startswith("big") else 0.0) + 0.02 * noise, 6)


def planted(spec: TrialSpec) -> TrialResult:
    _mark(spec, "started")
    hold_from = os.environ.get("FAKE_HOLD_FROM_SEED")
    if hold_from is not None and spec.seed >= int(hold_from):
        _hold(600)
    time.sleep(float(os.environ.get("FAKE_TRIAL_SLEEP", "0")))
    acc = planted_accuracy(spec.arm, spec.seed)
    _mark(spec, "done")
    return TrialResult(
        trial_id=spec.trial_id, final={"eval/accuracy": acc, "eval/mean_reward": acc / 2}, wall_time_s=0.01
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
        _hold(float(os.environ.get("FAKE_SLOW_FIRST_S", "60")))
    if arm.startswith("badmetric"):
        return TrialResult(trial_id=spec.trial_id, final={"eval/accuracy": float("nan")})
    return _succeed(spec)


class SeedCheckError(Exception):
    """Named as the engine's, so the runner reads the failure as the check's own."""


def passing_seed_check(spec: TrialSpec) -> TrialResult:
    _mark(spec, "checked")
    return TrialResult(
        trial_id=spec.trial_id, final={"check/same_seed_tokens_alike": 1.0, "check/other_seed_tokens_alike": 0.1}
    )


def seed_check_building_a_warm_start(spec: TrialSpec) -> TrialResult:
    """Says what it builds on stderr as the warm start does (the log, under a parent), then passes."""
    for step in (1, 2):
        print(f"warm start: step {step}/2, val accuracy 0.5 (target 0.4)", file=sys.stderr, flush=True)
        print("some other output the console is not shown", file=sys.stderr, flush=True)
        time.sleep(0.3)
    return passing_seed_check(spec)


def failing_seed_check(spec: TrialSpec) -> TrialResult:
    _mark(spec, "checked")
    raise SeedCheckError(
        f"seeds {spec.seed} and {spec.seed + 1} gave identical rollouts in arm {spec.arm}'s first step"
    )


#: ``looked`` arms: ``bad*`` trail the control by this much at every point of the budget
LOOKED_GAP = 0.3


def looked_accuracy(arm: str, seed: int, fraction: float) -> float:
    """A rising curve: 0.2 + 0.4 x fraction of the budget, less ``LOOKED_GAP`` for ``bad*`` arms,
    plus seeded noise in [-0.01, 0.01]."""
    noise = int(hashlib.sha256(f"{arm}:{seed}".encode()).hexdigest()[:8], 16) / 2**32 - 0.5
    gap = LOOKED_GAP if arm.startswith("bad") else 0.0
    return round(0.2 + 0.4 * fraction - gap + 0.02 * noise, 6)


def looked(spec: TrialSpec) -> TrialResult:
    """A trial with compute looks on the step axis, run segment by segment as the engine runs it:
    it evaluates at step 0 and at each look's point up to the look it runs to (``looks.run_to``),
    resumes only from the marker the segment before it left in its checkpoint folder (an error
    otherwise) and leaves one where it pauses."""
    looks = spec.looks
    budget = looks.at[-1]
    rows = [{"step": 0, "eval/accuracy": looked_accuracy(spec.arm, spec.seed, 0.0)}]
    for k, point in enumerate(looks.at[: looks.run_to + 1]):
        rows.append(
            {"step": int(point), "look": k, "eval/accuracy": looked_accuracy(spec.arm, spec.seed, point / budget)}
        )
    return _segment(spec, rows)


#: ``curved`` arms: the ceiling of the control's curve, and of ``high*`` arms
CURVED_CEILING, CURVED_HIGH = 0.6, 0.8


def curved_accuracy(arm: str, seed: int, step: int, budget: float) -> float:
    """A saturating curve in the step: 0.2 + (A - 0.2) / (1 + (budget / 3 / step)^1.5), A
    ``CURVED_HIGH`` for ``high*`` arms and ``CURVED_CEILING`` for the others, plus seeded noise in
    [-0.005, 0.005] per seed and step (0.2 at step 0)."""
    if step == 0:
        return 0.2
    noise = int(hashlib.sha256(f"{arm}:{seed}:{step}".encode()).hexdigest()[:8], 16) / 2**32 - 0.5
    ceiling = CURVED_HIGH if arm.startswith("high") else CURVED_CEILING
    return round(0.2 + (ceiling - 0.2) / (1 + (budget / 3 / step) ** 1.5) + 0.01 * noise, 6)


def curved(spec: TrialSpec) -> TrialResult:
    """As ``looked``, but evaluated at every step up to the look it runs to, on a saturating curve
    (``curved_accuracy``): a curve a forecast can be fitted to."""
    looks = spec.looks
    budget = looks.at[-1]
    steps = range(int(looks.at[looks.run_to]) + 1)
    return _segment(
        spec, [{"step": s, "eval/accuracy": curved_accuracy(spec.arm, spec.seed, s, budget)} for s in steps]
    )


def _segment(spec: TrialSpec, history: list[dict]) -> TrialResult:
    """One segment of a trial with compute looks, its ``history`` from step 0 to where it pauses:
    resumed only from the marker the segment before it left, and a marker where it pauses."""
    _mark(spec, "started")
    looks = spec.looks
    folder = checkpoint_dir(spec.whole_trial_id())
    if looks.resume_after is not None:
        marker = folder / f"look_{looks.resume_after}.marker"
        if not marker.is_file():
            raise RuntimeError(f"no checkpoint of look {looks.resume_after} in {folder}")
    if looks.pause_after is not None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"look_{looks.pause_after}.marker").write_text(spec.trial_id)
    _mark(spec, "done")
    final = {"eval/accuracy": history[-1]["eval/accuracy"], "eval/mean_reward": history[-1]["eval/accuracy"] / 2}
    return TrialResult(
        trial_id=spec.trial_id, final=final, history=history, wall_time_s=0.01, paused_at_look=looks.pause_after
    )
