"""Looks over compute, replayed on the stored trials: where each arm stopped, the verdicts at the
budget, and the compute the design spent.

A study with ``compute_looks:`` reads every arm at fractions f_1 < ... < f_K = 1 of its budget
(``primary_at``'s; under ``point: final``, of ``train.steps`` on the step axis). Look k reads each
trial's curve at its point ``f_k * budget`` by the ``primary_at`` machinery
(:mod:`harness.decide.compute_budget`: interpolated between the evaluations that bracket it, or
the mean of the curve up to it under ``auc``) and tests each running arm against its reference
with the study's own test (:func:`~harness.decide.comparisons.compare_scores`) at the look's
share of alpha (:func:`harness.stats.compute_looks.look_alphas`, Bonferroni over the
pre-registered comparisons, or over every pair of conditions under ``against: best``). An arm is
stopped at an interim look when its interval, oriented so that positive is better, lies below
``-catch_up`` (:func:`harness.stats.compute_looks.stops`); its verdict is "worse". The last look
is the study's own reading at the budget, with the alpha the interim looks left, against the
control: better, worse, equivalent or inconclusive. The control, and the calibration conditions
that follow it, never stop (the final verdicts read them).

With ``forecast: true`` an interim look also forecasts each arm still running at the budget from
its seeds' curves up to the look (:func:`harness.decide.forecast.forecast_look`: the saturating
fit, seed and prompt jackknife, out-of-sample widening) and calls its comparison with the control
early, stopping the arm, when the forecast interval decides it (better, worse or equivalent). The
look's share of alpha is then split evenly between the stop rule and the forecast (Bonferroni:
the two together spend no more than the look's share), the forecasts adjusted over the
pre-registered comparisons. Every such call is marked a forecast in the table, the stop's reason
and the report's line.

The replay is a pure function of the stored trials, so the runner asks it which arms go on after
a look (:meth:`ComputeReplay.after_look`). A trial has reached look k when its primary metric's
curve reaches the look's point (a trial paused after look k ends there) or it has finished (a
completed trial short of the point is left out, as the primary comparison leaves it out; a
failed one counts as the failure policy says). An arm any of whose seeds has not reached the
point is waiting for that look, and under ``against: best`` every running arm waits until all
have reached it (the best is read among them all).

Compute spent: a stopped trial would have trained to the first history row at or past its look's
point (a segmented trial pauses there), so it spends the axis value of that row; every other
trial spends the value at the budget's point. Summed over seeds, against every trial run to the
budget.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness import stats
from harness.decide.comparisons import ArmScores, arm_scores, compare_scores
from harness.decide.compute_budget import at_point
from harness.decide.forecast import LookForecast, forecast_look
from harness.decide.frames import comparisons_of, conditions_of, meta_of
from harness.decide.rules import DecisionRules
from harness.errors import ConfigError
from harness.stats import compute_looks as looks_stats
from harness.study.sections import AXIS_UNITS, amount
from harness.tracking.study_meta import ComputeLookDesign, StudyMeta

#: trial states after which a trial's result will not change
FINISHED = ("completed", "failed")
LOOK_COLUMNS = [
    "condition",
    "reference",
    "look",
    "fraction",
    "point",
    "n",
    "n_reference",
    "diff",
    "ci_low",
    "ci_high",
    "ci_level",
    "verdict",
    "decision",
]
#: the reason of an arm that no look stopped and the budget read
RAN_TO_BUDGET = "ran to the budget"
#: the final verdict of an arm whose reading at the budget is still to come
WAITING = "waiting"
#: the Looks table's decision of a comparison a forecast called early (the arm trains no more)
CALLED = "called (forecast)"
#: ... and of one it did not call (the arm goes on)
NOT_CALLED = "go on (forecast)"


@dataclass(frozen=True)
class ArmStop:
    """Where one condition stands: the 1-based look that stopped it and its point (None: not
    stopped), and why (or "ran to the budget", or what it waits for); ``forecast``: the stop was
    a verdict called early from the fitted curve, not the stop rule."""

    condition: str
    look: int | None
    point: float | None
    reason: str
    forecast: bool = False


@dataclass(frozen=True)
class ArmCompute:
    """The compute one condition spent on the axis, summed over its seeds: under the design (its
    stop), and had it run to the budget."""

    condition: str
    spent: float
    full: float

    @property
    def saving(self) -> float:
        """The share of its full compute the design saved (0 when it spent nothing)."""
        return 1.0 - self.spent / self.full if self.full > 0 else 0.0


@dataclass(frozen=True)
class AfterLook:
    """The runner's answer after look k (0-based): the conditions that train on to the next look,
    those stopped at or before it, and those whose seeds have not all reached it yet."""

    look: int
    go_on: list[str]
    stopped: list[str]
    waiting: list[str]


@dataclass(frozen=True)
class ComputeReplay:
    """A compute-look study replayed on its trials (see the module docstring)."""

    design: ComputeLookDesign
    alphas: tuple[float, ...]  # each look's share of alpha (before the multiplicity)
    table: pd.DataFrame  # the Looks table: one row per arm and look read (LOOK_COLUMNS)
    stops: dict[str, ArmStop]  # every condition, in the study's order
    verdicts: dict[str, str]  # compared condition -> its verdict ("worse" when stopped; "waiting")
    compute: dict[str, ArmCompute]  # every condition
    waiting: dict[str, int]  # condition -> the 0-based look whose trials it waits for

    @property
    def spent(self) -> float:
        return float(sum(c.spent for c in self.compute.values()))

    @property
    def full(self) -> float:
        return float(sum(c.full for c in self.compute.values()))

    @property
    def saving(self) -> float:
        """The share of the full design's compute the stops saved (0 when nothing was spent)."""
        return 1.0 - self.spent / self.full if self.full > 0 else 0.0

    @property
    def finished(self) -> bool:
        return not self.waiting

    def after_look(self, look: int) -> AfterLook:
        """Which conditions go on after the 0-based ``look``: not stopped at or before it, and
        every seed read there (those not yet read are waiting; they cannot be stopped yet)."""
        if not 0 <= look < len(self.design.at):
            raise ValueError(f"look must be 0..{len(self.design.at) - 1}; got {look}")
        stopped = [c for c, s in self.stops.items() if s.look is not None and s.look - 1 <= look]
        waiting = [c for c, k in self.waiting.items() if k <= look and c not in stopped]
        go_on = [c for c in self.stops if c not in stopped and c not in waiting]
        return AfterLook(look, go_on if look < len(self.design.at) - 1 else [], stopped, waiting)

    def line(self) -> str:
        """One line for a report's header: the looks, the stops and the compute saved."""
        design = self.design
        points = ", ".join(f"{f:g} ({amount(p)})" for f, p in zip(design.at, design.points))
        stopped = [
            f"{c} at look {s.look}" + (f" (forecast: {self.verdicts[c]})" if s.forecast else "")
            for c, s in self.stops.items()
            if s.look is not None
        ]
        forecasts = (
            "; forecasts on: every verdict called before the budget by a forecast is a prediction of the value "
            "at the budget from the curves up to its look, not a reading of it"
            if design.forecast
            else ""
        )
        return (
            f"compute looks at {points} {AXIS_UNITS.get(design.axis, design.axis)} "
            f"({design.spending.replace('_', '-')} spending, catch-up {design.catch_up:g}, against the {design.against}"
            f"); stopped: {', '.join(stopped) or 'none'}; compute spent {amount(self.spent)} of {amount(self.full)} "
            f"({self.saving:.0%} saved){forecasts}"
        )


