"""The plan of a study: what a run would do, and how long it would take, without running it."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import ValidationError

from harness.engine.spec import TrialSpec
from harness.errors import ConfigError
from harness.study.design import earlier_design_of, summary_lines
from harness.study.expand import comparisons, condition_spec, study_dir, tuning_specs
from harness.study.load import study_warnings
from harness.study.schema import Arm, Study, format_value

#: Seconds per generated token when nothing has been measured yet: the tiny testbed model on
#: one CPU core, rollouts plus the update. Any completed record in the study folder replaces it.
SECONDS_PER_TOKEN = 1e-4
#: Seconds each trial spends outside the loop with the default rate (start, model build, eval).
TRIAL_OVERHEAD_S = 5.0


def trial_tokens(spec: TrialSpec) -> int:
    """The trial's token budget: training rollouts (steps x prompts_per_step x group_size x
    max_new_tokens) plus evaluation (evals x eval prompts x eval_samples x max_new_tokens)."""
    t, a = spec.train, spec.algorithm
    rollouts = t.steps * t.prompts_per_step * a.group_size * t.max_new_tokens
    n_evals = (t.steps // t.eval_every + 1) if t.eval_every else 1
    eval_prompts = min(spec.task.n_eval, t.max_eval_prompts or spec.task.n_eval)
    return rollouts + n_evals * eval_prompts * t.eval_samples * t.max_new_tokens


@dataclass
class PlannedCondition:
    name: str
    arm: str
    algorithm: str
    overrides: dict[str, Any]
    trials: int
    done: int
    tokens_per_trial: int
    est_trial_s: float


@dataclass
class TuningPhase:
    n_trials: int
    seeds: list[int]
    search_space: dict[str, str]
    trials: int  # all arms: arms x n_trials x len(seeds)
    done: int
    est_s: float


@dataclass
class StudyPlan:
    study: str
    source: str
    output_dir: str
    primary_metric: str
    direction: str
    min_effect: float | None
    test: str
    failures: str
    control: str
    seeds: list[int]
    conditions: list[PlannedCondition]
    comparisons: list[tuple[str, str]]
    tuning: TuningPhase | None
    total_trials: int
    done_trials: int
    est_total_s: float  # all trials, one worker
    est_remaining_s: float  # the trials without a completed record, one worker
    workers: int
    rate_source: str
    warnings: list[str] = field(default_factory=list)
    earlier_design: list[str] = field(default_factory=list)  # records the current design does not use

    @property
    def est_wall_s(self) -> float:
        """Remaining time with ``workers`` trials at once (trials are independent)."""
        return self.est_remaining_s / self.workers

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "est_wall_s": self.est_wall_s}


def _rates(records: list[Any]) -> tuple[dict[str, float], float | None]:
    """Measured seconds per token, per condition and overall, from completed records."""
    per_condition: dict[str, list[float]] = {}
    for rec in records:
        try:
            spec = TrialSpec.model_validate(rec.spec)
        except ValidationError:  # a record from an older schema: no rate from it
            continue
        tokens = trial_tokens(spec)
        if rec.wall_time_s > 0 and math.isfinite(rec.wall_time_s) and tokens > 0:
            sums = per_condition.setdefault(rec.arm, [0.0, 0.0])
            sums[0] += rec.wall_time_s
            sums[1] += tokens
    total_wall = sum(w for w, _ in per_condition.values())
    total_tokens = sum(t for _, t in per_condition.values())
    overall = total_wall / total_tokens if total_tokens else None
    return {name: w / t for name, (w, t) in per_condition.items()}, overall


def _overrides(arm: Arm, cell: Mapping[str, Any]) -> dict[str, Any]:
    return {**arm.set, **{f"train.{k}": v for k, v in arm.train.items()}, **cell}


def plan_study(study: Study, *, workers: int = 1, records: Iterable[Any] = ()) -> StudyPlan:
    """The design of ``study`` and an estimate of its run time, without running anything.

    The estimate is tokens x seconds-per-token. The rate is measured from the completed ones of
    ``records`` (the study folder's trial records, ``harness.tracking.records.read_records``)
    when there are any (per condition where it has records), otherwise the documented
    ``SECONDS_PER_TOKEN`` plus ``TRIAL_OVERHEAD_S`` per trial.
    """
    if workers < 1:
        raise ConfigError(f"workers: must be at least 1, got {workers}")
    folder = study_dir(study)
    records = list(records)
    earlier = summary_lines(
        reason for r in records if r.phase == "compare"
        if (reason := earlier_design_of(study, r.spec, r.arm)) is not None
    )
    records = [r for r in records if r.status == "completed"]
    per_condition, overall = _rates(records)
    done_ids = {r.trial_id for r in records if r.phase == "compare"}

    def estimate(spec: TrialSpec) -> float:
        tokens = trial_tokens(spec)
        if spec.arm in per_condition:
            return tokens * per_condition[spec.arm]
        if overall is not None:
            return tokens * overall
        return tokens * SECONDS_PER_TOKEN + TRIAL_OVERHEAD_S

    if per_condition:
        rate_source = (
            f"measured from {len(records)} completed record(s) in {folder / 'records'}"
        )
    else:
        rate_source = (
            f"default {SECONDS_PER_TOKEN:g} s/token + {TRIAL_OVERHEAD_S:g} s/trial (tiny model, "
            f"one CPU core); completed records in {folder / 'records'} will replace it"
        )

    planned: list[PlannedCondition] = []
    total_s = remaining_s = 0.0
    done_total = 0
    tuning_phase = None
    if study.tuning is None:
        for c in study.iter_conditions():
            specs = [condition_spec(study, c, seed) for seed in study.seeds]
            est = estimate(specs[0])
            done = sum(s.trial_id in done_ids for s in specs)
            arm = study.arm(c.arm)
            planned.append(PlannedCondition(
                c.name, c.arm, arm.algorithm, _overrides(arm, c.cell), len(specs), done,
                trial_tokens(specs[0]), est,
            ))
            total_s += est * len(specs)
            remaining_s += est * (len(specs) - done)
            done_total += done
    else:
        tuning = study.tuning
        per_arm_trials = tuning.n_trials * len(tuning.seeds)
        tune_done = tune_s = tune_remaining = 0.0
        for arm in study.arms:
            base = tuning_specs(study, arm.name, {}, tuning.seeds[0])
            est = estimate(base)
            ran = [r.phase for r in records if r.arm == arm.name]
            done = min(per_arm_trials, ran.count("tune"))
            tune_done += done
            tune_s += est * per_arm_trials
            tune_remaining += est * (per_arm_trials - done)
            compare_done = min(len(study.seeds), ran.count("compare"))
            planned.append(PlannedCondition(
                arm.name, arm.name, arm.algorithm, _overrides(arm, {}), len(study.seeds),
                compare_done, trial_tokens(base), est,
            ))
            total_s += est * len(study.seeds)
            remaining_s += est * (len(study.seeds) - compare_done)
            done_total += compare_done
        tuning_phase = TuningPhase(
            tuning.n_trials, list(tuning.seeds),
            {k: p.describe() for k, p in tuning.search_space.items()},
            per_arm_trials * len(study.arms), int(tune_done), tune_s,
        )
        total_s += tune_s
        remaining_s += tune_remaining
        done_total += int(tune_done)

    n_compare = sum(p.trials for p in planned)
    total = n_compare + (tuning_phase.trials if tuning_phase else 0)
    return StudyPlan(
        study=study.name,
        source=str(study.source or ""),
        output_dir=str(study_dir(study)),
        primary_metric=study.primary_metric,
        direction=study.direction,
        min_effect=study.min_effect,
        test=study.test,
        failures=study.failures,
        control=study.control,
        seeds=list(study.seeds),
        conditions=planned,
        comparisons=comparisons(study),
        tuning=tuning_phase,
        total_trials=total,
        done_trials=done_total,
        est_total_s=total_s,
        est_remaining_s=remaining_s,
        workers=workers,
        rate_source=rate_source,
        warnings=study_warnings(study),
        earlier_design=earlier,
    )


def format_duration(seconds: float) -> str:
    """``3725`` -> ``1h02m``; ``95`` -> ``1m35s``; ``7.2`` -> ``7s``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    hours, rest = divmod(seconds, 3600)
    if hours < 48:
        return f"{hours}h{rest // 60:02d}m"
    return f"{hours // 24}d{hours % 24:02d}h"


def describe_overrides(overrides: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={format_value(v)}" for k, v in overrides.items()) or "-"
