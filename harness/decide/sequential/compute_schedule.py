"""What a compute-look study needs next: the runner's one question, for looks over compute.

The runner asks :meth:`ComputeSchedule.due` after its queue changed (a segment finished), as it
asks :class:`~.schedule.Schedule` for a sequential study. The answer is the compute-look replay
(:func:`.compute.replay_compute_looks`) on every trial stored so far, each design trial read as
its furthest segment (``harness.tracking.segments``), under the study's own decision settings
(alpha 0.05 with Bonferroni across the pre-registered comparisons, as the report reads them),
under the rule fixed when its first segments were queued (:mod:`.versions`: a study file that
changes it is refused here, for every caller, as for the seed looks):

- look 0's segment of every trial is due from the start;
- after look k, the segment k+1 of every trial of a condition that goes on (not stopped at or
  before look k, every seed read there; ``ComputeReplay.after_look``) whose segment k completed
  is due; a trial whose segment failed cannot resume, so it stops there (its failure counts as
  the study's failure policy says);
- a control trains on past a look only once an arm compared with it goes on past that look (it
  waits for its arms' reading, as they do), and once every arm of its cell is stopped it has
  nothing left to be compared with: it stops too.

A storage that cannot be read raises ``StorageUnreadable`` (the loader's own), as for the seed
looks: a replay on part of the trials could stop an arm too early.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from harness.decide.frames import comparisons_of, conditions_of
from harness.decide.rules import DecisionRules, ReadOptions
from harness.decide.sequential.compute import ComputeReplay, replay_compute_looks
from harness.decide.sequential.rule import ALPHA, CORRECTION
from harness.decide.sequential.schedule import Due, fixed_first, replayed_state
from harness.decide.sequential.segments import due_segments
from harness.decide.sequential.versions import RuleVersions, read_rules
from harness.errors import ConfigError
from harness.tracking.results import PARAM_PREFIX
from harness.tracking.segments import PAUSED

RUN_TO = PARAM_PREFIX + "looks.run_to"


@dataclass(frozen=True)
class ComputeState:
    """Where a compute-look study stands."""

    replay: ComputeReplay
    #: condition -> {look: the seeds whose segment of that look may run now}
    ready: dict[str, dict[int, list[int]]]
    #: the conditions that train no more before the budget: stopped by a look, or a control left
    #: with no arm to compare
    ended: list[str]
    #: the rule in force (None until fixed), the study file's, and the stored versions
    rules: RuleVersions

    @property
    def total(self) -> int:
        return len(self.replay.design.at)

    @property
    def finished(self) -> bool:
        return self.replay.finished

    @property
    def current_look(self) -> int:
        """The 1-based look the study is at: the furthest any condition has been queued for."""
        return max((look for by_look in self.ready.values() for look in by_look), default=0) + 1

    def lines(self) -> list[str]:
        """Where the study stands: its current look, each condition's state, the compute spent."""
        rep = self.replay
        head = f"compute looks: look {min(self.current_look, self.total)} of {self.total}" + (
            " (finished)" if self.finished else ""
        )
        width = max((len(c) for c in rep.stops), default=0)
        rows = []
        for condition, stop in rep.stops.items():
            verdict = rep.verdicts.get(condition)
            state = f"stopped at look {stop.look}: {verdict}" if stop.look is not None else stop.reason
            if stop.look is None and verdict not in (None, "waiting"):
                state = f"read at the budget: {verdict}"
            rows.append(f"  {condition:<{width}}  {state}")
        spent = f"  compute spent {rep.spent:.4g} of {rep.full:.4g} run to the budget ({rep.saving:.0%} saved)"
        return [head, *rows, *([spent] if rep.full > 0 else [])]


def compute_state(study: Any, storage_url: str) -> ComputeState:
    """Replay ``study`` (a study file, its folder or a Study) on every trial in ``storage_url``
    (errors as :func:`.schedule.replayed_state` raises them)."""
    return replayed_state(study, storage_url, "compute looks of the study", _compute_state)


def _compute_state(results) -> ComputeState:
    meta = results.meta
    if meta.compute_looks is None:
        raise ConfigError(f"study {meta.study!r} has no compute_looks: section; it has no compute looks")
    rules = DecisionRules.of(meta, ReadOptions(alpha=ALPHA, correction=CORRECTION))
    versions = read_rules(results, rules)  # a study file that changes the rule in force is refused here
    replay = replay_compute_looks(results, rules)
    ready, ended = _ready(results, replay)
    return ComputeState(replay, ready, ended, versions)


def _ready(results, replay: ComputeReplay) -> tuple[dict[str, dict[int, list[int]]], list[str]]:
    """Per condition, the segments that may run now (see the module doc); and the conditions
    that train no more."""
    trials = results.trials
    pools = results.meta.seed_pools
    ready = {c: {0: sorted(int(s) for s in pools.get(c) or results.meta.seeds)} for c in conditions_of(results)}
    arms_of: dict[str, list[str]] = {}
    for condition, control in comparisons_of(results):
        arms_of.setdefault(control, []).append(condition)
    ended = [c for c, stop in replay.stops.items() if stop.look is not None]
    for look in range(len(replay.design.at) - 1):
        after = replay.after_look(look)
        going = after.go_on
        for control, arms in arms_of.items():
            if control in going and not any(arm in going for arm in arms):
                going = [c for c in going if c != control]  # it waits for its arms' look, or none goes on
                if not any(arm in after.waiting for arm in arms):
                    ended.append(control)  # every arm of its cell stopped: nothing left to compare it with
        for condition in going:
            done = _completed_through(trials, condition, look)
            if done:
                ready.setdefault(condition, {})[look + 1] = done
    return ready, sorted(set(ended))


def _completed_through(trials: pd.DataFrame, condition: str, look: int) -> list[int]:
    """The seeds of ``condition`` whose trial completed its segment of ``look`` (a paused trial
    at that look or further, or one that ran to the budget)."""
    rows = trials[trials["arm"] == condition]
    if RUN_TO in rows:
        reached = pd.to_numeric(rows[RUN_TO], errors="coerce")
        done = (rows["status"] == PAUSED) & (reached >= look) | (rows["status"] == "completed")
    else:
        done = rows["status"] == "completed"
    return sorted(int(s) for s in rows.loc[done, "seed"])


class ComputeSchedule:
    """A compute-look study's looks for one process: asked what is due after its queue changed."""

    def __init__(self, study, study_ref: Any, storage_url: str, say: Callable[[str], None]):
        self.study, self.ref, self.url, self.say = study, study_ref, storage_url, say

    @property
    def total_looks(self) -> int:
        return len(self.study.compute_looks.at)

    def due(self) -> Due:
        """The replay, and every look's segments up to the one each condition may run now (the
        queue skips those it holds); the rule is fixed first when the first segments are due
        (:func:`.schedule.fixed_first`, as for the seed looks)."""
        state = compute_state(self.ref, self.url)
        return fixed_first(Due(state, due_segments(self.study, state.ready)), self.study, self.url, self.say)