# ----------------------------------------------------------------------------- reading a look


@dataclass
class _LookView:
    """The study's results as look k reads them: the primary comparison at the look's point."""

    trials: pd.DataFrame
    curves: pd.DataFrame | None
    meta: StudyMeta
    prompts: pd.DataFrame | None


def _look_meta(meta: StudyMeta, design: ComputeLookDesign, k: int) -> StudyMeta:
    """The meta whose ``primary_at`` reads look k's point (the last look: the study's own)."""
    if k == len(design.at) - 1:
        return meta
    point = {"point": design.point, "axis": design.axis, "budget": design.points[k]}
    return dataclasses.replace(meta, primary_at=point)


def _seeds_of(meta: StudyMeta, trials: pd.DataFrame, condition: str) -> set[int]:
    """The seeds a condition runs: its pool, the study's, or (a table without them) those it has."""
    pool = meta.seed_pools.get(condition) or meta.seeds
    if pool:
        return {int(s) for s in pool}
    return {int(s) for s in trials.loc[trials["arm"] == condition, "seed"]}


def _read_look(results, rules: DecisionRules, design: ComputeLookDesign, k: int, conditions: list[str]):
    """Each condition's scores at look k, the conditions not every seed of which reached it, and
    the results as the look sees them (a trial paused at it read as completed)."""
    meta = meta_of(results)
    trials = results.trials
    view = _LookView(trials, results.curves, _look_meta(meta, design, k), getattr(results, "prompts", None))
    last = k == len(design.at) - 1
    if not last:  # a trial in progress whose curve reaches the point is read there
        running = ~trials["status"].isin(FINISHED)
        view.trials = trials.assign(status=np.where(running, "completed", trials["status"]))
    short = {s.trial_id for s in at_point(view, rules.metric).shortfalls} if not last else set()
    waiting = []
    for condition in conditions:
        rows = trials[trials["arm"] == condition]
        present = set(rows["seed"].astype(int))
        unfinished = ~rows["status"].isin(FINISHED) & (rows["trial_id"].isin(short) | last)
        if not _seeds_of(meta, trials, condition) <= present or unfinished.any():
            waiting.append(condition)
    if short:  # those in progress short of the point are not read (their arm waits)
        in_progress = trials["trial_id"].isin(short) & ~trials["status"].isin(FINISHED)
        view.trials = view.trials[~in_progress]
    scores = {c: arm_scores(view, c, rules.metric, failures=rules.failures) for c in conditions if c not in waiting}
    return scores, waiting, view


