"""A compute-look study's trials, segment by segment.

A study with ``compute_looks:`` reads every arm at points of its compute axis before the budget
(:mod:`.compute`). So that an arm stopped at a look spends nothing more, each trial runs in
segments: segment k trains from look k-1's point to look k's and pauses there with a checkpoint
of its whole training state (``harness.engine.resume``); segment k+1 resumes from it. A segment
is a trial of its own (its spec's ``looks.run_to`` is k, so its trial id is its own): the queue,
the claims, the records and the mirror treat it as any trial, and a failed segment is retried
from the same checkpoint.

The last segment (``run_to`` the last look) is the study's design trial: ``expand`` gives it, it
is queued in the ``compare`` phase, and its record holds the whole curve, from step 0 to the
budget, exactly as a trial run in one piece. The segments before it are queued in the
``segment`` phase: the comparison frames never read them (``harness.tracking.results``); the
compute-look replay does, to read each arm at the looks it has reached.

Light on purpose (no pandas, no results loader): a runner process imports it at start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from harness.study.expand import expand
from harness.study.schema import Study
from harness.tracking.segments import COMPARE_PHASE, SEGMENT_PHASE


def phase_of(spec) -> str:
    """The phase a trial spec is queued and recorded in: ``compare`` for a design trial (the last
    segment, or a trial without looks), ``segment`` for the segments before it."""
    return COMPARE_PHASE if spec.looks is None or spec.looks.is_last else SEGMENT_PHASE


def every_segment(study: Study) -> list:
    """Every segment (``TrialSpec``) of every design trial, look by look (the queue's retries and
    cancellations read the whole set: a waiting segment is part of the design)."""
    design = expand(study)
    if study.compute_looks is None:
        return design
    return [spec.segment(look) for look in range(len(study.compute_looks.at)) for spec in design]


def due_segments(study: Study, ready: Mapping[str, Mapping[int, Sequence[int]]]) -> list[list]:
    """Per look (0-based), the segments to queue: ``ready`` maps a condition to {look: the seeds
    whose segment of that look may run now} (the first look: every seed; a later one: the seeds
    whose previous segment completed, of an arm that goes on). In the design's order, seed-major."""
    design = expand(study)
    furthest = max((look for by_look in ready.values() for look in by_look), default=-1)
    return [
        [spec.segment(look) for spec in design if spec.seed in ready.get(spec.arm, {}).get(look, ())]
        for look in range(furthest + 1)
    ]
