"""Sequential studies, replayed look by look on the trials each look had.

A sequential study (``sequential:``) looks at n_1 < ... < n_K seeds per arm, taken in order from
its seed pool. The replay walks the looks: at look k every comparison still undecided whose
look is complete (every trial of both sides on the pool's first n_k seeds finished) is tested on
those seeds, and read on the repeated confidence interval of its look (``stats.Look``), with the
family of all pre-registered comparisons for Bonferroni. The first look at which a comparison
is decided gives its verdict, and its arm stops there; the control goes on while any arm needs
it. A look whose seeds bring no new information (every new trial failed) spends no alpha.

Every look is read under the rule fixed at the study's first look
(:mod:`.versions`): a study file or options that would read them under
another are refused before anything is read, and the Looks table names the rule of each row.

The replay is a pure function of the stored trials, so every machine computes the same looks:
the runner asks it which conditions need which look next (``Replay.wanted``, through
:mod:`.schedule`). The boundaries are :mod:`harness.stats.sequential`'s (``stats.Look``). Failed trials at
the last look leave its information short of the maximum, so some alpha stays unspent there
(conservative).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pandas as pd

from harness import stats
from harness.decide.comparisons import ArmScores, PairResult, compare_scores, compare_under
from harness.decide.frames import MIN_SEEDS_FOR_TEST, comparisons_of, meta_of
from harness.decide.rules import DecisionRules
from harness.decide.sequential.pools import look_pool
from harness.decide.sequential.versions import RuleVersions, read_rules
from harness.tracking.study_meta import StudyMeta

#: trial states after which a trial's result will not change (a retried failure is "waiting")
FINISHED = ("completed", "failed")
LOOK_COLUMNS = [
    "condition",
    "control",
    "look",
    "seeds",
    "n",
    "n_control",
    "diff",
    "ci_low",
    "ci_high",
    "ci_level",
    "p_adjusted",
    "verdict",
    "decision",
    "rule",
]
#: the Looks table's rule of a study whose looks were queued before rules were stored
UNRECORDED = "not recorded"


@dataclass
class PairState:
    """Where one comparison stands in the replay."""

    pair: PairResult | None = None  # at the latest look it was tested at
    look: stats.Look | None = None
    tested_at: int | None = None  # 0-based look of ``pair``
    verdict: str = stats.verdict.INCONCLUSIVE
    stopped_at: int | None = None  # 0-based look that decided it
    reached: int = -1  # the last complete look
    waiting: int | None = None  # the look it waits for (trials missing or unfinished)
    seen: tuple[int, ...] = ()

    @property
    def status(self) -> str:
        if self.stopped_at is not None:
            return f"stopped at look {self.stopped_at + 1}: {self.verdict}"
        if self.waiting is not None:
            return f"waiting for look {self.waiting + 1}"
        return "undecided after the last look"


@dataclass
class Replay:
    looks: list[int]
    spending: str
    table: pd.DataFrame
    rules: RuleVersions
    states: dict[tuple[str, str], PairState] = field(default_factory=dict)
    #: condition -> the 0-based look whose trials it needs next (enqueue them if missing)
    wanted: dict[str, int] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return not self.wanted and all(s.waiting is None for s in self.states.values())

    @property
    def current_look(self) -> int:
        """The 1-based look the study is at: the furthest any comparison has reached or waits for."""
        marks = [s.waiting if s.waiting is not None else s.reached for s in self.states.values()]
        return max(marks, default=-1) + 1


def _look_trials(trials: pd.DataFrame, condition: str, seeds: list[int]) -> tuple[bool, bool]:
    """(every seed has a trial, all of them finished) for ``condition`` on ``seeds``."""
    rows = trials[(trials["arm"] == condition) & trials["seed"].isin(seeds)]
    present = set(rows["seed"].astype(int)) >= set(seeds)
    return present, present and bool(rows["status"].isin(FINISHED).all())


def on_pool(scores: ArmScores, seeds: list[int]) -> ArmScores:
    """``scores`` on those of ``seeds`` it has: the per-seed values and the seed x prompt table alike."""
    keep = scores.values.index.isin(seeds)
    table = None if scores.table is None else scores.table.loc[scores.table.index.isin(seeds)]
    return dataclasses.replace(scores, values=scores.values[keep], table=table)


@dataclass(frozen=True)
class _Reading:
    """What every comparison's walk through the looks reads."""

    results: object
    scores: dict[str, ArmScores]
    rules: DecisionRules
    looks: list[int]
    spending: str
    family: int  # the comparisons Bonferroni divides alpha among
    rule: str  # the label of the rule the looks are read under (the Looks table's column)


def replay(results, scores: dict[str, ArmScores], rules: DecisionRules) -> Replay:
    """Every comparison of a sequential study, look by look (see the module docstring), under
    ``rules``; a rule other than the one fixed at the first look raises ``RuleChanged``."""
    meta = meta_of(results)
    versions = read_rules(results, rules)
    pairs = comparisons_of(results)
    reading = _Reading(
        results,
        scores,
        rules,
        looks=list(meta.sequential.looks),
        spending=meta.sequential.spending,
        family=len(pairs) if rules.correction == "bonferroni" else 1,
        rule=versions.in_force.label if versions.in_force is not None else UNRECORDED,
    )
    rows, states, wanted = [], {}, {}
    for condition, control in pairs:
        states[(condition, control)] = _walk_looks(reading, condition, control, rows, wanted)
    _follow_controls(meta, results.trials, reading.looks, wanted)
    table = pd.DataFrame(rows, columns=LOOK_COLUMNS)
    return Replay(reading.looks, reading.spending, table, versions, states, wanted)


