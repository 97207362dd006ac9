"""Which seeds each look of a sequential study reads, and which trials it adds.

A condition's seeds are its pool (``study.condition_seeds``: the study's seeds, or an A/A copy's
own), and a look at n seeds per arm reads the pool's first n. The looks are therefore nested:
each adds the pool's next seeds, in order, and keeps every seed of the looks before it, which
is what the boundaries of :mod:`harness.stats.sequential` assume (independent increments). The
replay (:mod:`.replay`) reads each look on :func:`look_pool`; the schedule (:mod:`.schedule`)
hands the runner the trials :func:`due_trials` lists; both take the pool's first seeds
(tests/decide/sequential/test_pools.py holds the two in step).

Light on purpose (no pandas, no results loader): a runner process imports it at start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from harness.errors import ConfigError
from harness.study.expand import specs_at_positions
from harness.study.schema import Study
from harness.tracking.study_meta import StudyMeta


def look_pool(meta: StudyMeta, condition: str, n: int) -> list[int]:
    """The seeds a look at ``n`` seeds per arm reads of ``condition``: the first ``n`` of its own
    pool (an A/A copy's seeds are its own), from the results' meta."""
    return list(meta.seed_pools.get(condition) or meta.seeds)[:n]


def look_positions(study: Study, look: int) -> range:
    """Where in each condition's seed list a sequential study's ``look`` (0-based) takes its new
    seeds: the next ones, in order."""
    schedule = study.sequential.schedule()
    if not 0 <= look < len(schedule):
        raise ConfigError(f"study {study.name!r} has looks 0..{len(schedule) - 1}; got look {look}")
    return range(schedule[look - 1] if look else 0, schedule[look])


def look_seeds(study: Study, look: int) -> list[int]:
    """The seeds of the study's pool that ``look`` adds (an A/A copy adds the same positions of its own)."""
    return [study.seeds[i] for i in look_positions(study, look)]


def look_specs(study: Study, look: int, conditions: Sequence[str]) -> list:
    """The trials (``TrialSpec``) of ``conditions`` (by name) at a sequential study's ``look``,
    seed-major like ``expand``."""
    by_name = {c.name: c for c in study.iter_conditions()}
    unknown = [c for c in conditions if c not in by_name]
    if unknown:
        raise ConfigError(f"unknown condition {unknown[0]!r}; valid: {', '.join(by_name)}")
    return specs_at_positions(study, [by_name[c] for c in conditions], look_positions(study, look))


def due_trials(study: Study, wanted: Mapping[str, int]) -> list[list]:
    """Per look (0-based, up to the furthest wanted), the trials that look adds for the conditions
    that want it or a later one (``Replay.wanted``: condition -> the look it needs), in the
    design's order; a look's trials need every earlier look's, so those are listed too (the
    queue skips what it holds already)."""
    order = [c.name for c in study.iter_conditions()]
    return [
        look_specs(study, look, [c for c in order if wanted.get(c, -1) >= look])
        for look in range(max(wanted.values(), default=-1) + 1)
    ]
