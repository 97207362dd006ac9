"""Calibration comparisons, reported apart from the pre-registered family.

* **A/A tripwire** (``calibration: aa``): the control's copy on disjoint seeds against the
  control. Nothing differs but the seeds, so a "better" or "worse" here says the study's
  verdicts are not to be trusted: nondeterminism, a leak between trials, a bug, or (about alpha / m
  of the time) a rare draw of seeds, which an A/A copy on fresh seeds tells apart.
* **Placebo** (``placebo: random_reward``): every arm of a cell against the control trained on
  its own rewards shuffled across each batch (the same mean, no signal). A gain over the placebo
  is the part of an arm's effect that format or length drift does not explain.

Each is read like a pre-registered comparison, on the same test and at the same interval level
(the study's family size m for Bonferroni; in a sequential study, on the repeated interval of
the looks its data reached), but none of them is counted in that family.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from harness import stats
from harness.decide.comparisons import (
    VERDICT_COLUMNS,
    ArmScores,
    PairResult,
    compare_under,
    verdict_rows,
)
from harness.decide.frames import comparisons_of, meta_of
from harness.decide.rules import DecisionRules
from harness.decide.sequential.pools import look_pool
from harness.decide.sequential.replay import on_pool
from harness.tracking.study_meta import StudyMeta

CALIBRATION_COLUMNS = ["role", *VERDICT_COLUMNS]
ROLE_NAMES = {"aa": "A/A tripwire", "placebo": "placebo"}


def _sequential_look(meta: StudyMeta, pair: PairResult) -> stats.Look | None:
    """The repeated interval's look for a calibration pair of a sequential study: every look up
    to the seeds its data have."""
    design = meta.sequential
    count = min(pair.difference.n_arm, pair.difference.n_control)
    if not design or count < 1:
        return None
    looks = design.looks
    seen = tuple(n for n in looks if n < count) + (count,)
    return stats.Look(seen, looks[-1], design.spending)


def calibration_table(results, scores: dict[str, ArmScores], rules: DecisionRules) -> pd.DataFrame:
    """One verdict row per calibration comparison, with its role; empty when the study has none."""
    meta = meta_of(results)
    wanted = [c for c in meta.calibration if c[0] in scores and c[1] in scores]
    if not wanted:
        return pd.DataFrame(columns=CALIBRATION_COLUMNS)
    pairs, looks = [], []
    for condition, other, _ in wanted:
        a, b = scores[condition], scores[other]
        if meta.sequential:  # the seeds of the looks the two have reached
            n = min(len(a.values), len(b.values))
            a, b = on_pool(a, look_pool(meta, condition, n)), on_pool(b, look_pool(meta, other, n))
        pair = compare_under(rules, a, b, condition, other, seed_matched=meta.seed_matched)
        pairs.append(pair)
        looks.append(_sequential_look(meta, pair))
    rows, _ = verdict_rows(
        pairs,
        replace(rules, power=0.8),
        planning_effect=None,
        looks=looks if meta.sequential else None,
        family_size=max(1, len(comparisons_of(results))),
    )
    rows.insert(0, "role", [ROLE_NAMES[role] for _, _, role in wanted])
    return rows


def tripwire_state(table: pd.DataFrame) -> list[str]:
    """Header lines for an A/A comparison that came out better or worse."""
    out = []
    for row in table[table["role"] == ROLE_NAMES["aa"]].itertuples():
        if row.verdict in (stats.verdict.BETTER, stats.verdict.WORSE):
            out.append(
                f"A/A TRIPWIRE: {row.condition}, the control run again on other seeds, came out {row.verdict} than "
                f"{row.control} by {row.diff:+.4g} ({row.ci_level:.4g} interval [{row.ci_low:.4g}, {row.ci_high:.4g}]"
                "); nothing differs between them but the seeds, so the study's verdicts are not to be trusted: look "
                "for nondeterminism, a leak between trials, or a bug in seeding or evaluation before reading them. "
                "With none of those it is a rare draw of seeds (at the verdicts' level it fires by chance in about "
                "alpha / m of studies): an A/A copy of the control on fresh seeds tells which."
            )
    return out