def _row(condition, reference, k, design, difference, verdict, label, decision) -> dict:
    """One row of the Looks table; a look with nothing read (a forecast it could not make,
    ``difference`` and ``verdict`` None) has NaN for the numbers."""
    return {
        "condition": condition,
        "reference": reference,
        "look": k + 1,
        "fraction": design.at[k],
        "point": design.points[k],
        "n": difference.n_arm if difference is not None else np.nan,
        "n_reference": difference.n_control if difference is not None else np.nan,
        **{
            key: getattr(verdict, key) if verdict is not None else np.nan
            for key in ("diff", "ci_low", "ci_high", "ci_level")
        },
        "verdict": label,
        "decision": decision,
    }


# ----------------------------------------------------------------------------- the replay


def replay_compute_looks(results, rules: DecisionRules) -> ComputeReplay:
    """Every arm of a compute-look study through its looks (see the module docstring), under
    ``rules`` (the study's metric, test, failure policy, direction and min_effect; alpha and
    correction as the caller reads them). The arms of each control (one per grid cell) are walked
    together: under ``against: best`` the best is read among them and their control."""
    meta = meta_of(results)
    design = meta.compute_looks
    if design is None:
        raise ConfigError(f"study {meta.study!r} has no compute_looks: section; it has no compute looks")
    pairs = comparisons_of(results)
    groups: dict[str, list[str]] = {}
    for condition, control in pairs:
        groups.setdefault(control, []).append(condition)
    bonferroni = rules.correction == "bonferroni"
    if design.against == "control":
        family = len(pairs)
    else:
        family = sum(looks_stats.pairs_family(len(arms) + 1) for arms in groups.values())
    walk = _Walk(
        results,
        rules,
        design,
        looks_stats.look_alphas(design.at, rules.alpha, design.spending),
        family=family if bonferroni else 1,
        final_family=len(pairs) if bonferroni else 1,
    )
    for control, arms in groups.items():
        walk.group(control, arms)
    stops = {}
    for condition in conditions_of(results):
        if condition in walk.stops:
            stops[condition] = walk.stops[condition]
        elif condition in walk.waiting:
            stops[condition] = ArmStop(condition, None, None, f"waiting for look {walk.waiting[condition] + 1}")
            walk.verdicts[condition] = WAITING
        else:
            stops[condition] = ArmStop(condition, None, None, RAN_TO_BUDGET)
    return ComputeReplay(
        design,
        tuple(float(a) for a in walk.alphas),
        pd.DataFrame(walk.rows, columns=LOOK_COLUMNS),
        stops,
        walk.verdicts,
        _compute(results, design, stops),
        walk.waiting,
    )


