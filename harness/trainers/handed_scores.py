"""Per-prompt scores a program hands in (``trainer.scores: program``, e.g. from a GPU inference
server), checked before they count: every step one the study evaluates (0, each multiple of
``train.eval_every`` and ``train.steps``: a score from outside the budget cannot decide the
result), for the task and every benchmark each held-out prompt id exactly once, and every value
in its metric's range: ``greedy`` and ``sampled_mean`` are the verifier's scores (and their mean)
in ``eval/accuracy``'s range, and ``sampled_var`` at most what ``samples`` scores in that range
with that mean can spread (0 for one sample). Steps 0 (the start model) and the last are
required: the verdicts read both.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from harness.engine.spec import GREEDY_METRIC, METRIC_RANGES, PromptScores, TrainConfig
from harness.trainers.faults import ProgramTrialError

FIELDS = ("step", "prompt_id", "benchmark", "greedy", "sampled_mean", "sampled_var", "samples")
#: the most steps a refusal lists one by one (a longer schedule is said by its rule)
LISTED_STEPS = 6
#: rounding a program's variance may carry above the exact bound
VAR_SLACK = 1e-9


def evaluated_steps(train: TrainConfig) -> list[int]:
    """The steps the study evaluates, as a builtin trial does: the start, every ``eval_every``
    steps and the last."""
    every = train.eval_every
    return sorted({0, train.steps, *(range(every, train.steps, every) if every else ())})


def _schedule(train: TrainConfig) -> str:
    steps = evaluated_steps(train)
    if len(steps) <= LISTED_STEPS:
        return ", ".join(map(str, steps))
    return f"0, every multiple of {train.eval_every} up to {train.steps}, and {train.steps}"


def _variance_bound(mean: float, samples: int, low: float, high: float) -> float:
    """The largest sample variance (ddof 1) ``samples`` values in [low, high] with this mean can
    have (Bhatia-Davis: the population variance is at most (high - mean)(mean - low))."""
    if samples < 2:
        return 0.0
    return max(0.0, (high - mean) * (mean - low)) * samples / (samples - 1)


def _row(line: str, where: str) -> dict[str, Any]:
    try:
        row = json.loads(line)
    except ValueError:
        raise ProgramTrialError(f"{where}: not a JSON object") from None
    missing = [f for f in FIELDS if not isinstance(row, dict) or f not in row]
    if missing:
        raise ProgramTrialError(f"{where}: lacks {', '.join(missing)} (each row has {', '.join(FIELDS)})")
    return row


def _check_values(row: dict[str, Any], where: str) -> None:
    low, high = METRIC_RANGES[GREEDY_METRIC]
    numbers = {f: row[f] for f in ("greedy", "sampled_mean", "sampled_var")}
    for field, value in numbers.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ProgramTrialError(f"{where}: {field} is {value!r}, not a finite number")
    for field in ("greedy", "sampled_mean"):
        if not low <= row[field] <= high:
            raise ProgramTrialError(
                f"{where}: {field} is {row[field]}, outside [{low:g}, {high:g}] (the verifier's, {GREEDY_METRIC})"
            )
    samples, step = row["samples"], row["step"]
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise ProgramTrialError(f"{where}: samples is {samples!r}, not a positive integer")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ProgramTrialError(f"{where}: step is {step!r}, not a non-negative integer")
    most = _variance_bound(row["sampled_mean"], samples, low, high)
    if not 0 <= row["sampled_var"] <= most + VAR_SLACK:
        raise ProgramTrialError(
            f"{where}: sampled_var is {row['sampled_var']}, outside [0, {most:g}] (the most {samples} scores in "
            f"[{low:g}, {high:g}] with mean {row['sampled_mean']:g} can spread)"
        )


def read_scores(path: Path, expected: dict[str | None, list[str]], train: TrainConfig) -> list[PromptScores]:
    """The program's scores, one ``PromptScores`` per step and benchmark (the task's first), each
    in the held-out prompts' order; ``expected`` holds those ids by benchmark (None: the task),
    ``train`` the budget and evaluation schedule the steps must lie in."""
    if not path.is_file():
        raise ProgramTrialError(f"trainer.scores is program, but the program wrote no {path}")
    allowed = set(evaluated_steps(train))
    cells: dict[tuple[int, str | None], dict[str, dict[str, Any]]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path.name} line {number}"
        row = _row(line, where)
        _check_values(row, where)
        if row["step"] not in allowed:
            raise ProgramTrialError(
                f"{where}: step {row['step']} is not an evaluated step of this study (train.steps {train.steps}, "
                f"train.eval_every {train.eval_every}); score only steps {_schedule(train)}"
            )
        if row["benchmark"] not in expected:
            valid = ", ".join("null" if b is None else b for b in expected)
            raise ProgramTrialError(f"{where}: benchmark {row['benchmark']!r} is not scored here; valid: {valid}")
        cell = cells.setdefault((row["step"], row["benchmark"]), {})
        if row["prompt_id"] in cell:
            raise ProgramTrialError(f"{where}: prompt {row['prompt_id']!r} repeats at step {row['step']}")
        if row["prompt_id"] not in expected[row["benchmark"]]:
            raise ProgramTrialError(f"{where}: prompt {row['prompt_id']!r} is not a held-out prompt id")
        cell[row["prompt_id"]] = row
    steps = sorted({step for step, _ in cells} | {0, train.steps})
    out = []
    for step in steps:
        for benchmark, ids in expected.items():
            got = cells.get((step, benchmark), {})
            missing = [pid for pid in ids if pid not in got]
            if missing:
                what = "the task" if benchmark is None else f"benchmark {benchmark}"
                raise ProgramTrialError(
                    f"{path.name}: step {step} lacks {len(missing)} of the {len(ids)} held-out prompts of {what} "
                    f"(first: {missing[0]!r}); score every prompt of eval_prompts once per step"
                )
            rows = [got[pid] for pid in ids]
            samples = {row["samples"] for row in rows}
            if len(samples) > 1:
                raise ProgramTrialError(f"{path.name}: step {step} mixes sample counts {sorted(samples)}")
            out.append(
                PromptScores(
                    step=step,
                    prompt_ids=ids,
                    greedy=[float(r["greedy"]) for r in rows],
                    sampled_mean=[float(r["sampled_mean"]) for r in rows],
                    sampled_var=[float(r["sampled_var"]) for r in rows],
                    samples=samples.pop(),
                    benchmark=benchmark,
                )
            )
    return out
