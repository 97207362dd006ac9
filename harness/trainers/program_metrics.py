"""The per-step metrics a program writes (``metrics_file``: one JSON object a line, ``{"step": N,
"<namespace>/<name>": number, ...}``), by step, to be merged into the trial's history rows; rows
of one step merge (a later value wins). The ``compute/*`` ones are cumulative; the harness carries
the latest forward onto the evaluation rows, so a comparison at a compute budget can read them."""

from __future__ import annotations

import json
from pathlib import Path

from harness.engine.spec import COMPUTE_METRICS
from harness.trainers.faults import ProgramTrialError

COMPUTE_PREFIX = "compute/"
#: what the builtin trainer reports as tokens/total: the tokens generated and trained on
TOKEN_METRICS = ("compute/generated_tokens", "compute/trained_tokens")


def read_metrics(path: Path, last_step: int) -> dict[int, dict[str, float]]:
    """The program's metrics by step (none when it wrote no file); a malformed line, or a step
    past the budget (``last_step``, ``train.steps``: its compute totals would be the trial's), is
    a ``ProgramTrialError`` naming it."""
    if not path.is_file():
        return {}
    by_step: dict[int, dict[str, float]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path.name} line {number}"
        try:
            row = json.loads(line)
        except ValueError:
            raise ProgramTrialError(f"{where}: not a JSON object") from None
        step = row.get("step") if isinstance(row, dict) else None
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ProgramTrialError(f'{where}: needs "step", a non-negative integer')
        if step > last_step:
            raise ProgramTrialError(
                f"{where}: step {step} is past train.steps {last_step}; report steps 0 to {last_step}"
            )
        for name, value in row.items():
            if name != "step" and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ProgramTrialError(f"{where}: {name} is {value!r}, not a number")
        by_step.setdefault(step, {}).update({k: float(v) for k, v in row.items() if k != "step"})
    return by_step


def merged_history(metrics: dict[int, dict[str, float]], evaluations: dict[int, dict[str, float]]) -> list[dict]:
    """One row per step that has metrics or an evaluation, in order. Step 0 (the start model) has
    every compute column at 0; each later row carries the latest compute totals the program
    reported up to its step (a column it never reported stays out: no value, rather than 0)."""
    compute: dict[str, float] = {}
    rows = []
    for step in sorted({0, *metrics, *evaluations}):
        reported = metrics.get(step, {})
        if step:
            compute.update({k: v for k, v in reported.items() if k.startswith(COMPUTE_PREFIX)})
        spent = compute if step else dict.fromkeys(COMPUTE_METRICS, 0.0)
        row = {"step": step, **reported, **spent, **evaluations.get(step, {})}
        if any(k in row for k in TOKEN_METRICS):
            row["tokens/total"] = sum(row.get(k, 0.0) for k in TOKEN_METRICS)
        rows.append(row)
    return rows
