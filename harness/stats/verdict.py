"""Verdicts: better, worse, equivalent or inconclusive, each arm against the control; untested
when the comparison cannot be tested; eval-only labels when a side has one training run.

One interval decides everything. For a family of m pre-registered comparisons each difference
gets a two-sided t interval at level ``1 - alpha / m`` (Bonferroni; ``correction="none"``: at
``1 - alpha``, each comparison alone). With Bonferroni the m intervals cover their true
differences simultaneously with probability >= 1 - alpha under any dependence (a shared control,
shared prompts, unequal variances), and every verdict below is a statement that the true
difference lies in a region containing its interval, so **all verdicts of a study are right at
once with probability >= 1 - alpha**:

* **better** / **worse**: the interval excludes 0, on the good / bad side of ``direction``
  (each direction is a one-sided test at alpha / 2m: better-or-worse at a true difference of 0
  is said with probability <= alpha over the family);
* **equivalent**: the interval lies inside (-min_effect, +min_effect) (two one-sided tests at
  alpha / 2m each; conservative against a TOST at alpha / m, the price of one interval for all);
* **inconclusive**: tested, and neither;
* **untested**: the comparison cannot be tested at all (``reason`` says why: one run per side
  and no per-prompt scores, no common prompts, no spread); it has no interval, is not in the
  family and is never called inconclusive.

An eval-only difference (``stats.eval_only``: a side has one training run, the interval is over
prompts and eval samples; on 0/1 scores of one run per side the binary interval of the prompts'
2 x 2 table, ``eval_only_binary``) is read the same way, and its label says what it rests on:
``better (eval-only)``, ``worse (eval-only)``, ``equivalent (eval-only)``, ``inconclusive
(eval-only)``. Such a verdict is conditional on these checkpoints: the training seed's noise is
unknown, so it says nothing about another training run of the same arm. It counts in the family
(its interval is tested like any other) and plans no seeds (no seed variance to plan from).

``smaller_than_min_effect`` flags a better / worse verdict whose interval also lies inside the
margin: real, but smaller than the smallest effect the study said it cares about.

We chose Bonferroni over a many-to-one max-t (Dunnett) interval: Dunnett's multivariate t needs
equal variances and one df, which the Welch and seed x prompt analyses do not have, and at 6 arms
its critical value is only ~3% smaller (2.57 vs 2.64 for large df). Holm's step-down rejects more
but has no simultaneous interval that an equivalence verdict could be read from.

"Seeds needed" is prospective (``planning``): the seeds per arm at which this design decides with
probability ``power`` for a true difference of 0 (needs a margin) and of the planning effect
(min_effect, or one seed sd when the study names none), at the verdict's level.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special

from ._util import JsonMixin, check_alpha
from .binary_paired import EVAL_ONLY_BINARY_TEST, union_interval
from .crossed import Difference
from .eval_only import EVAL_ONLY_TESTS
from .planning import seeds_can_decide, seeds_to_decide
from .sequential import Look

BETTER = "better"
WORSE = "worse"
EQUIVALENT = "equivalent"
INCONCLUSIVE = "inconclusive"
UNTESTED = "untested"
#: what an eval-only label adds to the seed-level word: the verdict is about these checkpoints
EVAL_ONLY_SUFFIX = " (eval-only)"
SEED_LEVEL_LABELS = (BETTER, WORSE, EQUIVALENT, INCONCLUSIVE)
EVAL_ONLY_LABELS = tuple(label + EVAL_ONLY_SUFFIX for label in SEED_LEVEL_LABELS)
LABELS = (*SEED_LEVEL_LABELS, *EVAL_ONLY_LABELS, UNTESTED)
DIRECTIONS = ("maximize", "minimize")
CORRECTIONS = ("bonferroni", "none")


@dataclass(frozen=True)
class Verdict(JsonMixin):
    """The verdict on one comparison.

    ``ci_low``/``ci_high`` are the interval the verdict was read from, at ``ci_level``;
    ``p_adjusted`` (Bonferroni, ``min(1, m p)``; in a sequential design m times the repeated
    p-value) is below alpha exactly when that interval excludes 0. ``seeds_needed_null`` /
    ``seeds_needed_effect``: seeds per arm to decide with ``power`` at a true difference of 0 / of
    ``planning_effect``; None when no number up to the search limit does (``reason`` says whether more prompts would).
    """

    label: str
    diff: float
    ci_low: float
    ci_high: float
    ci_level: float
    p_value: float
    p_adjusted: float
    test: str
    smaller_than_min_effect: bool
    seeds_run: int
    family_size: int
    planning_effect: float = math.nan
    seeds_needed_null: int | None = None
    seeds_needed_effect: int | None = None
    reason: str = ""


def check_margin(min_effect: float | None) -> float | None:
    """A smallest effect of interest: None, or a finite number > 0."""
    if min_effect is None:
        return None
    value = float(min_effect)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"min_effect must be a finite number > 0 (in the metric's units); got {min_effect}")
    return value


def interval_level(alpha: float, family_size: int, correction: str = "bonferroni") -> float:
    """Two-sided level of each comparison's interval in a family of ``family_size``."""
    alpha = check_alpha(alpha)
    if correction not in CORRECTIONS:
        raise ValueError(f"unknown correction {correction!r}; valid: {', '.join(CORRECTIONS)}")
    m = max(1, int(family_size)) if correction == "bonferroni" else 1
    return 1.0 - alpha / m


