"""Compare one arm against the control across seeds.

The verdict rests on one t-based test (Welch's t, or the paired t when seeds are paired), whose
confidence interval and p-value come from the same t distribution. Rank, trimmed-mean and
permutation tests are reported next to it as robustness checks, each with the smallest p-value
it can attain at these sample sizes: at 3 seeds per arm Mann-Whitney and the permutation test
cannot go below p = 0.1, so "not significant" from them means "could not have been", not "no
effect" (``Check.can_reject`` is False).

Degenerate inputs. An empty arm, NaN/inf values, or ``paired=True`` with unequal lengths raise
ValueError. One seed in an arm, or zero variance where the test needs some (both arms constant
for Welch; all paired differences equal for the paired t) give a ``Comparison`` whose p-value
and CI are NaN and whose ``reason`` says why; ``Comparison.reason`` is "" when the test is defined.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from scipy import special, stats

from ._util import JsonMixin, as_sample, check_alpha, resolve_rng
from .crossed import Difference, PlanVariance


class TTest(NamedTuple):
    """A t-based test of a mean difference; fields are floats or arrays (vectorised cores)."""

    diff: np.ndarray
    se: np.ndarray
    df: np.ndarray
    t: np.ndarray
    p_value: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray


def _t_result(diff, se, df, alpha) -> TTest:
    with np.errstate(divide="ignore", invalid="ignore"):
        ok = (se > 0) & np.isfinite(df) & (df > 0)
        t = np.where(ok, diff / np.where(ok, se, 1.0), np.nan)
        dfs = np.where(ok, df, 1.0)
        # scipy.special's Student t ufuncs: the same numbers as stats.t.sf / stats.t.ppf, faster
        p = np.where(ok, 2.0 * special.stdtr(dfs, -np.abs(t)), np.nan)
        half = np.where(ok, special.stdtrit(dfs, 1.0 - alpha / 2.0) * se, np.nan)
    return TTest(diff, se, np.where(ok, df, np.nan), t, p, diff - half, diff + half)


def welch_test(arm, control, *, alpha: float = 0.05) -> TTest:
    """Welch's two-sided t-test of mean(arm) - mean(control) along the last axis (vectorised).

    Same p-value and CI as ``scipy.stats.ttest_ind(arm, control, equal_var=False)``. NaN where
    undefined (fewer than 2 values, or both arms with zero variance).
    """
    alpha = check_alpha(alpha)
    a = np.asarray(arm, dtype=float)
    b = np.asarray(control, dtype=float)
    na, nb = a.shape[-1], b.shape[-1]
    diff = a.mean(axis=-1) - b.mean(axis=-1)
    if na < 2 or nb < 2:
        nan = np.full(np.shape(diff), np.nan)
        return TTest(diff, nan, nan, nan, nan, nan, nan)
    va = a.var(axis=-1, ddof=1) / na
    vb = b.var(axis=-1, ddof=1) / nb
    se = np.sqrt(va + vb)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
    return _t_result(diff, se, df, alpha)


def paired_test(arm, control, *, alpha: float = 0.05) -> TTest:
    """Paired two-sided t-test on arm - control along the last axis (``scipy.stats.ttest_rel``)."""
    alpha = check_alpha(alpha)
    d = np.asarray(arm, dtype=float) - np.asarray(control, dtype=float)
    n = d.shape[-1]
    diff = d.mean(axis=-1)
    if n < 2:
        nan = np.full(np.shape(diff), np.nan)
        return TTest(diff, nan, nan, nan, nan, nan, nan)
    se = d.std(axis=-1, ddof=1) / math.sqrt(n)
    return _t_result(diff, se, np.full(np.shape(diff), float(n - 1)), alpha)


def yuen_test(arm, control, *, trim: float = 0.2, alpha: float = 0.05) -> TTest:
    """Yuen's two-sided test of trimmed means (``trim`` cut from each end), Welch-style df.

    g = floor(trim * n) values are cut from each end; with h = n - 2g kept, the squared standard
    error of a trimmed mean is (n - 1) * winsorized_var / (h * (h - 1)). Along the last axis.
    At 3 seeds per arm nothing is trimmed (g = 0) and this is Welch's test.
    """
    alpha = check_alpha(alpha)
    if not 0.0 <= trim < 0.5:
        raise ValueError(f"trim must be in [0, 0.5); got {trim}")

    def parts(x):
        x = np.sort(np.asarray(x, dtype=float), axis=-1)
        n = x.shape[-1]
        g = int(math.floor(trim * n))
        h = n - 2 * g
        tmean = x[..., g : n - g].mean(axis=-1)
        w = x.copy()
        if g > 0:
            w[..., :g] = x[..., g : g + 1]
            w[..., n - g :] = x[..., n - g - 1 : n - g]
        wvar = w.var(axis=-1, ddof=1) if n > 1 else np.full(np.shape(tmean), np.nan)
        d = (n - 1) * wvar / (h * (h - 1)) if h > 1 else np.full(np.shape(tmean), np.nan)
        return tmean, d, h

    ma, da, ha = parts(arm)
    mb, db, hb = parts(control)
    diff = ma - mb
    if ha < 2 or hb < 2:
        nan = np.full(np.shape(diff), np.nan)
        return TTest(diff, nan, nan, nan, nan, nan, nan)
    se = np.sqrt(da + db)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (da + db) ** 2 / (da**2 / (ha - 1) + db**2 / (hb - 1))
    return _t_result(diff, se, df, alpha)


# ---------------------------------------------------------------- permutation machinery


def _two_sided_p(null: np.ndarray, observed: float, exact: bool) -> float:
    """scipy's convention: twice the smaller tail, capped at 1; Monte Carlo adds the observed."""
    tol = 1e-12 * max(1.0, abs(observed), float(np.max(np.abs(null))) if null.size else 1.0)
    less = np.count_nonzero(null <= observed + tol)
    greater = np.count_nonzero(null >= observed - tol)
    if exact:
        one = min(less, greater) / null.size
    else:
        one = (min(less, greater) + 1) / (null.size + 1)
    return float(min(1.0, 2.0 * one))


