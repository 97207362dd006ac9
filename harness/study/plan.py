"""The plan of a study: what a run would do, and how long it would take, without running it.

The estimate adds, on the way to the last trial: ``harness run`` starting (``RUN_START_S``); each
warm start that is not cached yet, built once before the trials that use it (at most its step
limit x ``SFT_STEP_S``); and the trials, shared among the workers, each costing its process start
(``TRIAL_START_S``), its tokens x a rate (``SECONDS_PER_TOKEN``: building the model, loading the
cached warm start, rollouts, updates, evaluations) and the turnover to the next trial
(``TRIAL_TURNOVER_S``). Completed records in the study folder replace the start and the rate by
what they measured, and the plan shows them beside what the defaults would have said.

The defaults are the tiny testbed model's. For a real model without records the CLI hands in a
short probe measured on this machine (``harness.engine.cost_probe``: the model's load, one step
and one evaluation at a small shape), and each trial is priced from it (``probed_trial``).
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from harness.engine.spec import TrialSpec
from harness.engine.warmstart_key import MANIFEST_FILE, cache_folder
from harness.errors import ConfigError
from harness.study.design import earlier_design_of, summary_lines
from harness.study.expand import (
    arm_rollout,
    comparisons,
    condition_params,
    condition_spec,
    study_dir,
    tuning_specs,
)
from harness.study.load import study_warnings
from harness.study.overrides import format_value
from harness.study.schema import Arm, Study

# Default costs, measured on the 2-core development machine from the 35 completed records of
# studies/seven_algorithms.yaml (2 workers, one torch thread each; the tiny testbed model, the
# warm start cached). Completed records in a study's folder replace the first two.
#: In-process seconds per token: median of wall_time_s / trial_tokens (8.4e-5 s).
SECONDS_PER_TOKEN = 8.4e-5
#: Starting a trial's process (forked from its worker's forkserver), importing the engine and
#: handing its result back: median of finished_at - started_at - wall_time_s (4.2 s).
TRIAL_START_S = 4.2
#: Between two trials on one worker (the record written and mirrored to MLflow, the next claimed):
#: 175.7 s from the first start to the last finish x 2 workers / 35 trials - 9.3 s mean trial.
TRIAL_TURNOVER_S = 0.75
#: ``harness run`` until its first trials run: loading and probing the study, queueing it, starting
#: the workers and their forkservers (7 s to the first trial's start for the quickstart, same
#: machine), and the slower process start of each worker's first trial (7.0 and 8.6 s in the
#: seven_algorithms records against the median 4.2 s).
RUN_START_S = 10.0
#: One SFT step of the tiny model's warm start, its accuracy checks included (425 steps in 8-9 s).
SFT_STEP_S = 0.02


def row_tokens(spec: TrialSpec) -> int:
    """A sampled row's token budget: max_new_tokens, times task.max_turns for tool-calling episodes."""
    return spec.train.max_new_tokens * (spec.task.max_turns if spec.task.tools else 1)


