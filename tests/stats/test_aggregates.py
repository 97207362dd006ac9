"""rliable's aggregates match rliable on the same inputs; the overall benchmark difference is
checked by hand and by simulation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from harness import stats
from harness.stats.aggregates import stratified_bootstrap

arch_bootstrap = pytest.importorskip("arch.bootstrap")


def _accept_random_state(cls) -> None:
    """rliable 1.2.0 passes ``random_state=`` to arch's bootstraps, which arch 8 (the first that
    imports under pandas 3) calls ``seed=``; rliable's own draws come from numpy's global
    generator either way, so the keyword is only renamed."""
    init = cls.__init__

    def renamed(self, *args, random_state=None, **kwargs):
        kwargs.setdefault("seed", random_state)
        init(self, *args, **kwargs)

    cls.__init__ = renamed


if "random_state" not in arch_bootstrap.IIDBootstrap.__init__.__code__.co_varnames:
    _accept_random_state(arch_bootstrap.IIDBootstrap)
    _accept_random_state(arch_bootstrap.IndependentSamplesBootstrap)
rliable_metrics = pytest.importorskip("rliable.metrics")
rliable_library = pytest.importorskip("rliable.library")


def _scores(seed: int, runs: int = 5, tasks: int = 3, ties: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(0.5, 0.2, size=(runs, tasks))
    return np.round(x, 1) if ties else x


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("ties", [False, True])
def test_point_estimates_are_rliables(seed, ties):
    x, y = _scores(seed, ties=ties), _scores(seed + 10, runs=4, ties=ties)
    assert stats.iqm(x) == pytest.approx(rliable_metrics.aggregate_iqm(x), abs=1e-15)
    assert stats.probability_of_improvement(x, y) == pytest.approx(
        rliable_metrics.probability_of_improvement(x, y), abs=1e-15
    )
    assert stats.probability_of_improvement(x, x) == 0.5 == rliable_metrics.probability_of_improvement(x, x)
    taus = np.linspace(0, 1, 11)
    np.testing.assert_array_equal(stats.performance_profile(x, taus), rliable_library.score_distributions(x, taus))


def test_the_iqm_is_the_mean_of_the_middle_half_by_hand():
    x = np.array([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 100.0]])  # 8 scores: drop 2 at each end
    assert stats.iqm(x) == pytest.approx(np.mean([2.0, 3.0, 4.0, 5.0]))
    assert stats.probability_of_improvement([[1.0], [3.0]], [[2.0], [2.0]]) == 0.5  # one pair above, one below


def _rliable_interval(score_dict, func, reps, seed, **kwargs):
    np.random.seed(seed)  # rliable's stratified bootstrap draws from numpy's global generator
    points, intervals = rliable_library.get_interval_estimates(score_dict, func, reps=reps, **kwargs)
    return points, intervals


@pytest.mark.parametrize("seed", [0, 7])
def test_stratified_bootstrap_intervals_are_rliables_at_the_same_draws(seed):
    x, y = _scores(seed, runs=5, tasks=3), _scores(seed + 1, runs=4, tasks=3)
    reps = 300
    points, intervals = _rliable_interval({"x": x}, lambda s: np.array([rliable_metrics.aggregate_iqm(s)]), reps, seed)
    point, low, high = stratified_bootstrap("iqm", x, reps=reps, rng=np.random.RandomState(seed))
    assert point == pytest.approx(points["x"][0])
    np.testing.assert_allclose([low, high], intervals["x"][:, 0], rtol=1e-12)

    points, intervals = _rliable_interval(
        {"xy": [x, y]}, lambda a, b: np.array([rliable_metrics.probability_of_improvement(a, b)]), reps, seed
    )
    point, low, high = stratified_bootstrap(
        "probability_of_improvement", x, y, reps=reps, rng=np.random.RandomState(seed)
    )
    assert point == pytest.approx(points["xy"][0])
    np.testing.assert_allclose([low, high], intervals["xy"][:, 0], rtol=1e-12)


def test_stratified_bootstrap_with_a_generator_agrees_with_rliable_within_monte_carlo_error():
    x = _scores(3, runs=8, tasks=4)
    reps = 4000
    _, intervals = _rliable_interval({"x": x}, lambda s: np.array([rliable_metrics.aggregate_iqm(s)]), reps, 1)
    _, low, high = stratified_bootstrap("iqm", x, reps=reps, rng=5)
    np.testing.assert_allclose([low, high], intervals["x"][:, 0], atol=0.01)
    taus = np.linspace(0.0, 1.0, 6)
    profile, p_low, p_high = stratified_bootstrap("performance_profile", x, reps=reps, rng=5, taus=taus)
    np.testing.assert_array_equal(profile, stats.performance_profile(x, taus))
    assert np.all(p_low <= profile + 1e-12) and np.all(profile <= p_high + 1e-12)


def test_stratified_resamples_keep_each_score_in_its_task():
    x = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]])
    _, low, high = stratified_bootstrap("performance_profile", x, reps=500, rng=0, taus=np.array([5.0]))
    assert low[0] == high[0] == 0.5  # every resample keeps three scores of task 2 above 5, three of task 1 below


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="same tasks"):
        stats.probability_of_improvement(np.ones((2, 2)), np.ones((2, 3)))
    with pytest.raises(ValueError, match="unknown statistic"):
        stratified_bootstrap("median", np.ones((2, 2)))
    with pytest.raises(ValueError, match="non-finite"):
        stats.iqm([[np.nan, 1.0]])


# ----------------------------------------------------------------------------- the overall difference


def test_the_overall_difference_is_the_mean_of_benchmark_differences_with_the_per_seed_paired_t():
    arm = np.array([[0.60, 0.20, 0.40], [0.70, 0.25, 0.50], [0.65, 0.10, 0.45]])
    control = np.array([[0.55, 0.20, 0.30], [0.60, 0.20, 0.40], [0.60, 0.15, 0.40]])
    d = stats.benchmarks_difference(arm, control, paired=True)
    per_seed = (arm - control).mean(axis=1)  # [0.05, 0.15/3... ] by hand below
    np.testing.assert_allclose(per_seed, [0.05, 0.25 / 3, 0.05 / 3])
    assert d.diff == pytest.approx(np.mean((arm - control).mean(axis=0)))
    assert d.se == pytest.approx(per_seed.std(ddof=1) / np.sqrt(3)) and d.df == 2
    t = sps.ttest_rel(arm.mean(axis=1), control.mean(axis=1))
    assert d.diff / d.se == pytest.approx(t.statistic)
    # each benchmark's arm x prompt term adds with weight 1/B^2, Satterthwaite df
    terms, prompts = [4e-4, 0.0, 9e-4], [100, 50, 40]
    w = stats.benchmarks_difference(arm, control, paired=True, prompt_terms=terms, n_prompts=prompts)
    v_seed = d.se**2
    v = v_seed + (4e-4 + 9e-4) / 9
    assert w.se == pytest.approx(np.sqrt(v)) and w.diff == d.diff and w.se_trial_means == pytest.approx(d.se)
    assert w.df == pytest.approx(v**2 / (v_seed**2 / 2 + (4e-4 / 9) ** 2 / 99 + (9e-4 / 9) ** 2 / 39))


def test_the_overall_interval_keeps_its_level_when_benchmarks_move_together_through_the_seed():
    """Seeds shift every benchmark alike (correlation 0.8): the per-seed average keeps it, so the
    paired interval covers at its level; treating benchmarks as independent would not."""
    rng = np.random.default_rng(11)
    reps, seeds, benchmarks = 4000, 5, 3
    cov = 0.8 * np.ones((benchmarks, benchmarks)) + 0.2 * np.eye(benchmarks)
    effect = np.array([0.1, -0.05, 0.02])
    arm = rng.multivariate_normal(np.zeros(benchmarks), cov, size=(reps, seeds)) + effect
    control = rng.multivariate_normal(np.zeros(benchmarks), cov, size=(reps, seeds))
    diff = (arm - control).mean(axis=2)  # per seed, the benchmark-mean difference
    se = diff.std(axis=1, ddof=1) / np.sqrt(seeds)
    t = sps.t.ppf(0.975, seeds - 1)
    covered = np.abs(diff.mean(axis=1) - effect.mean()) <= t * se
    assert abs(covered.mean() - 0.95) < 3 * np.sqrt(0.05 * 0.95 / reps) + 0.005
    one = stats.benchmarks_difference(arm[0], control[0], paired=True)
    assert one.diff == pytest.approx(diff[0].mean()) and one.se == pytest.approx(se[0])
    naive_se = np.sqrt(((arm - control).var(axis=1, ddof=1) / seeds).sum(axis=1)) / benchmarks
    assert np.mean(np.abs(diff.mean(axis=1) - effect.mean()) <= t * naive_se) < 0.93