@dataclass
class _Walk:
    """The looks walked one control's arms at a time, collecting the table, stops and verdicts."""

    results: object
    rules: DecisionRules
    design: ComputeLookDesign
    alphas: np.ndarray
    family: int  # the interim looks' Bonferroni family
    final_family: int  # the budget's: the pre-registered comparisons
    rows: list[dict] = dataclasses.field(default_factory=list)
    stops: dict[str, ArmStop] = dataclasses.field(default_factory=dict)
    verdicts: dict[str, str] = dataclasses.field(default_factory=dict)
    waiting: dict[str, int] = dataclasses.field(default_factory=dict)

    def group(self, control: str, arms: list[str]) -> None:
        """One control's arms through the looks, until each stops, waits or is read at the budget."""
        design, running = self.design, list(arms)
        for k in range(len(design.at)):
            if not running:
                return
            last = k == len(design.at) - 1
            scores, unread, view = _read_look(self.results, self.rules, design, k, [*running, control])
            if control in unread or (design.against == "best" and unread and not last):
                unread = running  # every comparison of the look needs the control (or, for the best, all)
            self.waiting.update({c: k for c in running if c in unread})
            running = [c for c in running if c not in unread]
            if last:
                for condition in running:
                    self._final(scores, condition, control, k)
            elif self.alphas[k] > 0:  # a look so early that its function spends nothing cannot stop an arm
                # with forecasts on, the stop rule and the forecast each spend half the look's share
                share = self.alphas[k] / 2 if design.forecast else self.alphas[k]
                reference = control if design.against == "control" else self._best(scores, [*running, control])
                for condition in [c for c in running if c != reference]:
                    self._interim(scores, condition, reference, k, share)
                running = [c for c in running if c not in self.stops]
                if design.forecast and running:
                    calls = forecast_look(
                        view,
                        self.rules,
                        look=design.points[k],
                        budget=design.points[-1],
                        alpha=share,
                        pairs=[(c, control) for c in running],
                        axis=design.axis,
                        family_size=self.final_family,
                    )
                    for call in calls:
                        self._forecast(call, k)
                    running = [c for c in running if c not in self.stops]

    def _best(self, scores: dict[str, ArmScores], conditions: list[str]) -> str:
        """The condition with the best mean over its seeds at the look."""
        means = {c: float(scores[c].values.mean()) for c in conditions if len(scores[c].values)}
        if not means:  # no condition has a seed read here: nothing is stopped against anything
            return conditions[-1]
        pick = max if self.rules.direction == "maximize" else min
        return pick(means, key=means.get)

    def _test(self, scores, condition, reference, alpha, family) -> tuple[stats.Difference, stats.Verdict]:
        rules = self.rules
        pair = compare_scores(
            scores[condition],
            scores[reference],
            condition,
            reference,
            rules.metric,
            seed_matched=meta_of(self.results).seed_matched,
            test=rules.test,
            failures=rules.failures,
            robustness=False,
        )
        [verdict] = stats.decide(
            [pair.difference],
            alpha=float(alpha),
            direction=rules.direction,
            min_effect=rules.min_effect,
            correction=rules.correction,
            family_size=family,
        )
        return pair.difference, verdict

    def _interim(self, scores, condition: str, reference: str, k: int, alpha: float) -> None:
        design = self.design
        difference, verdict = self._test(scores, condition, reference, alpha, self.family)
        # the upper end of the interval of (arm - reference) with positive meaning better
        upper = verdict.ci_high if self.rules.direction == "maximize" else -verdict.ci_low
        stop = difference.testable and bool(looks_stats.stops(upper, design.catch_up))
        label = stats.verdict.WORSE if stop else "not decided worse"
        self.rows.append(_row(condition, reference, k, design, difference, verdict, label, "stop" if stop else "go on"))
        if stop:
            self.stops[condition] = ArmStop(
                condition,
                k + 1,
                design.points[k],
                f"worse than {reference} by more than the catch-up allowance {design.catch_up:g} at "
                f"{design.at[k]:.0%} of the budget (upper end {upper:+.3g} at {verdict.ci_level:.4%})",
            )
            self.verdicts[condition] = stats.verdict.WORSE

    def _forecast(self, call: LookForecast, k: int) -> None:
        """One arm's forecast at look k: its row, and where the forecast decides the comparison,
        the call (the arm stops there with the forecast's verdict)."""
        design, called = self.design, call.verdict
        difference = called.forecast_of.difference() if called.forecast_of is not None else None
        decision = CALLED if called.called else NOT_CALLED
        self.rows.append(_row(call.arm, call.reference, k, design, difference, called.verdict, called.label, decision))
        if called.called:
            self.stops[call.arm] = ArmStop(
                call.arm,
                k + 1,
                design.points[k],
                f"called {called.label} at {design.at[k]:.0%} of the budget: {called.reason}",
                forecast=True,
            )
            self.verdicts[call.arm] = called.label

    def _final(self, scores, condition: str, control: str, k: int) -> None:
        difference, verdict = self._test(scores, condition, control, self.alphas[k], self.final_family)
        self.verdicts[condition] = verdict.label
        self.rows.append(_row(condition, control, k, self.design, difference, verdict, verdict.label, "budget"))


