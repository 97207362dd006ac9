"""What a forecast at a compute look needs of a curve (``harness.stats.forecast``), without the fit:
the study's checks read it to warn, before anything runs, of looks that could forecast nothing.

A side's curve is fitted on its evaluations at 0 < C <= the look, and again at 0 < C <=
``CHECK_SPLIT`` x the look for the out-of-sample check; each fit needs ``MIN_EVALUATIONS``
distinct evaluation points past the start (pooled over the seeds), besides the start itself."""

from __future__ import annotations

#: the out-of-sample check fits the points at C <= CHECK_SPLIT * look and predicts the rest up to the look
CHECK_SPLIT = 0.5
#: the evaluation points past the start (C > 0) a fit needs, up to the look and up to the check's split
MIN_EVALUATIONS = 3


def evaluations_short(points: list[float], look: float) -> str:
    """Why evaluations at ``points`` (distinct, past the start) leave a forecast at ``look`` nothing
    to fit ("" when they do not)."""
    split = CHECK_SPLIT * look
    before = sorted(p for p in set(points) if 0 < p <= split)
    if len(before) >= MIN_EVALUATIONS:
        return ""
    return (
        f"{len(before)} evaluation(s) past the start up to the out-of-sample check's split ({split:g}, "
        f"{CHECK_SPLIT:g} of the look at {look:g}); a forecast needs {MIN_EVALUATIONS}"
    )
