"""What a sequential study needs next: the runner's one question.

The runner (``harness run`` at every poll, every worker that finds nothing to claim, ``harness
status``) asks :func:`look_state` where the study stands, after its queue changed (trials
finished), and :meth:`Schedule.due` which trials to queue next. Both are the look-by-look
replay of :mod:`.replay` on every trial stored so far, read in the study's own terms (its
primary metric, test, failure policy and ``min_effect``; alpha 0.05 with Bonferroni across the
pre-registered comparisons, as the plan and the report assume), under the rule fixed at its
first look (:mod:`.versions`: a study file that changes it is refused here, for every caller).
When a look is due, when an arm stops and which trials a look adds are decided here; the runner
only queues them.

A replay on part of the trials could ask for a look too early, so a storage that cannot be read
raises :class:`~harness.store.StorageUnreadable` (the loader's own, raised where the
read fails) instead of replaying on the local records alone; the caller tries again later.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.decide.comparisons import arm_scores
from harness.decide.frames import conditions_of
from harness.decide.rules import DecisionRules, ReadOptions
from harness.decide.sequential import rule_store
from harness.decide.sequential.pools import due_trials
from harness.decide.sequential.replay import replay
from harness.decide.sequential.rule import ALPHA, CORRECTION
from harness.decide.sequential.versions import RuleVersions, settle
from harness.errors import ConfigError, HarnessError, one_line
from harness.study.expand import study_dir
from harness.tracking.results import load_results


class LookError(HarnessError):
    """The next look cannot be worked out (a broken study or replay, not the storage)."""


@dataclass(frozen=True)
class LookState:
    """Where a sequential study stands."""

    looks: list[int]  # seeds per arm at each look
    wanted: dict[str, int]  # condition -> the 0-based look whose trials it needs (some not queued yet)
    finished: bool  # every comparison decided or read at the last look
    current_look: int  # 1-based: the furthest look any comparison has reached or waits for
    arms: dict[str, str]  # compared condition -> "stopped at look 1: better", "waiting for look 2", ...
    rules: RuleVersions  # the rule in force (None until fixed), the study file's, and the stored versions

    def lines(self) -> list[str]:
        """Where the study stands: its current look, then each compared condition's state."""
        head = f"sequential: look {self.current_look} of {len(self.looks)}" + (" (finished)" if self.finished else "")
        width = max((len(c) for c in self.arms), default=0)
        return [head, *(f"  {condition:<{width}}  {state}" for condition, state in self.arms.items())]


def look_state(study: Any, storage_url: str) -> LookState:
    """Replay ``study`` (a study file, its folder or a Study) on every trial in ``storage_url``
    (errors as :func:`replayed_state` raises them)."""
    return replayed_state(study, storage_url, "looks of the sequential study", _look_state)


def replayed_state(study: Any, storage_url: str, what: str, build: Callable[[Any], Any]) -> Any:
    """``build`` on the results of every trial of ``study`` in ``storage_url``: the state a
    schedule answers from (``what`` it works out, for the error).

    A storage that cannot be read raises ``StorageUnreadable``; a failure other than the
    harness's own errors is one line, a :class:`LookError`. Other warnings of the loading (an
    unreadable local record, whose shared copy stands in) are the report's to show, not the
    runner's at every poll."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results = load_results(study, storage=storage_url, strict_storage=True)
        return build(results)
    except HarnessError:
        raise
    except Exception as err:  # noqa: BLE001 - one line, not a traceback
        raise LookError(
            f"cannot work out the {what} {study}: {one_line(err, 300)}; "
            "the trials so far are kept: fix the cause and run the same command again"
        ) from None


def _look_state(results) -> LookState:
    meta = results.meta
    if not meta.sequential:
        raise ConfigError(f"study {meta.study!r} has no sequential: section; it has no looks")
    rules = DecisionRules.of(meta, ReadOptions(alpha=ALPHA, correction=CORRECTION))
    scores = {c: arm_scores(results, c, rules.metric, failures=rules.failures) for c in conditions_of(results)}
    out = replay(results, scores, rules)
    arms = {condition: state.status for (condition, _control), state in out.states.items()}
    return LookState(list(out.looks), dict(out.wanted), out.finished, out.current_look, arms, out.rules)


@dataclass(frozen=True)
class Due:
    """What the study needs queued now."""

    state: Any  # a LookState; a compute-look study's ComputeState (.compute_schedule); both have .rules
    by_look: list[list]  # per look (0-based), the trials (TrialSpec) it adds for the conditions that want it

    @property
    def trials(self) -> list:
        return [spec for specs in self.by_look for spec in specs]


class Schedule:
    """A sequential study's looks for one process: asked what is due after its queue changed."""

    def __init__(self, study, study_ref: Any, storage_url: str, say: Callable[[str], None]):
        self.study, self.ref, self.url, self.say = study, study_ref, storage_url, say

    @property
    def total_looks(self) -> int:
        return len(self.study.sequential.schedule())

    def due(self) -> Due:
        """The replay, and every look's trials up to the one each condition wants (the queue
        skips those it holds); the rule is fixed first when trials are due and it is not yet
        (the first look), so nothing is queued under a rule that is not stored."""
        state = look_state(self.ref, self.url)
        return fixed_first(Due(state, due_trials(self.study, state.wanted)), self.study, self.url, self.say)


def fixed_first(due: Due, study, storage_url: str, say: Callable[[str], None]) -> Due:
    """``due``, once the rule its looks are read under is stored: the study file's rule
    (``due.state.rules.current``) is fixed when trials are due and no rule is fixed yet (the first
    look), so nothing is queued under a rule that is not stored (:func:`.versions.settle`)."""
    rules: RuleVersions = due.state.rules
    if due.trials and rules.in_force is None:
        with rule_store.database(storage_url) as engine:
            fixed = settle(engine, study_dir(study), study.name, rules.current, first_look=True)
        say(f"fixed the {fixed.kind} rule at the first look: {fixed.line()}")
    return due