def evaluations(spec: TrialSpec) -> int:
    """How many held-out evaluations a trial runs: at the start, every eval_every steps and after the last."""
    t = spec.train
    return (t.steps // t.eval_every + 1) if t.eval_every else 1


def eval_prompts(spec: TrialSpec) -> int:
    """The prompts of one evaluation: the task's and every benchmark's (at most max_eval_prompts each)."""
    sizes = [spec.task.n_eval, *(b.task.n_eval for b in spec.benchmarks)]
    return sum(min(n, spec.train.max_eval_prompts or n) for n in sizes)


def evaluated_prompts(spec: TrialSpec) -> int:
    """The prompts all of a trial's evaluations score together: evals x ``eval_prompts``, or under
    ``eval_subset`` the task's subset at every evaluation but the start and the last."""
    total = evaluations(spec) * eval_prompts(spec)
    if spec.eval_subset is None:
        return total
    task = min(spec.task.n_eval, spec.train.max_eval_prompts or spec.task.n_eval)
    between = max(evaluations(spec) - 2, 0)
    return total - between * (task - spec.eval_subset.count(task))


def trial_tokens(spec: TrialSpec) -> int:
    """The trial's token budget: training rollouts (steps x prompts_per_step x group_size x a
    row's budget) plus evaluation (``evaluated_prompts``: the task's and every benchmark's, x
    eval_samples x a row's budget); a row's budget is ``row_tokens``."""
    t, a = spec.train, spec.algorithm
    rollouts = t.steps * t.prompts_per_step * a.group_size * row_tokens(spec)
    return rollouts + evaluated_prompts(spec) * t.eval_samples * row_tokens(spec)


class ProbedCosts(Protocol):
    """What a short measured probe of a real model's trial gave (``harness.engine.cost_probe``,
    run by the CLI: this layer does not import the engine): its seconds and the shape they were
    measured at."""

    model: str
    parameters: int
    load_s: float
    step_rows: int
    row_tokens: int
    sample_s: float
    update_s: float
    epochs: int
    eval_prompts: int
    eval_samples: int
    eval_s: float
    probe_s: float
    load_average: float
    cpus: int
    cached: bool


@dataclass(frozen=True)
class ProbedTrial:
    """One trial priced from a probe: its model load, its steps and its evaluations."""

    load_s: float
    steps: int
    step_s: float
    evaluations: int
    eval_s: float

    @property
    def total_s(self) -> float:
        return self.load_s + self.steps * self.step_s + self.evaluations * self.eval_s


def probed_trial(probe: ProbedCosts, spec: TrialSpec) -> ProbedTrial:
    """``spec``'s trial priced from ``probe``: each phase's seconds scaled by its rows (an
    evaluation's: the mean over the trial's) and its rows' token budget against the probe's (with
    one model, a phase's FLOPs grow with its tokens: ``harness.engine.compute``), the updates by
    their epochs too."""
    t, a = spec.train, spec.algorithm
    budget = row_tokens(spec) / probe.row_tokens
    rows = t.prompts_per_step * a.group_size / probe.step_rows
    epochs = a.epochs / probe.epochs
    per_evaluation = evaluated_prompts(spec) / evaluations(spec)  # eval_subset: fewer between the start and the last
    eval_rows = per_evaluation * (1 + t.eval_samples) / (probe.eval_prompts * (1 + probe.eval_samples))
    return ProbedTrial(
        load_s=probe.load_s,
        steps=t.steps,
        step_s=rows * budget * (probe.sample_s + probe.update_s * epochs),
        evaluations=evaluations(spec),
        eval_s=eval_rows * budget * probe.eval_s,
    )


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
    role: str = "arm"  # or a calibration condition: "aa", "placebo"


@dataclass
class TuningPhase:
    n_trials: int
    seeds: list[int]
    search_space: dict[str, str]
    trials: int  # all arms: arms x n_trials x len(seeds)
    done: int
    est_s: float


@dataclass
class WarmStartPlan:
    """One warm-start set-up the remaining trials use, and whether its cache entry exists here."""

    folder: str
    cached: bool
    max_steps: int
    est_s: float  # building it: 0 when cached (each trial's load is in its own estimate)


@dataclass
class Costs:
    """What one trial costs: its process start and its seconds per token (per condition)."""

    start_s: float
    per_token: dict[str, float]  # condition -> s/token; conditions without records use `overall`
    overall: float
    measured_from: int  # completed records; 0: the defaults (or the probe)
    probe: ProbedCosts | None = None  # a real model's probe, without records: it prices the trial instead of the rate

    def trial_s(self, spec: TrialSpec) -> float:
        if self.probe is not None:
            return self.start_s + probed_trial(self.probe, spec).total_s + TRIAL_TURNOVER_S
        return self.start_s + trial_tokens(spec) * self.per_token.get(spec.arm, self.overall) + TRIAL_TURNOVER_S


DEFAULT_COSTS = Costs(TRIAL_START_S, {}, SECONDS_PER_TOKEN, 0)


@dataclass
class Measured:
    """What the completed records took, beside what the default costs estimate for them."""

    trials: int
    median_s: float  # one trial, started_at to finished_at
    default_median_s: float  # the defaults for the same trials: TRIAL_START_S + tokens x SECONDS_PER_TOKEN
    total_s: float  # every trial, start to finish, summed
    span_s: float  # the first start to the last finish


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
    costs: Costs
    rate_source: str
    warmstarts: list[WarmStartPlan] = field(default_factory=list)  # those the remaining trials use
    measured: Measured | None = None
    warnings: list[str] = field(default_factory=list)
    probed: ProbedTrial | None = None  # the first condition with trials to run, priced from the probe
    earlier_design: list[str] = field(default_factory=list)  # records the current design does not use
    sequential: dict[str, Any] | None = None  # looks (seeds per arm), spending; the totals above are its maximum
    compute_looks: str | None = None  # the looks over compute, in one line; the totals above are its maximum
    control_sd: float | None = (
        None  # the sd of the control's trial means of the primary metric, from its completed records
    )
    control_sd_from: int = 0  # how many records that is
    followers: int = 0  # conditions that take the control's seeds (A/A copy, placebo), per grid cell

    @property
    def run_start_s(self) -> float:
        return RUN_START_S if self.est_remaining_s > 0 else 0.0

    @property
    def warmstart_s(self) -> float:
        return sum((w.est_s for w in self.warmstarts), 0.0)

    @property
    def est_wall_s(self) -> float:
        """Until the last remaining trial ends: the run's start, the warm starts to build (every
        trial that uses one waits for it), then the trials, ``workers`` at once."""
        return self.run_start_s + self.warmstart_s + self.est_remaining_s / self.workers

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "run_start_s": self.run_start_s,
            "warmstart_s": self.warmstart_s,
            "est_wall_s": self.est_wall_s,
        }