# ----------------------------------------------------------------------------- compute spent


def _axis_rows(curves: pd.DataFrame, axis: str) -> dict[str, np.ndarray]:
    """trial id -> the axis at each of its history rows, in step order."""
    if curves is None or not len(curves):
        return {}
    if axis == "step":
        return {t: np.unique(g["step"].to_numpy(dtype=float)) for t, g in curves.groupby("trial_id")}
    rows = curves[curves["metric"] == axis].drop_duplicates(["trial_id", "step"], keep="last").sort_values("step")
    return {t: pd.to_numeric(g["value"], errors="coerce").to_numpy(dtype=float) for t, g in rows.groupby("trial_id")}


def spent_to(axis: np.ndarray, point: float) -> float:
    """What a trial spends on the axis to reach ``point``: its first history row at or past it
    (the row a segment pauses at), or all it ran where it stops short (NaN where it has no row)."""
    axis = axis[np.isfinite(axis)]
    if not len(axis):
        return float("nan")
    past = axis[axis >= point]
    return float(past[0]) if len(past) else float(axis[-1])


def _compute(results, design: ComputeLookDesign, stops: dict[str, ArmStop]) -> dict[str, ArmCompute]:
    """Each condition's compute under the design and run to the budget, summed over its trials
    (a trial that recorded no axis counts 0 on both sides). A trial that stopped at a look (run in
    segments, it never trained past it) counts the budget's point as what running to the budget
    would have spent: exact on the step axis, the least it would have spent on a compute axis
    (its last evaluation would have fallen at or past the budget)."""
    by_trial = _axis_rows(results.curves, design.axis)
    budget = design.points[-1]
    out = {}
    for condition, stop in stops.items():
        trials = results.trials.loc[results.trials["arm"] == condition, "trial_id"]
        point = stop.point if stop.point is not None else budget
        spent = full = 0.0
        for trial in trials:
            axis = by_trial.get(trial)
            if axis is None:
                continue
            to_budget = spent_to(axis, budget) if np.nanmax(axis, initial=-np.inf) >= budget else budget
            reach = spent_to(axis, point), to_budget
            if all(np.isfinite(reach)):
                spent, full = spent + reach[0], full + reach[1]
        out[condition] = ArmCompute(condition, spent, full)
    return out


# ----------------------------------------------------------------------------- the verdict table


def verdicts_under_looks(verdicts: pd.DataFrame, replay: ComputeReplay) -> pd.DataFrame:
    """The verdict table as the looks decided it: a stopped arm's row is its stop look's (verdict
    "worse", that look's interval and level, why in ``reason``); an arm read at the budget takes
    the budget look's verdict and interval (at the alpha the interim looks left); an arm still
    waiting for a look is inconclusive, saying which. Other columns stay the fixed reading's."""
    out = verdicts.copy()
    table = replay.table
    for i, row in out.iterrows():
        condition = row["condition"]
        stop = replay.stops.get(condition)
        if stop is None:
            continue
        if stop.look is not None:
            read = table[(table["condition"] == condition) & (table["look"] == stop.look)]
            why = f"stopped at look {stop.look} ({amount(stop.point)}): {stop.reason}"
        else:
            read = table[(table["condition"] == condition) & (table["decision"] == "budget")]
            why = f"read at the budget after {len(replay.design.at) - 1} interim look(s): {stop.reason}"
        if not len(read):  # waiting for a look: nothing decided yet
            out.loc[i, ["verdict", "reason"]] = [stats.verdict.INCONCLUSIVE, stop.reason]
            continue
        first = read.iloc[-1]  # a look that forecast an arm the stop rule let go on: the forecast's row
        verdict = replay.verdicts.get(condition, first["verdict"])
        out.loc[i, ["diff", "ci_low", "ci_high", "ci_level", "verdict"]] = [
            first["diff"],
            first["ci_low"],
            first["ci_high"],
            first["ci_level"],
            verdict,
        ]
        out.loc[i, ["n", "n_control"]] = [first["n"], first["n_reference"]]
        out.loc[i, "reason"] = why
    return out