def label_of(ci_low, ci_high, *, margin: float | None, direction: str = "maximize"):
    """Labels (and the smaller-than-margin flag) from intervals, vectorised (simulations use it)."""
    lo = np.asarray(ci_low, dtype=float)
    hi = np.asarray(ci_high, dtype=float)
    up, down = lo > 0, hi < 0
    good, bad = (up, down) if direction == "maximize" else (down, up)
    inside = (lo > -margin) & (hi < margin) if margin is not None else np.zeros(lo.shape, dtype=bool)
    labels = np.where(good, BETTER, np.where(bad, WORSE, np.where(inside, EQUIVALENT, INCONCLUSIVE)))
    return labels, (good | bad) & inside


def eval_only_label(label: str) -> str:
    """The eval-only form of a seed-level label (``better`` -> ``better (eval-only)``)."""
    return label + EVAL_ONLY_SUFFIX


EVAL_ONLY_NOTE = (
    "Eval-only: a side has one training run, so the interval covers the eval prompts (and eval samples) "
    "and is conditional on these checkpoints; the training seed's noise is unknown, so it says nothing "
    "about another training run of the same arm, and no seed count can be planned. Run at least 2 seeds "
    "per arm for a seed-level verdict."
)


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _planning(
    d: Difference, effect: float, margin: float | None, level: float, power: float, max_n: int
) -> tuple[int | None, int | None, str]:
    if d.plan is None or not d.testable or not effect > 0:
        return None, None, ""
    need_effect = seeds_to_decide(effect, d.plan, level=level, power=power, margin=margin, max_n=max_n)
    need_null = (
        seeds_to_decide(0.0, d.plan, level=level, power=power, margin=margin, max_n=max_n)
        if margin is not None
        else None
    )
    notes = []
    for need, delta, what in (
        (need_effect, effect, f"a true difference of {_fmt(effect)}"),
        (need_null, 0.0, "a true difference of 0"),
    ):
        if need is None and (margin is not None or delta):
            if seeds_can_decide(delta, d.plan, level=level, power=power, margin=margin):
                notes.append(f"deciding at {what} needs more than {max_n} seeds per arm")
            else:
                notes.append(
                    f"no number of seeds decides at {what} with {d.plan.n_prompts} eval prompts "
                    "(the arm x prompt variance does not shrink with seeds): add eval prompts"
                )
    return need_null, need_effect, "; ".join(notes)


def decide(
    differences: Sequence[Difference],
    *,
    alpha: float = 0.05,
    direction: str = "maximize",
    min_effect: float | None = None,
    planning_effect: float | None = None,
    correction: str = "bonferroni",
    power: float = 0.8,
    max_n: int = 10_000,
    looks: Sequence[Look | None] | None = None,
    family_size: int | None = None,
) -> list[Verdict]:
    """One ``Verdict`` per difference (same order); the family is the testable ones.

    ``planning_effect`` defaults to ``min_effect``; without either, no seeds-needed figure.
    ``looks`` (one per difference; None: fixed-sample) makes each interval the repeated interval of its
    look in a sequential design that spends alpha / m (Bonferroni) over its looks, and
    ``p_adjusted`` the repeated p-value times m; without them, the fixed-sample design.
    ``family_size`` fixes m (a sequential look tests only the comparisons still undecided, but
    the family is all that were pre-registered); default: the testable differences given."""
    alpha = check_alpha(alpha)
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}; valid: {', '.join(DIRECTIONS)}")
    margin = check_margin(min_effect)
    effect = margin if planning_effect is None else float(planning_effect)
    diffs = list(differences)
    for d in diffs:
        if not isinstance(d, Difference):
            raise TypeError(f"decide() takes Difference objects; got {type(d).__name__}")
    if looks is not None and len(looks) != len(diffs):
        raise ValueError(f"decide() got {len(looks)} looks for {len(diffs)} differences")
    m = sum(d.testable for d in diffs) if family_size is None else int(family_size)
    level = interval_level(alpha, m, correction)
    per_arm_alpha = 1.0 - level
    out = []
    for i, d in enumerate(diffs):
        look = None if looks is None else looks[i]
        if not d.testable:
            out.append(_untested(d, level, m, effect))
            continue
        out.append(
            _tested(
                d,
                look,
                level=level,
                per_arm_alpha=per_arm_alpha,
                m=m,
                correction=correction,
                margin=margin,
                direction=direction,
                effect=effect,
                power=power,
                max_n=max_n,
            )
        )
    return out