def _times(record: Any) -> tuple[float, float] | None:
    """A record's started_at and finished_at in epoch seconds (None when either does not parse)."""
    try:
        return (
            dt.datetime.fromisoformat(record.started_at).timestamp(),
            dt.datetime.fromisoformat(record.finished_at).timestamp(),
        )
    except (TypeError, ValueError):
        return None


def _usable(records: Iterable[Any]) -> list[tuple[Any, int, tuple[float, float] | None]]:
    """(record, its tokens, its times) for the completed records whose spec and wall time read."""
    out = []
    for rec in records:
        try:
            tokens = trial_tokens(TrialSpec.model_validate(rec.spec))
        except ValidationError:  # a record from an older schema: nothing measured from it
            continue
        if rec.wall_time_s > 0 and math.isfinite(rec.wall_time_s) and tokens > 0:
            out.append((rec, tokens, _times(rec)))
    return out


def measured_costs(records: Iterable[Any]) -> Costs:
    """Costs from completed records: medians, so the trial that built the warm start (and those
    that waited for it) do not set the rate; ``DEFAULT_COSTS`` when none can be read."""
    usable = _usable(records)
    if not usable:
        return DEFAULT_COSTS
    rates: dict[str, list[float]] = {}
    for rec, tokens, _ in usable:
        rates.setdefault(rec.arm, []).append(rec.wall_time_s / tokens)
    starts = [max(0.0, times[1] - times[0] - rec.wall_time_s) for rec, _, times in usable if times is not None]
    return Costs(
        start_s=statistics.median(starts) if starts else TRIAL_START_S,
        per_token={arm: statistics.median(values) for arm, values in rates.items()},
        overall=statistics.median(rec.wall_time_s / tokens for rec, tokens, _ in usable),
        measured_from=len(usable),
    )


def measured_run(records: Iterable[Any]) -> Measured | None:
    """How long the completed records took, and what the default costs say for the same trials."""
    timed = [(tokens, times) for _, tokens, times in _usable(records) if times is not None]
    if not timed:
        return None
    durations = [end - begin for _, (begin, end) in timed]
    return Measured(
        trials=len(timed),
        median_s=statistics.median(durations),
        default_median_s=statistics.median(TRIAL_START_S + tokens * SECONDS_PER_TOKEN for tokens, _ in timed),
        total_s=sum(durations),
        span_s=max(end for _, (_, end) in timed) - min(begin for _, (begin, _) in timed),
    )


def warm_starts(specs: Iterable[TrialSpec]) -> list[WarmStartPlan]:
    """The distinct warm starts of ``specs`` (warm start on), each cached here or to be built."""
    out: dict[str, WarmStartPlan] = {}
    for spec in specs:
        if not spec.warmstart.enabled:
            continue
        folder = cache_folder(spec)
        if str(folder) not in out:
            cached = (folder / MANIFEST_FILE).is_file()  # written last: the entry is complete
            steps = spec.warmstart.steps
            out[str(folder)] = WarmStartPlan(str(folder), cached, steps, 0.0 if cached else steps * SFT_STEP_S)
    return list(out.values())


def _overrides(arm: Arm, cell: Mapping[str, Any]) -> dict[str, Any]:
    return {**arm.set, **{f"train.{k}": v for k, v in arm.train.items()}, **cell}


