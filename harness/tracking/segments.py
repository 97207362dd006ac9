"""A compute-look study's trials as one row each: the furthest segment each has reached.

A trial of a study with ``compute_looks:`` runs in segments, each a trial of its own in the queue
and in the records (``TrialSpec.segment``; ``harness.decide.sequential.segments``): the segments
before the last in the ``segment`` phase, the last (the design trial, whose record holds the
whole curve) in the ``compare`` phase. Every reader of a study's results wants one row per
design trial, so :func:`fold_segments` keeps, of each trial, the record of its furthest segment
and drops the rest:

- the last segment's record, when it has one: the trial as if run in one piece;
- else its furthest segment's record with the status ``paused`` (a segment that completed: its
  curve reaches that look's point, and the trial goes on or was stopped there, as the looks
  decide) or ``failed`` (the trial cannot resume past a failed segment; a retry under way shows
  as running, as for any trial);
- else (nothing ran yet) its first queued segment, as the queue has it.

Every segment of a trial resumes the one before it bitwise (``harness.engine.resume``), so the
furthest record's curve is the trial's curve up to where it got.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from harness.study.design import spec_of
from harness.tracking.records import TrialRecord

#: the status of a design trial whose furthest segment completed before the budget
PAUSED = "paused"
#: the queue and record phase of a segment before the last (the last is a ``compare`` trial)
SEGMENT_PHASE = "segment"
COMPARE_PHASE = "compare"


class Segment(NamedTuple):
    """Which design trial a segment belongs to, the look it runs to, and whether that is the budget."""

    whole: str
    look: int
    last: bool


def _segment(payload: Any) -> Segment | None:
    """The segment a segmented trial's spec runs (its spec read once); None for any other trial."""
    spec = spec_of(payload)
    if spec is None or spec.looks is None or spec.looks.run_to is None:
        return None
    return Segment(spec.whole_trial_id(), spec.looks.run_to, spec.looks.is_last)


def fold_segments(
    records: list[TrialRecord], queued: dict[str, dict[str, Any]]
) -> tuple[list[TrialRecord], dict[str, dict[str, Any]]]:
    """``records`` and ``queued`` (the Optuna view) with one entry per design trial of the
    segmented trials (see the module doc), each in the ``compare`` phase; other trials pass
    through as they are."""
    segment_of: dict[str, Segment] = {}
    for record in records:
        if record.phase in (COMPARE_PHASE, SEGMENT_PHASE) and (found := _segment(record.spec)) is not None:
            segment_of[record.trial_id] = found
    for trial_id, info in queued.items():
        if trial_id in segment_of or info.get("phase") not in (COMPARE_PHASE, SEGMENT_PHASE):
            continue
        if (found := _segment(info.get("spec"))) is not None:
            segment_of[trial_id] = found
    if not segment_of:
        return records, queued
    recorded: dict[str, TrialRecord] = {}  # design trial -> its furthest segment's record
    for record in records:
        found = segment_of.get(record.trial_id)
        if found is None:
            continue
        best = recorded.get(found.whole)
        if best is None or segment_of[best.trial_id].look < found.look:
            recorded[found.whole] = record
    first_queued: dict[str, str] = {}  # design trial without a record -> its first queued segment
    for trial_id, found in sorted(segment_of.items(), key=lambda item: item[1].look, reverse=True):
        if found.whole not in recorded and trial_id in queued:
            first_queued[found.whole] = trial_id
    keep = {r.trial_id for r in recorded.values()} | set(first_queued.values())
    out_records = [_as_design_trial(r, segment_of[r.trial_id].last) for r in records if r.trial_id in keep]
    out_records += [r for r in records if r.trial_id not in segment_of]
    out_queued = {
        trial_id: ({**info, "phase": COMPARE_PHASE} if trial_id in segment_of else info)
        for trial_id, info in queued.items()
        if trial_id not in segment_of or trial_id in keep
    }
    return sorted(out_records, key=lambda r: r.trial_id), out_queued


def _as_design_trial(record: TrialRecord, last: bool) -> TrialRecord:
    """The record of a trial's furthest segment (``last``: the one that runs to the budget), read
    as its design trial's."""
    if last or record.status != "completed":
        return record.model_copy(update={"phase": COMPARE_PHASE})
    return record.model_copy(update={"phase": COMPARE_PHASE, "status": PAUSED})
