"""Group-sequential boundaries: alpha spent across looks, and what a design stops at.

A sequential comparison is looked at after n_1 < n_2 < ... < n_K seeds per arm. Re-reading a
fixed-sample interval at every look inflates its error (optional stopping). Instead, look k reads
the interval ``estimate +- c_k se``, with the critical values c_k of a Lan-DeMets spending
function: under no effect the probability that |Z| first crosses c at look k is
``alpha(t_k) - alpha(t_{k-1})``, t_k being the share of the final information reached at look k,
so over all looks it is ``alpha(1) = alpha``. These are the repeated confidence intervals of
Jennison & Turnbull (1989): they cover the true difference at every look at once with
probability >= 1 - alpha, so any verdict read from them (better, worse, or equivalent within
+-min_effect, as ``verdict`` reads the fixed-sample one) may stop the comparison at whichever
look it is first reached, without losing calibration.

The estimates at the looks have the independent-increments covariance this needs even when the
prompts are shared: with nested seeds, Cov(estimate_j, estimate_k) = Var(estimate_k) for j < k,
so Corr(Z_j, Z_k) = sqrt(I_j / I_k) with I = 1 / Var.

No maintained Python package computes these boundaries (the references are R's ldbounds and
gsDesign), so they come from the recursive numerical integration of Armitage, McPherson & Rowe
(1969) as Jennison & Turnbull (2000, ch. 19) lay it out, on Simpson grids over the region where
the comparison goes on. Tests check them against ldbounds' published values and by simulation.

Only the boundary mathematics lives here (numpy and scipy on numbers: spending, boundaries, the
repeated interval of a look), since :mod:`harness.stats` is pure statistics. Everything a
sequential *study* decides with them (its rule and the versions fixed at its first look, which
seeds each look reads, the look-by-look replay, what the runner queues next) is
:mod:`harness.decide.sequential`'s.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from ._util import check_alpha

#: Simpson points per interval of the continuation region (odd); 1e-6 accuracy on the boundaries
_GRID = 201


def _norm_cdf(x):
    return special.ndtr(x)


def _obrien_fleming(t: np.ndarray, alpha: float) -> np.ndarray:
    """Lan-DeMets O'Brien-Fleming type: spends almost nothing early, nearly all alpha at the end."""
    return 2.0 * (1.0 - _norm_cdf(special.ndtri(1.0 - alpha / 2.0) / np.sqrt(t)))


def _pocock(t: np.ndarray, alpha: float) -> np.ndarray:
    """Lan-DeMets Pocock type: spends alpha about evenly, so it stops early more often."""
    return alpha * np.log1p((math.e - 1.0) * t)


SPENDING: dict[str, Callable[[np.ndarray, float], np.ndarray]] = {
    "obrien_fleming": _obrien_fleming,
    "pocock": _pocock,
}


def spent(spending: str, fractions: Sequence[float], alpha: float) -> np.ndarray:
    """Cumulative two-sided alpha spent by each information fraction: each side spends alpha / 2
    by the named function (as ldbounds and gsDesign do for a symmetric two-sided design)."""
    if spending not in SPENDING:
        raise ValueError(f"unknown spending function {spending!r}; choose one of {', '.join(SPENDING)}")
    return 2.0 * SPENDING[spending](np.asarray(fractions, dtype=float), alpha / 2.0)


def _check_fractions(fractions: Sequence[float]) -> np.ndarray:
    t = np.asarray(fractions, dtype=float)
    if t.ndim != 1 or t.size == 0 or not np.all(np.isfinite(t)):
        raise ValueError("information fractions must be a non-empty list of finite numbers")
    if t[0] <= 0 or np.any(np.diff(t) <= 0) or t[-1] > 1.0 + 1e-12:
        raise ValueError(f"information fractions must rise strictly from above 0 to at most 1; got {t.tolist()}")
    return t