def plan_study(
    study: Study, *, workers: int = 1, records: Iterable[Any] = (), probe: ProbedCosts | None = None
) -> StudyPlan:
    """The design of ``study`` and an estimate of its run time, without running anything.

    ``records`` are the study folder's trial records (``harness.tracking.records.read_records``):
    their completed ones count as done, measure the costs (``measured_costs``) and are compared
    with the defaults (``measured_run``). ``probe``: a real model's measured probe, which prices
    each trial (``probed_trial``) when no completed record does. See the module for what the
    estimate adds up.
    """
    if workers < 1:
        raise ConfigError(f"workers: must be at least 1, got {workers}")
    folder = study_dir(study)
    records = list(records)
    earlier = summary_lines(
        reason
        for r in records
        if r.phase == "compare"
        if (reason := earlier_design_of(study, r.spec, r.arm)) is not None
    )
    records = [r for r in records if r.status == "completed"]
    costs = measured_costs(records)
    if not costs.measured_from and probe is not None:
        costs = Costs(TRIAL_START_S, {}, SECONDS_PER_TOKEN, 0, probe)
    done_ids = {r.trial_id for r in records if r.phase == "compare"}
    rate_source = _rate_source(costs, probe, folder)
    design = _fixed_design(study, costs, done_ids) if study.tuning is None else _tuned_design(study, costs, records)
    n_compare = sum(p.trials for p in design.conditions)
    total = n_compare + (design.tuning.trials if design.tuning else 0)
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
        conditions=design.conditions,
        comparisons=comparisons(study),
        tuning=design.tuning,
        total_trials=total,
        done_trials=design.done,
        est_total_s=design.total_s,
        est_remaining_s=design.remaining_s,
        workers=workers,
        costs=costs,
        rate_source=rate_source,
        warmstarts=warm_starts(design.waiting),
        measured=measured_run(records),
        warnings=study_warnings(study) + _cost_warnings(study, costs),
        probed=probed_trial(costs.probe, design.waiting[0]) if costs.probe is not None and design.waiting else None,
        earlier_design=earlier,
        sequential=(
            {"looks": study.sequential.schedule(), "spending": study.sequential.spending}
            if study.sequential is not None
            else None
        ),
        compute_looks=(
            study.compute_looks.describe(study.primary_at, study.train.steps, study.min_effect)
            if study.compute_looks is not None
            else None
        ),
        followers=(study.calibration == "aa") + (study.placebo != "none"),
        **_control_sd(study, records),
    )


@dataclass(frozen=True)
class _Design:
    """The conditions (or tuned arms) a plan lists, with the trials done and the seconds estimated
    in all and still to run."""

    conditions: list[PlannedCondition]
    waiting: list[TrialSpec]  # one spec of each condition (or tuned arm) with trials to run
    total_s: float
    remaining_s: float
    done: int
    tuning: TuningPhase | None = None


def _rate_source(costs: Costs, probe: ProbedCosts | None, folder: Path) -> str:
    """Where the estimate's costs come from: completed records, a real model's probe or the defaults."""
    if costs.measured_from:
        return (
            f"costs measured from {costs.measured_from} completed record(s) in {folder / 'records'} "
            "(medians, per condition where it has records)"
        )
    if probe is not None:
        how = "cached from an earlier plan" if probe.cached else f"measured now ({probe.probe_s:.0f}s)"
        return (
            f"costs from a probe of {probe.model} ({probe.parameters / 1e6:.0f}M parameters) on this machine, {how}: "
            f"its load, one step of {probe.step_rows} rows and one evaluation of {probe.eval_prompts} prompts, "
            f"scaled to each trial's rows; completed records in {folder / 'records'} will replace it"
        )
    return (
        "costs: the defaults, measured on the 2-core development machine with the tiny testbed model "
        f"(harness.study.plan); completed records in {folder / 'records'} will replace them"
    )


def _fixed_design(study: Study, costs: Costs, done_ids: set[str]) -> _Design:
    """Every condition's trials (one per seed), the ones done, and their estimated seconds."""
    waiting: list[TrialSpec] = []
    planned: list[PlannedCondition] = []
    total_s = remaining_s = 0.0
    done_total = 0
    for c in study.iter_conditions():
        specs = [condition_spec(study, c, seed) for seed in study.condition_seeds(c)]
        est = costs.trial_s(specs[0])
        done = sum(s.trial_id in done_ids for s in specs)
        arm = study.arm(c.arm)
        planned.append(
            PlannedCondition(
                c.name,
                c.arm,
                arm.algorithm,
                _overrides(arm, condition_params(c)),
                len(specs),
                done,
                trial_tokens(specs[0]),
                est,
                c.role,
            )
        )
        if done < len(specs):
            waiting.append(specs[0])
        total_s += est * len(specs)
        remaining_s += est * (len(specs) - done)
        done_total += done
    return _Design(planned, waiting, total_s, remaining_s, done_total)


