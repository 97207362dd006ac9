"""What a sequential study needs next, for the runner: the look-by-look replay of
:mod:`harness.decide.looks` on the trials stored so far, read in the study's own terms (its
primary metric, test, failure policy and ``min_effect``; alpha 0.05 with Bonferroni across the
pre-registered comparisons, as the plan and the report assume), under the rule fixed at its first
look (:mod:`harness.decide.sequential_rule`: a study file that changes it is refused here, for
every caller).

The runner (:mod:`harness.runner.looks`) calls :func:`due_looks` and queues the trials
:func:`harness.decide.look_trials.due_trials` lists for the looks it wants; when a look is due and
when an arm stops are decided here and in :mod:`harness.decide.looks`, never in the runner.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

from harness.decide.comparisons import arm_scores
from harness.decide.frames import conditions_of
from harness.decide.looks import replay
from harness.decide.sequential_rule import ALPHA, CORRECTION, Rules
from harness.errors import ConfigError
from harness.store import StorageError
from harness.tracking.results import load_results

#: how load_results says it could not read the storage (it goes on with the local records only)
_UNREAD = "cannot read the"


@dataclass
class DueLooks:
    """Where a sequential study stands, and what it needs queued next."""

    looks: list[int]  # seeds per arm at each look
    wanted: dict[str, int]  # condition -> the 0-based look whose trials it needs (some not queued yet)
    finished: bool  # every comparison decided or read at the last look
    current_look: int  # 1-based: the furthest look any comparison has reached or waits for
    arms: dict[str, str]  # compared condition -> "stopped at look 1: better", "waiting for look 2", ...
    rules: Rules  # the rule in force (None until fixed), the study file's, and the stored versions


def due_looks(study: Any, storage: str) -> DueLooks:
    """Replay ``study`` (a study file, its folder or a Study) on every trial in ``storage``.

    A replay on part of the trials could ask for a look too early, so a storage that cannot be
    read raises ``StorageError`` instead of replaying on the local records alone; the caller
    tries again later. Other warnings of the loading (an unreadable local record, whose shared
    copy stands in) are the report's to show, not the runner's at every poll.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = load_results(study, storage=storage)
    unread = [str(w.message) for w in caught if str(w.message).startswith(_UNREAD)]
    if unread:
        raise StorageError(unread[0].split("; showing")[0])
    meta = results.meta
    if not meta.get("sequential"):
        raise ConfigError(f"study {meta.get('study')!r} has no sequential: section; it has no looks")
    metric, failures = meta["primary_metric"], meta["failures"]
    scores = {c: arm_scores(results, c, metric, failures=failures) for c in conditions_of(results)}
    out = replay(
        results,
        scores,
        metric=metric,
        alpha=ALPHA,
        correction=CORRECTION,
        direction=meta["direction"],
        min_effect=meta["min_effect"],
        failures=failures,
        test=meta["test"],
    )
    arms = {condition: state.status for (condition, _control), state in out.states.items()}
    return DueLooks(list(out.looks), dict(out.wanted), out.finished, out.current_look, arms, out.rules)