def _walk_looks(reading: _Reading, condition: str, control: str, rows: list[dict], wanted: dict[str, int]) -> PairState:
    """One comparison through the looks: each complete look is read until one decides it (its
    rows added to ``rows``); the first look not complete is the one it waits for, and where its
    trials are missing, ``wanted`` asks for them."""
    meta, trials = meta_of(reading.results), reading.results.trials
    state = PairState()
    for k, n_k in enumerate(reading.looks):
        checks = [_look_trials(trials, c, look_pool(meta, c, n_k)) for c in (condition, control)]
        if not all(done for _, done in checks):
            state.waiting = k
            if not all(present for present, _ in checks):
                for c in (condition, control):
                    wanted[c] = max(wanted.get(c, k), k)
            break
        state.reached = k
        row = _read_look(reading, state, condition, control, k)
        if row is None:
            continue  # nothing new to read at this look: it spends no alpha
        rows.append(row)
        if row["decision"] == "stop":
            state.verdict, state.stopped_at = row["verdict"], k
            break
    return state


def _read_look(reading: _Reading, state: PairState, condition: str, control: str, k: int) -> dict | None:
    """Test the comparison on the seeds of look ``k`` and read it on the look's repeated
    interval (``state`` moves on to it); its row of the Looks table, or None when the look adds
    no information (no new testable seed)."""
    meta, rules, looks = meta_of(reading.results), reading.rules, reading.looks
    n_k = looks[k]
    pair = compare_scores(
        on_pool(reading.scores[condition], look_pool(meta, condition, n_k)),
        on_pool(reading.scores[control], look_pool(meta, control, n_k)),
        condition,
        control,
        rules.metric,
        seed_matched=meta.seed_matched,
        test=rules.test,
        failures=rules.failures,
        robustness=False,
    )
    count = min(pair.difference.n_arm, pair.difference.n_control)
    if not pair.difference.testable or count < MIN_SEEDS_FOR_TEST or (state.seen and count <= state.seen[-1]):
        return None
    state.seen += (count,)
    state.pair, state.look, state.tested_at = pair, stats.Look(state.seen, looks[-1], reading.spending), k
    [verdict] = stats.decide(
        [pair.difference],
        alpha=rules.alpha,
        direction=rules.direction,
        min_effect=rules.min_effect,
        correction=rules.correction,
        looks=[state.look],
        family_size=reading.family,
    )
    decided = verdict.label != stats.verdict.INCONCLUSIVE
    return {
        "condition": condition,
        "control": control,
        "look": k + 1,
        "seeds": n_k,
        "n": pair.difference.n_arm,
        "n_control": pair.difference.n_control,
        "diff": verdict.diff,
        "ci_low": verdict.ci_low,
        "ci_high": verdict.ci_high,
        "ci_level": verdict.ci_level,
        "p_adjusted": verdict.p_adjusted,
        "verdict": verdict.label,
        "decision": "stop" if decided else ("last look" if k == len(looks) - 1 else "continue"),
        "rule": reading.rule,
    }


def _follow_controls(meta: StudyMeta, trials: pd.DataFrame, looks: list[int], wanted: dict[str, int]) -> None:
    """A calibration condition (A/A copy, placebo) takes the seeds its control has, look by look;
    it never asks for seeds of its own."""
    for condition, control in meta.mirrors.items():
        has = [k for k, n in enumerate(looks) if _look_trials(trials, control, look_pool(meta, control, n))[0]]
        target = max([*has, wanted.get(control, -1)])
        if target >= 0 and not _look_trials(trials, condition, look_pool(meta, condition, looks[target]))[0]:
            wanted[condition] = target


def final_pairs(
    rep: Replay, results, scores: dict[str, ArmScores], rules: DecisionRules
) -> tuple[list[PairResult], list[stats.Look | None]]:
    """Each comparison on the seeds of the look that decided it (or of its latest look), with its
    robustness checks, and that look; one not yet tested at any look is untestable, saying why."""
    meta = meta_of(results)
    pairs, looks = [], []
    for (condition, control), state in rep.states.items():
        n = rep.looks[0 if state.tested_at is None else state.tested_at]
        pair = compare_under(
            rules,
            on_pool(scores[condition], look_pool(meta, condition, n)),
            on_pool(scores[control], look_pool(meta, control, n)),
            condition,
            control,
            seed_matched=meta.seed_matched,
            robustness=state.tested_at is not None,
        )
        if state.tested_at is None:
            why = f"not tested yet: {state.status} ({rep.looks[state.waiting or 0]} seeds per arm)"
            pair = dataclasses.replace(pair, difference=dataclasses.replace(pair.difference, reason=why))
        pairs.append(pair)
        looks.append(state.look)
    return pairs, looks


def design_line(rep: Replay) -> str:
    """One line for the report's header: the looks, where the study is, and each arm's state."""
    seeds = ", ".join(map(str, rep.looks))
    states = "; ".join(f"{condition}: {state.status}" for (condition, _), state in rep.states.items())
    at = "finished" if rep.finished else f"at look {rep.current_look} of {len(rep.looks)}"
    return f"sequential, looks at {seeds} seeds per arm ({rep.spending.replace('_', '-')} spending); {at}" + (
        f"; {states}" if states else ""
    )