def _subset_sums(values: np.ndarray, n_a: int, n_permutations: int, rng) -> tuple[np.ndarray, bool]:
    """Sum of ``values`` over every way (exact) or random ways (Monte Carlo) of picking n_a of them."""
    n = values.size
    if math.comb(n, n_a) <= n_permutations:
        idx = np.array(list(itertools.combinations(range(n), n_a)), dtype=np.intp).reshape(-1, n_a)
        return values[idx].sum(axis=1), True
    sums = np.empty(n_permutations)
    chunk = max(1, 2_000_000 // max(n, 1))
    for start in range(0, n_permutations, chunk):
        k = min(chunk, n_permutations - start)
        perm = rng.permuted(np.broadcast_to(np.arange(n), (k, n)), axis=1)
        sums[start : start + k] = values[perm[:, :n_a]].sum(axis=1)
    return sums, False


@dataclass(frozen=True)
class Check(JsonMixin):
    """One robustness test: its p-value and whether it could reject at all at these sizes.

    ``min_attainable_p`` is the smallest p-value the test can return at these sample sizes for
    any data (e.g. 2 / C(6, 3) = 0.1 for an exact rank or permutation test at 3 vs 3);
    ``can_reject`` is ``min_attainable_p < alpha``. ``method`` is "exact", "monte_carlo",
    "asymptotic" or "t"; ``note`` says why ``p_value`` is NaN, when it is.
    """

    p_value: float
    min_attainable_p: float
    can_reject: bool
    method: str
    note: str = ""


def _check(p: float, min_p: float, alpha: float, method: str, note: str = "") -> Check:
    p = float(p)
    if not math.isfinite(p) and not note:
        note = "undefined for these data (too few seeds or zero variance)"
    return Check(p, float(min_p), bool(min_p < alpha), method, note)


def permutation_check(arm, control, *, alpha=0.05, n_permutations=10_000, rng=None) -> Check:
    """Two-sample permutation test of the difference in means (``scipy.stats.permutation_test``
    with ``permutation_type='independent'``): exact when C(n_a + n_b, n_a) <= n_permutations."""
    a, b = as_sample(arm, "arm"), as_sample(control, "control")
    pooled = np.concatenate([a, b])
    sums, exact = _subset_sums(pooled, a.size, int(n_permutations), resolve_rng(rng))
    p = _two_sided_p(sums, float(a.sum()), exact)
    splits = math.comb(pooled.size, a.size)
    min_p = min(1.0, 2.0 / splits) if exact else min(1.0, 2.0 / (n_permutations + 1))
    return _check(p, min_p, alpha, "exact" if exact else "monte_carlo")


def mann_whitney_check(arm, control, *, alpha=0.05, n_permutations=10_000) -> Check:
    """Two-sided Mann-Whitney U test. Exact permutation distribution of the (mid)rank sum when
    C(n_a + n_b, n_a) <= n_permutations (ties handled exactly; equals scipy's ``method='exact'``
    without ties); otherwise scipy's tie-corrected normal approximation."""
    a, b = as_sample(arm, "arm"), as_sample(control, "control")
    pooled = np.concatenate([a, b])
    splits = math.comb(pooled.size, a.size)
    if splits <= n_permutations:
        ranks = stats.rankdata(pooled)
        sums, _ = _subset_sums(ranks, a.size, splits, None)
        p = _two_sided_p(sums, float(ranks[: a.size].sum()), True)
        return _check(p, min(1.0, 2.0 / splits), alpha, "exact")
    p = stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic").pvalue
    sep = stats.mannwhitneyu(
        np.arange(a.size) + b.size, np.arange(b.size), alternative="two-sided", method="asymptotic"
    ).pvalue
    return _check(p, sep, alpha, "asymptotic")


def sign_flip_check(arm, control, *, alpha=0.05, n_permutations=10_000, rng=None) -> Check:
    """Paired permutation (sign-flip) test of the mean paired difference; exact over all 2^n
    sign patterns when 2^n <= n_permutations (``permutation_test(permutation_type='samples')``)."""
    d = as_sample(arm, "arm") - as_sample(control, "control")
    n = d.size
    if 2**n <= n_permutations:
        signs = 1.0 - 2.0 * ((np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1)
        exact = True
    else:
        signs = resolve_rng(rng).choice(np.array([-1.0, 1.0]), size=(int(n_permutations), n))
        exact = False
    p = _two_sided_p(signs @ d, float(d.sum()), exact)
    min_p = min(1.0, 2.0 / 2**n) if exact else min(1.0, 2.0 / (n_permutations + 1))
    return _check(p, min_p, alpha, "exact" if exact else "monte_carlo")


# ---------------------------------------------------------------- effect sizes


def hedges_g(arm, control) -> float:
    """Standardised mean difference (arm - control) / pooled sd, times the small-sample
    correction J = 1 - 3 / (4 (n_a + n_b) - 9). NaN if the pooled sd is 0 or undefined."""
    a, b = as_sample(arm, "arm"), as_sample(control, "control")
    dof = a.size + b.size - 2
    if dof < 1:
        return math.nan
    ss = (a.var(ddof=1) * (a.size - 1) if a.size > 1 else 0.0) + (b.var(ddof=1) * (b.size - 1) if b.size > 1 else 0.0)
    sp = math.sqrt(ss / dof)
    if sp == 0.0:
        return math.nan
    return float((a.mean() - b.mean()) / sp * (1.0 - 3.0 / (4.0 * (a.size + b.size) - 9.0)))


def prob_improvement(arm, control) -> float:
    """P(a random arm seed beats a random control seed), ties counting half (= U / (n_a n_b))."""
    a, b = as_sample(arm, "arm"), as_sample(control, "control")
    return float(np.mean((a[:, None] > b[None, :]) + 0.5 * (a[:, None] == b[None, :])))


# ---------------------------------------------------------------- the comparison


@dataclass(frozen=True)
class Comparison(JsonMixin):
    """Arm versus control. ``diff = mean_arm - mean_control``; the CI and ``p_value`` are those of
    ``test`` ("welch_t" or "paired_t"), the test verdicts use. ``se``/``df`` let the CI be
    recomputed at another level. ``std_diff`` and ``pair_correlation`` are NaN unless paired.

    ``robustness`` always holds "mann_whitney", "yuen" (20% trimmed) and "permutation" (all
    two-sample, unpaired tests); when paired it adds "paired_t" (the verdict test again) and
    "sign_flip" (the paired permutation test). ``reason`` is "" unless the t-test is undefined."""

    n_arm: int
    n_control: int
    mean_arm: float
    mean_control: float
    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    test: str
    hedges_g: float
    prob_improvement: float
    robustness: dict[str, Check] = field(default_factory=dict)
    alpha: float = 0.05
    paired: bool = False
    std_arm: float = math.nan
    std_control: float = math.nan
    std_diff: float = math.nan
    pair_correlation: float = math.nan
    se: float = math.nan
    df: float = math.nan
    reason: str = ""


def _sd(x: np.ndarray) -> float:
    return float(x.std(ddof=1)) if x.size > 1 else math.nan


def compare(
    arm,
    control,
    *,
    paired: bool = False,
    alpha: float = 0.05,
    n_permutations: int = 10_000,
    rng: np.random.Generator | int | None = None,
) -> Comparison:
    """Compare per-seed scores of ``arm`` against ``control`` (two-sided).

    ``paired=True`` pairs arm[i] with control[i] (same seed, same data order) and uses the paired
    t-test; lengths must match. ``rng`` drives the Monte Carlo permutation tests only (None -> a
    generator seeded with 0, so reports are reproducible).
    """
    alpha = check_alpha(alpha)
    n_permutations = int(n_permutations)
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be >= 1; got {n_permutations}")
    a = as_sample(arm, "arm")
    b = as_sample(control, "control")
    if paired and a.size != b.size:
        raise ValueError(
            f"paired=True needs one control value per arm value (same seeds); got {a.size} arm and "
            f"{b.size} control values"
        )
    gen = resolve_rng(rng)
    sd_a, sd_b = _sd(a), _sd(b)

    if paired:
        res, sd_d, corr, reason = _paired_t(a, b, alpha, sd_a, sd_b)
        test = "paired_t"
    else:
        res, reason = _welch_t(a, b, alpha, sd_a, sd_b)
        test = "welch_t"
        sd_d, corr = math.nan, math.nan
    robustness = _robustness(a, b, res, reason, paired=paired, alpha=alpha, n_permutations=n_permutations, gen=gen)

    return Comparison(
        n_arm=int(a.size),
        n_control=int(b.size),
        mean_arm=float(a.mean()),
        mean_control=float(b.mean()),
        diff=float(res.diff),
        ci_low=float(res.ci_low),
        ci_high=float(res.ci_high),
        p_value=float(res.p_value),
        test=test,
        hedges_g=hedges_g(a, b),
        prob_improvement=prob_improvement(a, b),
        robustness=robustness,
        alpha=alpha,
        paired=bool(paired),
        std_arm=sd_a,
        std_control=sd_b,
        std_diff=sd_d,
        pair_correlation=corr,
        se=float(res.se),
        df=float(res.df),
        reason=reason,
    )


def _paired_t(a: np.ndarray, b: np.ndarray, alpha: float, sd_a: float, sd_b: float) -> tuple[TTest, float, float, str]:
    """The paired t-test of arm[i] - control[i]: the test, the sd of the differences, the pairs'
    correlation, and why the test is undefined (or "")."""
    res = paired_test(a, b, alpha=alpha)
    d = a - b
    sd_d = _sd(d)
    if a.size < 2:
        reason = "need at least 2 paired seeds for the paired t-test; got 1"
    elif sd_d == 0.0:
        reason = "all paired differences are equal (zero variance): the paired t-test is undefined"
    else:
        reason = ""
    corr = float(np.corrcoef(a, b)[0, 1]) if a.size > 1 and sd_a > 0 and sd_b > 0 else math.nan
    return res, sd_d, corr, reason


def _welch_t(a: np.ndarray, b: np.ndarray, alpha: float, sd_a: float, sd_b: float) -> tuple[TTest, str]:
    """Welch's t-test of two unpaired samples, and why it is undefined (or "")."""
    res = welch_test(a, b, alpha=alpha)
    if min(a.size, b.size) < 2:
        reason = f"need at least 2 seeds per arm for Welch's t-test; got {a.size} (arm) and {b.size} (control)"
    elif sd_a == 0.0 and sd_b == 0.0:
        reason = "both arms have zero variance across seeds: Welch's t-test is undefined"
    else:
        reason = ""
    return res, reason


def _robustness(
    a: np.ndarray,
    b: np.ndarray,
    res: TTest,
    reason: str,
    *,
    paired: bool,
    alpha: float,
    n_permutations: int,
    gen: np.random.Generator,
) -> dict[str, Check]:
    """The other tests of the same comparison: Mann-Whitney, Yuen and a permutation test; paired,
    also the paired t and a sign-flip test. ``gen`` drives the permutations, in this order."""
    y = yuen_test(a, b, alpha=alpha)
    robustness = {
        "mann_whitney": mann_whitney_check(a, b, alpha=alpha, n_permutations=n_permutations),
        "yuen": _check(y.p_value, 0.0 if min(a.size, b.size) >= 2 else math.nan, alpha, "t"),
        "permutation": permutation_check(a, b, alpha=alpha, n_permutations=n_permutations, rng=gen),
    }
    if paired:
        robustness["paired_t"] = _check(res.p_value, 0.0 if a.size >= 2 else math.nan, alpha, "t", reason)
        robustness["sign_flip"] = sign_flip_check(a, b, alpha=alpha, n_permutations=n_permutations, rng=gen)
    return robustness


# ---------------------------------------------------------------- the difference a verdict reads

#: tests a study may name for its trial-means analysis (``seed_prompt`` lives in ``crossed``)
TRIAL_MEAN_TESTS = {"welch_t": welch_test, "paired_t": paired_test, "yuen": yuen_test}


def trial_means_difference(arm, control, *, test: str) -> Difference:
    """The difference of per-seed scores by ``test`` ("welch_t", "paired_t" or "yuen"), with the
    seed-only variance model for planning (no prompt term: trial means hide it)."""
    if test not in TRIAL_MEAN_TESTS:
        raise ValueError(f"unknown trial-means test {test!r}; valid: {', '.join(TRIAL_MEAN_TESTS)}")
    a, b = as_sample(arm, "arm"), as_sample(control, "control")
    paired = test == "paired_t"
    if paired and a.size != b.size:
        raise ValueError(f"paired_t needs the same seeds in both arms; got {a.size} and {b.size} values")
    res = TRIAL_MEAN_TESTS[test](a, b)
    se, df = float(res.se), float(res.df)
    if min(a.size, b.size) < 2:
        reason = f"need at least 2 seeds per arm; got {a.size} (arm) and {b.size} (control)"
    elif not (math.isfinite(se) and se > 0):
        reason = "zero variance across seeds: no interval"
    else:
        reason = ""
    plan = None
    if not reason:
        seed = _sd(a - b) ** 2 if paired else _sd(a) ** 2 + _sd(b) ** 2
        plan = PlanVariance(seed=seed, prompt=0.0, residual=0.0, sampling=0.0, n_prompts=1, samples=1, paired=paired)
    return Difference(float(res.diff), se, df, test, int(a.size), int(b.size), paired, 0, se, plan, reason)
