"""Verdicts: does each arm's effect clear the seed noise floor, and if not, why not.

Rules (for each comparison, in a pre-registered family corrected for multiplicity):

* **"clears noise floor"** iff the adjusted p-value of the comparison's t-test (Welch, or paired
  t) is < alpha AND that test's (1 - alpha) CI of the difference excludes 0. Direction is not
  part of the label: a significantly *worse* arm clears the noise floor with ``direction_ok``
  False.
* otherwise **"underpowered"** when fewer seeds per arm were run than ``seeds_needed`` (the
  study could not have detected the effect), or when the comparison is untestable (one seed, zero
  variance; see ``Comparison.reason``);
* otherwise **"within noise"**: the study had the power to see the effect and did not.

``seeds_needed`` is computed for ``target_effect`` if given, else for the observed |diff|, at the
observed seed standard deviations (two-sample Welch power, or paired-t power from the sd of the
differences), at level alpha / m where m is the number of testable comparisons (Bonferroni, the
level of Holm's first step): enough seeds to clear the correction, not just an uncorrected test.
Without ``target_effect`` a non-significant result is nearly always "underpowered", because
the power of a test at the effect it observed is below ~50% whenever p >= alpha; pass the
smallest effect you care about as ``target_effect`` to tell "within noise" from "underpowered".

Verdicts never use a bootstrap interval: at 3-5 seeds percentile bootstrap CIs are far too
narrow (see tests/stats/test_calibration.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

from ._util import JsonMixin, check_alpha
from .compare import Comparison
from .multiple import adjust_pvalues
from .power import seeds_needed as _seeds_needed
from .power import seeds_needed_paired as _seeds_needed_paired

CLEARS = "clears noise floor"
WITHIN = "within noise"
UNDERPOWERED = "underpowered"
LABELS = (CLEARS, WITHIN, UNDERPOWERED)
DIRECTIONS = ("maximize", "minimize")


@dataclass(frozen=True)
class Verdict(JsonMixin):
    """The verdict on one comparison. ``seeds_needed`` is per arm (None if no sd could be
    estimated, e.g. one seed); a value of ``max_n + 1`` means "more than max_n". ``ci_low``/
    ``ci_high`` are the verdict test's CI at the verdict's alpha (not multiplicity-adjusted)."""

    label: str
    p_adjusted: float
    seeds_needed: int | None
    direction_ok: bool
    reason: str
    test: str = ""
    diff: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    effect_for_power: float = math.nan
    seeds_run: int = 0
    robustness_note: str = ""


def clears_noise_floor(p_adjusted, ci_low, ci_high, *, alpha: float = 0.05):
    """The "clears noise floor" rule, vectorised: adjusted p < alpha and the CI excludes 0."""
    p = np.asarray(p_adjusted, dtype=float)
    lo = np.asarray(ci_low, dtype=float)
    hi = np.asarray(ci_high, dtype=float)
    with np.errstate(invalid="ignore"):
        return (p < alpha) & ((lo > 0) | (hi < 0))


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _robustness_note(c: Comparison, alpha: float) -> str:
    cannot = [name for name, ch in c.robustness.items() if not ch.can_reject]
    parts = []
    if cannot:
        worst = max(c.robustness[n].min_attainable_p for n in cannot)
        parts.append(
            f"{', '.join(cannot)} cannot reach p < {alpha:g} with these seed counts "
            f"(smallest attainable p up to {worst:.3g}), so their p-values say nothing about absence of an effect"
        )
    disagree = [f"{n} p = {ch.p_value:.3g}" for n, ch in c.robustness.items()
                if ch.can_reject and math.isfinite(ch.p_value) and (ch.p_value < alpha) != (c.p_value < alpha)]
    if disagree and math.isfinite(c.p_value):
        parts.append(f"disagreeing with {c.test} (unadjusted p = {c.p_value:.3g}): {', '.join(disagree)}")
    return "; ".join(parts)


def verdicts(comparisons: Sequence[Comparison], *, alpha: float = 0.05, method: str = "holm",
             direction: str = "maximize", target_effect: float | None = None, power: float = 0.8,
             max_n: int = 10_000) -> list[Verdict]:
    """One ``Verdict`` per comparison (same order), p-values adjusted over the whole family."""
    alpha = check_alpha(alpha)
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}; valid: {', '.join(DIRECTIONS)}")
    if target_effect is not None:
        target_effect = float(target_effect)
        if not math.isfinite(target_effect) or target_effect == 0:
            raise ValueError(f"target_effect must be a finite non-zero number or None; got {target_effect}")
    comparisons = list(comparisons)
    for c in comparisons:
        if not isinstance(c, Comparison):
            raise TypeError(f"verdicts() takes Comparison objects from compare(); got {type(c).__name__}")
    p_adj = adjust_pvalues([c.p_value for c in comparisons], method=method)
    m = max(1, int(np.sum(np.isfinite(p_adj))))
    alpha_plan = alpha / m

    out = []
    for c, pa in zip(comparisons, p_adj):
        pa = float(pa)
        if math.isfinite(c.se) and math.isfinite(c.df) and c.se > 0:
            half = float(stats.t.ppf(1 - alpha / 2, c.df)) * c.se
            lo, hi = c.diff - half, c.diff + half
        else:
            lo = hi = math.nan
        direction_ok = bool(c.diff > 0) if direction == "maximize" else bool(c.diff < 0)
        effect = abs(target_effect) if target_effect is not None else abs(c.diff)
        seeds_run = min(c.n_arm, c.n_control)
        sd_ok = (math.isfinite(c.std_diff) if c.paired
                 else math.isfinite(c.std_arm) and math.isfinite(c.std_control))
        if not sd_ok:
            need = None
        elif c.paired:
            need = _seeds_needed_paired(effect, c.std_diff, alpha=alpha_plan, power=power, max_n=max_n)
        else:
            need = _seeds_needed(effect, c.std_arm, c.std_control, alpha=alpha_plan, power=power, max_n=max_n)
        need_txt = (f"more than {max_n}" if need is not None and need > max_n else str(need))
        effect_txt = "target effect" if target_effect is not None else "observed difference"
        better = "improves on" if direction_ok else ("is worse than" if c.diff != 0 else "does not differ from")

        if c.reason or not math.isfinite(pa):
            label = UNDERPOWERED
            reason = f"Cannot be tested: {c.reason or 'the p-value is undefined'}; run more seeds."
        elif bool(clears_noise_floor(pa, lo, hi, alpha=alpha)):
            label = CLEARS
            reason = (f"Arm {better} control by {c.diff:+.4g} ({1 - alpha:.0%} CI {_fmt(lo)} to {_fmt(hi)}; "
                      f"{c.test} p = {pa:.3g} after {method} adjustment, below {alpha:g}).")
        elif need is None or seeds_run < need:
            label = UNDERPOWERED
            reason = (f"Not distinguishable from noise ({method}-adjusted p = {pa:.3g}), but detecting the "
                      f"{effect_txt} of {_fmt(effect)} with {power:.0%} power needs {need_txt} seeds per arm "
                      f"and {seeds_run} were run.")
        else:
            label = WITHIN
            reason = (f"Not distinguishable from noise ({method}-adjusted p = {pa:.3g}) although {seeds_run} seeds "
                      f"per arm give {power:.0%} power for the {effect_txt} of {_fmt(effect)} "
                      f"(CI {_fmt(lo)} to {_fmt(hi)}).")
        out.append(Verdict(label=label, p_adjusted=pa, seeds_needed=need, direction_ok=direction_ok,
                           reason=reason, test=c.test, diff=c.diff, ci_low=lo, ci_high=hi,
                           effect_for_power=effect, seeds_run=seeds_run,
                           robustness_note=_robustness_note(c, alpha)))
    return out
