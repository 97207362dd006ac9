"""Aggregates over several benchmarks: the overall difference an overall verdict reads, and
rliable's summaries (Agarwal et al. 2021, "Deep RL at the edge of the statistical precipice").

Scores are ``[runs, tasks]`` arrays: a row per run (a training seed), a column per task (a
benchmark), as rliable arranges them.

* :func:`benchmarks_difference` is the pre-registered overall comparison: the mean over the
  benchmarks of each benchmark's arm-minus-control difference, with the benchmarks taken as fixed
  (the ones named; no claim about others). It is computed per seed: each seed's benchmark scores
  are averaged, and the averages compared by the paired (or Welch) t test over seeds. A seed
  that is good on one benchmark is often good on the others, so the benchmark differences are
  correlated through the seed; averaging within the seed first keeps that correlation in the
  variance (treating the benchmarks as independent would understate it when it is positive and
  overstate it when negative). The prompts of each benchmark are a sample too: each benchmark's
  arm x prompt term (what its seed x prompt analysis adds over the trial means,
  ``harness.stats.crossed``) enters with weight ``1 / B^2``. Those terms are independent across
  benchmarks (disjoint prompts) and of the seed term, so the variance is their sum, with
  Satterthwaite degrees of freedom (``P_b - 1`` for benchmark b's term).
* :func:`iqm`, :func:`probability_of_improvement`, :func:`performance_profile` are rliable's
  ``metrics.aggregate_iqm``, ``metrics.probability_of_improvement`` and its score distribution
  (``library.create_performance_profile``), and :func:`stratified_bootstrap` its
  ``get_interval_estimates`` percentile interval: runs are resampled with replacement within each
  task (stratified), each score array on its own. These are descriptive companions of the
  verdicts: a bootstrap over 3-10 seeds is too narrow to decide on (``harness.stats.bootstrap``).
  The tests check them against rliable on the same inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
from scipy import stats as sps

from ._util import check_alpha
from .bootstrap import Interval
from .compare import trial_means_difference
from .crossed import Difference

#: rliable's share cut from each end for the interquartile mean
IQM_CUT = 0.25


def _runs_by_tasks(scores, name: str = "scores") -> np.ndarray:
    x = np.asarray(scores, dtype=float)
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
        raise ValueError(f"{name} must be a [runs, tasks] array with at least one of each; got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} contains non-finite values")
    return x


def iqm(scores) -> float:
    """The interquartile mean of all run x task scores: the mean of the middle 50%
    (``scipy.stats.trim_mean`` at 0.25 over the flattened array, as rliable)."""
    return float(_iqm(_runs_by_tasks(scores)[None])[0])


def _iqm(batch: np.ndarray) -> np.ndarray:
    """IQM of each ``[runs, tasks]`` array of ``batch[reps, runs, tasks]``."""
    return sps.trim_mean(batch.reshape(batch.shape[0], -1), IQM_CUT, axis=1)


def probability_of_improvement(scores_x, scores_y) -> float:
    """P(X > Y): per task, the probability that a run of X scores above a run of Y (ties count
    half: the Mann-Whitney U of X over the product of the run counts), averaged over tasks."""
    x, y = _runs_by_tasks(scores_x, "scores_x"), _runs_by_tasks(scores_y, "scores_y")
    _same_tasks(x, y)
    return float(_poi(x[None], y[None])[0])


def _same_tasks(x: np.ndarray, y: np.ndarray) -> None:
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"both score arrays must have the same tasks; got {x.shape[1]} and {y.shape[1]}")


def _poi(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``probability_of_improvement`` of each pair ``x[r], y[r]`` (``[reps, runs, tasks]``)."""
    above = x[:, :, None, :] > y[:, None, :, :]
    tied = x[:, :, None, :] == y[:, None, :, :]
    per_task = (above + 0.5 * tied).mean(axis=(1, 2))
    return per_task.mean(axis=-1)


def performance_profile(scores, thresholds) -> np.ndarray:
    """The score distribution at each threshold tau: the share of run x task scores above tau
    (rliable's default profile)."""
    x = _runs_by_tasks(scores)
    return _profile(x[None], np.asarray(thresholds, dtype=float))[0]


def _profile(batch: np.ndarray, taus: np.ndarray) -> np.ndarray:
    flat = batch.reshape(batch.shape[0], -1)
    return (flat[:, :, None] > taus[None, None, :]).mean(axis=1)


#: the statistics :func:`stratified_bootstrap` knows, each over a batch of resampled arrays
STATISTICS: dict[str, Callable[..., np.ndarray]] = {
    "iqm": _iqm,
    "probability_of_improvement": _poi,
    "performance_profile": _profile,
}


def _resample(x: np.ndarray, reps: int, rng) -> np.ndarray:
    """``reps`` stratified resamples of ``x[runs, tasks]``: each cell takes the score of a run drawn
    with replacement from its own task's column."""
    draw = rng.integers if isinstance(rng, np.random.Generator) else rng.randint
    runs, tasks = x.shape
    return x[draw(0, runs, size=(reps, runs, tasks)), np.arange(tasks)[None, None, :]]