def _tuned_design(study: Study, costs: Costs, records: list[Any]) -> _Design:
    """A tuned study: each arm's tuning trials (its search on the tuning seeds), then its comparison
    on the study's seeds with the best settings found."""
    waiting: list[TrialSpec] = []
    planned: list[PlannedCondition] = []
    total_s = remaining_s = 0.0
    done_total = 0
    tuning = study.tuning
    per_arm_trials = tuning.n_trials * len(tuning.seeds)
    tune_done = tune_s = tune_remaining = 0.0
    for arm in study.arms:
        base = tuning_specs(study, arm.name, {}, tuning.seeds[0])
        est = costs.trial_s(base)
        ran = [r.phase for r in records if r.arm == arm.name]
        done = min(per_arm_trials, ran.count("tune"))
        tune_done += done
        tune_s += est * per_arm_trials
        tune_remaining += est * (per_arm_trials - done)
        compare_done = min(len(study.seeds), ran.count("compare"))
        if done < per_arm_trials or compare_done < len(study.seeds):
            waiting.append(base)
        planned.append(
            PlannedCondition(
                arm.name,
                arm.name,
                arm.algorithm,
                _overrides(arm, {}),
                len(study.seeds),
                compare_done,
                trial_tokens(base),
                est,
            )
        )
        total_s += est * len(study.seeds)
        remaining_s += est * (len(study.seeds) - compare_done)
        done_total += compare_done
    tuning_phase = TuningPhase(
        tuning.n_trials,
        list(tuning.seeds),
        {k: p.describe() for k, p in tuning.search_space.items()},
        per_arm_trials * len(study.arms),
        int(tune_done),
        tune_s,
    )
    total_s += tune_s
    remaining_s += tune_remaining
    done_total += int(tune_done)
    return _Design(planned, waiting, total_s, remaining_s, done_total, tuning_phase)


def _control_sd(study: Study, records: list[Any]) -> dict[str, Any]:
    """The sd of the control's trial means of the primary metric, from its completed comparison records (3 or more)."""
    values = [r.final.get(study.primary_metric) for r in records if r.arm == study.control and r.phase == "compare"]
    values = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if len(values) < 3 or statistics.stdev(values) <= 0:
        return {}
    return {"control_sd": statistics.stdev(values), "control_sd_from": len(values)}


def _cost_warnings(study: Study, costs: Costs) -> list[str]:
    return _probe_warnings(study, costs) + _served_sampling_warnings(study, costs)


def _served_sampling_warnings(study: Study, costs: Costs) -> list[str]:
    """A study that samples with vLLM, priced without its records: the costs are the in-process
    sampler's, while a server's start and its sampling speed (slower than ``hf`` for LoRA on a
    small CPU, faster on a GPU) are not in them."""
    served = [arm.name for arm in study.arms if arm_rollout(study, arm, {}, arm.name).backend == "vllm"]
    if costs.measured_from or not served:
        return []
    return [
        f"{', '.join(served)}: rollout.backend vllm, priced as if the trial process sampled (hf); the vLLM "
        "server's start and its own sampling speed are not in the estimate; run one trial and plan again: its "
        "completed records replace it"
    ]


def _probe_warnings(study: Study, costs: Costs) -> list[str]:
    probe = costs.probe
    if probe is not None and not costs.measured_from and probe.load_average > probe.cpus:
        return [
            f"the cost probe of {probe.model} ran while the machine was busy (load average {probe.load_average:.1f} "
            f"on {probe.cpus} CPUs): its estimate is too high; plan again with --reprobe when the machine is idle"
        ]
    if costs.measured_from or probe is not None or study.model.name == "tiny":
        return []
    return [
        f"model {study.model.name}: the default costs are the tiny testbed model's, and a real model's trials "
        "take far longer (loading it, bigger steps); run the study (or one trial) and plan again: its completed "
        "records replace the defaults"
    ]


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