def _untested(d: Difference, level: float, m: int, effect: float | None) -> Verdict:
    """The verdict of a comparison that cannot be tested: no interval, outside the family's count."""
    return Verdict(
        UNTESTED,
        d.diff,
        math.nan,
        math.nan,
        level,
        math.nan,
        math.nan,
        d.test,
        False,
        min(d.n_arm, d.n_control),
        m,
        effect if effect else math.nan,
        reason=f"Cannot be tested: {d.reason or 'no standard error'}.",
    )


def _tested(
    d: Difference,
    look: Look | None,
    *,
    level: float,
    per_arm_alpha: float,
    m: int,
    correction: str,
    margin: float | None,
    direction: str,
    effect: float | None,
    power: float,
    max_n: int,
) -> Verdict:
    """A testable comparison's verdict: its interval (the repeated one at a sequential look) and
    p-values, the label the interval gives, the seeds to decide, and the sentence saying it."""
    multiplier = m if correction == "bonferroni" else 1
    d_level = level if look is None else float(2.0 * special.ndtr(look.bound(per_arm_alpha)) - 1.0)
    if d.test == EVAL_ONLY_BINARY_TEST:  # one run per side, 0/1 scores: the binary interval alone
        (lo, hi), p = d.binary.interval(d_level), d.binary.p_value()
    else:
        p = float(2.0 * special.stdtr(d.df, -abs(d.diff) / d.se))
        half = float(special.stdtrit(d.df, 0.5 + d_level / 2.0)) * d.se
        lo, hi, p = union_interval(d.diff - half, d.diff + half, p, d.binary, d_level)
    if look is None:
        p_adj = min(1.0, p * multiplier)
    else:
        p_adj = min(1.0, look.repeated_p(-special.ndtri(p / 2.0)) * multiplier)
    label, small = (x.item() for x in label_of(lo, hi, margin=margin, direction=direction))
    # an interim look plans nothing: the design buys the next look's seeds anyway
    plans = look is None or look.final
    need_null, need_effect, plan_note = (
        _planning(d, effect or math.nan, margin, d_level, power, max_n) if plans else (None, None, "")
    )
    eval_only = d.test in EVAL_ONLY_TESTS
    kind = "interval" if look is None else f"repeated interval (look {look.index + 1})"
    kind = f"{kind} over prompts" if eval_only else kind
    ci = f"{d_level:.4g} {kind} [{_fmt(lo)}, {_fmt(hi)}]"
    text = _sentence(label, d.diff, ci, margin, small, plan_note)
    if eval_only:
        label, text = eval_only_label(label), f"{text} {EVAL_ONLY_NOTE}"
    return Verdict(
        label,
        d.diff,
        lo,
        hi,
        d_level,
        p,
        p_adj,
        d.test,
        bool(small),
        min(d.n_arm, d.n_control),
        m,
        effect if effect else math.nan,
        need_null,
        need_effect,
        text,
    )


def _sentence(label: str, diff: float, ci: str, margin: float | None, small: bool, plan_note: str) -> str:
    """What the verdict says in words: the label's reading of the interval ``ci``, then whether it is
    smaller than min_effect and, when inconclusive, what planning says."""
    text = {
        BETTER: f"Better than the control by {diff:+.4g} ({ci} excludes 0).",
        WORSE: f"Worse than the control by {diff:+.4g} ({ci} excludes 0).",
        EQUIVALENT: f"Equivalent to the control: the {ci} lies inside +-{_fmt(margin or 0)}.",
        INCONCLUSIVE: (
            f"Inconclusive: the {ci} includes 0"
            + (
                f" and reaches beyond +-{_fmt(margin)}."
                if margin
                else "; without min_effect no equivalence can be concluded."
            )
        ),
    }[label]
    if small:
        text += f" Real but smaller than min_effect ({_fmt(margin)})."
    if plan_note and label == INCONCLUSIVE:
        text += f" Planning: {plan_note}."
    return text