def stratified_bootstrap(
    statistic: str,
    *scores,
    reps: int = 2000,
    alpha: float = 0.05,
    rng: np.random.Generator | np.random.RandomState | int | None = None,
    **options,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(point, low, high)`` of a statistic (a name of :data:`STATISTICS`) with rliable's
    stratified-bootstrap percentile interval at level 1 - alpha: each score array is resampled on
    its own, runs within each task. ``options`` go to the statistic (``taus=`` for the profile).

    ``rng``: a Generator, an int seed or None (seeded with 0); a legacy ``RandomState`` draws its
    resamples as rliable does (one array after the other within a replicate, in order), so at the
    same seed the two give the same interval."""
    alpha = check_alpha(alpha)
    if statistic not in STATISTICS:
        raise ValueError(f"unknown statistic {statistic!r}; valid: {', '.join(STATISTICS)}")
    arrays = [_runs_by_tasks(s, f"scores[{i}]") for i, s in enumerate(scores)]
    if not arrays:
        raise ValueError("stratified_bootstrap needs at least one score array")
    for other in arrays[1:]:
        _same_tasks(arrays[0], other)
    reps = int(reps)
    if reps < 1:
        raise ValueError(f"reps must be >= 1; got {reps}")
    if rng is None or isinstance(rng, (int, np.integer)):
        rng = np.random.default_rng(0 if rng is None else int(rng))
    func = STATISTICS[statistic]
    point = np.asarray(func(*(a[None] for a in arrays), **options)[0], dtype=float)
    if isinstance(rng, np.random.Generator):
        batches = [_resample(a, reps, rng) for a in arrays]
    else:  # rliable's order: per replicate, each array's draw in turn
        draws = [[_resample(a, 1, rng)[0] for a in arrays] for _ in range(reps)]
        batches = [np.stack([d[i] for d in draws]) for i in range(len(arrays))]
    boots = np.asarray(func(*batches, **options), dtype=float)
    low, high = np.percentile(boots, [100 * alpha / 2, 100 * (1 - alpha / 2)], axis=0)
    return point, low, high


def stratified_interval(statistic: str, *scores, **kwargs) -> Interval:
    """:func:`stratified_bootstrap` of a scalar statistic (IQM, probability of improvement) as an ``Interval``."""
    point, low, high = stratified_bootstrap(statistic, *scores, **kwargs)
    return Interval(float(point), float(low), float(high))


def benchmarks_difference(
    arm,
    control,
    *,
    paired: bool,
    prompt_terms: Sequence[float] | None = None,
    n_prompts: Sequence[int] | None = None,
) -> Difference:
    """The overall difference: mean over benchmarks of the arm-minus-control differences, with
    the benchmarks fixed (see the module docstring for why the seed level is read this way).

    ``arm`` and ``control`` are ``[seeds, benchmarks]`` per-seed scores (``paired``: the same seeds
    in the same rows). ``prompt_terms`` are each benchmark's arm x prompt variance of its
    difference (its seed x prompt SE squared minus its trial-means SE squared; 0 where unknown)
    and ``n_prompts`` its prompt count, for the degrees of freedom. Without them the interval is
    the trial-means one of the per-seed averages."""
    a, c = _runs_by_tasks(arm, "arm"), _runs_by_tasks(control, "control")
    _same_tasks(a, c)
    n_benchmarks = a.shape[1]
    seed = trial_means_difference(a.mean(axis=1), c.mean(axis=1), test="paired_t" if paired else "welch_t")
    terms = np.zeros(n_benchmarks) if prompt_terms is None else np.asarray(prompt_terms, dtype=float)
    if terms.shape != (n_benchmarks,) or np.any(terms < 0) or not np.all(np.isfinite(terms)):
        raise ValueError(f"prompt_terms must be {n_benchmarks} finite variances >= 0; got {prompt_terms}")
    weighted = terms / n_benchmarks**2
    if not seed.testable or not np.any(weighted > 0):
        return _named(seed, "benchmarks_mean")
    prompts = np.asarray(n_prompts, dtype=float)
    if prompts.shape != (n_benchmarks,) or np.any(prompts[weighted > 0] < 2):
        raise ValueError(
            f"n_prompts must give each benchmark's prompt count (>= 2 with a prompt term); got {n_prompts}"
        )
    variance = seed.se**2 + weighted.sum()
    on = weighted > 0
    df = variance**2 / (seed.se**4 / seed.df + np.sum(weighted[on] ** 2 / (prompts[on] - 1)))
    return Difference(
        seed.diff,
        float(np.sqrt(variance)),
        float(df),
        "benchmarks_mean",
        seed.n_arm,
        seed.n_control,
        paired,
        int(prompts.sum()),
        seed.se,
        None,
        "",
    )


def _named(d: Difference, test: str) -> Difference:
    return replace(d, test=test, plan=None)