def _simpson(intervals: Sequence[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """Points and Simpson weights covering the union of disjoint ``intervals``."""
    points, weights = [], []
    base = np.ones(_GRID)
    base[1:-1:2], base[2:-1:2] = 4.0, 2.0
    for low, high in intervals:
        if high > low:
            points.append(np.linspace(low, high, _GRID))
            weights.append(base * (high - low) / (3.0 * (_GRID - 1)))
    if not points:
        return np.empty(0), np.empty(0)
    return np.concatenate(points), np.concatenate(weights)


class _Walk:
    """The score statistic S_k ~ N(drift * I_k, I_k) with independent increments, followed over
    the looks; ``density`` is its (defective) density on the continuation grid of the last look."""

    def __init__(self, drift: float):
        self.drift = drift
        self.info = 0.0
        self.points = np.zeros(1)
        self.mass = np.ones(1)  # a point mass at S_0 = 0

    def interval_probability(self, info: float, low: float, high: float) -> float:
        """P(not stopped before, and S at ``info`` lies in (low, high))."""
        step = info - self.info
        mean = self.points + self.drift * step
        scale = math.sqrt(step)
        return float(self.mass @ (_norm_cdf((high - mean) / scale) - _norm_cdf((low - mean) / scale)))

    def advance(self, info: float, intervals: Sequence[tuple[float, float]]) -> None:
        """Move to ``info``, keeping only the paths that continue (S inside ``intervals``)."""
        points, weights = _simpson(intervals)
        step = info - self.info
        scale = math.sqrt(step)
        z = (points[:, None] - self.points[None, :] - self.drift * step) / scale
        density = np.exp(-0.5 * z * z) / (scale * math.sqrt(2.0 * math.pi)) @ self.mass
        self.info, self.points, self.mass = info, points, density * weights


def efficacy_bounds(fractions: Sequence[float], alpha: float, spending: str = "obrien_fleming") -> np.ndarray:
    """Two-sided critical values c_k (on the Z scale) for looks at information ``fractions``
    (the last below 1 for a design still at an interim look: earlier bounds do not depend on later looks).

    Under no effect, P(|Z_j| < c_j for j < k, |Z_k| >= c_k) equals the alpha spent between
    looks k-1 and k, so the family of looks has two-sided error ``alpha`` (symmetric, alpha / 2
    per side). A look that can spend nothing more than rounding gets an infinite bound.
    """
    return np.array(_bounds(tuple(float(t) for t in fractions), float(alpha), spending))


@functools.lru_cache(maxsize=4096)
def _bounds(fractions: tuple[float, ...], alpha: float, spending: str) -> tuple[float, ...]:
    check_alpha(alpha)
    t = _check_fractions(fractions)
    targets = np.diff(np.concatenate([[0.0], spent(spending, t, alpha)]))
    walk, bounds = _Walk(0.0), []
    for info, target in zip(t, targets):
        if target <= 1e-15:
            c = math.inf
        elif _excess(1e-9, walk, info, target) <= 0:  # more to spend than paths left (alpha near 1)
            c = 0.0
        else:
            c = optimize.brentq(_excess, 1e-9, 40.0, args=(walk, info, target), xtol=1e-10)
        bounds.append(c)
        edge = min(c, 40.0) * math.sqrt(info)
        walk.advance(info, [(-edge, edge)])
    return tuple(bounds)


def _excess(c: float, walk: _Walk, info: float, target: float) -> float:
    """How much more than ``target`` a bound of c at ``info`` spends (the root is the bound)."""
    edge = c * math.sqrt(info)
    return float(walk.mass.sum()) - walk.interval_probability(info, -edge, edge) - target


@dataclass(frozen=True)
class LookOdds:
    """Per look, the probability that a comparison is first decided there: its interval above 0,
    below 0, or inside +-margin (equivalent); and that it is still undecided after the last look.
    Which of above / below is "better" is the caller's ``direction``."""

    above: np.ndarray
    below: np.ndarray
    equivalent: np.ndarray
    undecided: float

    @property
    def stopped(self) -> np.ndarray:
        return self.above + self.below + self.equivalent


def look_odds(
    bounds: Sequence[float], variances: Sequence[float], delta: float, margin: float | None = None
) -> LookOdds:
    """Where a comparison stops when its true difference is ``delta``.

    ``variances`` are the estimator's variances at the looks (decreasing); look k stops when
    ``estimate +- c_k se`` excludes 0 (above or below), or lies inside +-margin (no margin:
    never). Exact for a normal estimate with known variances.
    """
    info = 1.0 / np.asarray(variances, dtype=float)
    if np.any(~np.isfinite(info)) or np.any(info <= 0) or np.any(np.diff(info) <= 0):
        raise ValueError("variances at the looks must be finite, positive and decreasing")
    walk = _Walk(delta)
    above, below, equivalent = [], [], []
    for c, i in zip(bounds, info):
        edge = min(c, 40.0) * math.sqrt(i)  # |S| >= edge: the interval excludes 0
        # |S| < margin * I - c sqrt(I): the interval lies inside +-margin
        inner = min(edge, max(0.0, (margin or 0.0) * i - edge))
        reached = float(walk.mass.sum())
        stay = [(-edge, -inner), (inner, edge)] if inner > 0 else [(-edge, edge)]
        between = walk.interval_probability(i, -inner, inner) if inner > 0 else 0.0
        up = walk.interval_probability(i, edge, math.inf)
        down = walk.interval_probability(i, -math.inf, -edge)
        above.append(up)
        below.append(down)
        equivalent.append(between)
        walk.advance(i, stay)
        # guard the recursion against drift in the quadrature: what continues is what is left
        walk.mass *= max(0.0, reached - up - down - between) / max(float(walk.mass.sum()), 1e-300)
    return LookOdds(np.array(above), np.array(below), np.array(equivalent), float(walk.mass.sum()))


@dataclass(frozen=True)
class Look:
    """One comparison at one look of a sequential design: the seeds per arm it was looked at so
    far (strictly increasing; the last is this look) out of the design's ``max_seeds``.

    Its interval is the repeated confidence interval ``estimate +- q se``, q the t quantile with
    the tail of the look's z bound (the usual conversion at an estimated variance; the tests show
    its calibration at few seeds). The information fractions are seed counts over the maximum:
    fixed by the design, before any data. A variance component that does not shrink with seeds
    (the arm x prompt term) makes later looks more correlated than that, which only makes the
    bounds conservative.
    """

    seeds: tuple[int, ...]
    max_seeds: int
    spending: str = "obrien_fleming"

    def __post_init__(self):
        if not self.seeds or any(b <= a for a, b in zip(self.seeds, self.seeds[1:])) or self.seeds[0] < 1:
            raise ValueError(f"a look's seeds must rise strictly from at least 1; got {list(self.seeds)}")
        if self.spending not in SPENDING:
            raise ValueError(f"unknown spending function {self.spending!r}; choose one of {', '.join(SPENDING)}")

    @property
    def index(self) -> int:
        return len(self.seeds) - 1

    @property
    def final(self) -> bool:
        return self.seeds[-1] >= self.max_seeds

    @property
    def fractions(self) -> tuple[float, ...]:
        """Seeds over the maximum; the final look is at 1 (all alpha spent), whatever seeds it had."""
        top = max(self.max_seeds, self.seeds[-1])
        return tuple(n / top for n in self.seeds)

    def bound(self, alpha: float) -> float:
        """The two-sided z bound of this look when the design spends ``alpha`` over all looks."""
        return _bounds(self.fractions, float(alpha), self.spending)[-1]

    def repeated_p(self, z: float) -> float:
        """The repeated p-value: the smallest two-sided alpha at which this look's bound is at
        most ``|z|`` (so ``repeated_p(z) < alpha`` exactly when the interval excludes 0)."""
        z = abs(float(z))
        if not math.isfinite(z):
            return 0.0
        if z <= self.bound(0.999):
            return 1.0
        if z >= self.bound(1e-15):
            return 1e-15
        return math.exp(
            optimize.brentq(lambda log_a: self.bound(math.exp(log_a)) - z, math.log(1e-15), math.log(0.999), xtol=1e-6)
        )


@dataclass(frozen=True)
class ExpectedTrials:
    """What a sequential study spends: its maximum, and the mean at a true difference."""

    maximum: int
    mean: float


def expected_trials(
    looks: Sequence[int],
    *,
    arms: int,
    delta: float,
    margin: float | None,
    sd: float,
    alpha: float = 0.05,
    spending: str = "obrien_fleming",
    followers: int = 0,
) -> ExpectedTrials:
    """The trials a sequential study of ``arms`` arms against one control spends when every arm
    differs from the control by ``delta`` (seed sd ``sd``, unpaired, known variance: a planning
    figure). An arm stops at the look that decides it (``look_odds``, at alpha / arms); the
    control, and each of ``followers`` conditions that take its seeds (an A/A copy, a placebo),
    run until the last arm stops, with the arms treated as independent."""
    looks = [int(n) for n in looks]
    if not looks or any(b <= a for a, b in zip(looks, looks[1:])) or looks[0] < 1:
        raise ValueError(f"looks must rise strictly from at least 1 seed; got {looks}")
    if not sd > 0 or not math.isfinite(sd):
        raise ValueError(f"the seed sd must be a finite number > 0; got {sd}")
    n = np.asarray(looks, dtype=float)
    bounds = efficacy_bounds(n / n[-1], alpha / max(1, arms), spending)
    odds = look_odds(bounds, 2.0 * sd * sd / n, delta, margin)
    stop = odds.stopped.copy()
    stop[-1] += odds.undecided
    per_arm = float(n @ stop)
    done_by = np.minimum(np.cumsum(stop), 1.0) ** max(1, arms)  # P(every arm has stopped by look k)
    control = float(n @ np.diff(np.concatenate([[0.0], done_by])))
    return ExpectedTrials(
        maximum=int(looks[-1] * (arms + 1 + followers)), mean=arms * per_arm + (1 + followers) * control
    )
