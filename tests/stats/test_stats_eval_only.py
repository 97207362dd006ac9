"""The eval-only difference (one training run per arm): against scipy's paired t over prompts,
and by simulation on binary and heavy-tailed per-prompt scores, greedy and with k eval samples."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special
from scipy import stats as sps

from harness.stats import (
    EVAL_ONLY_TEST,
    decide,
    eval_only_difference,
    eval_only_mean,
    one_run_components,
)


def _interval(d, level):
    half = float(special.stdtrit(d.df, 0.5 + level / 2)) * d.se
    return d.diff - half, d.diff + half


def test_one_run_per_side_is_scipys_paired_t_over_prompts():
    rng = np.random.default_rng(1)
    a, c = rng.random(40), rng.random(40)
    d = eval_only_difference(a[None, :], c[None, :])
    ref = sps.ttest_rel(a, c)
    ci = ref.confidence_interval(0.95)
    assert d.test == EVAL_ONLY_TEST and d.testable and d.paired and d.n_prompts == 40
    assert (d.n_arm, d.n_control) == (1, 1)
    assert d.diff == pytest.approx(float(np.mean(a - c)))
    assert d.df == ref.df == 39
    assert d.diff / d.se == pytest.approx(ref.statistic)
    assert _interval(d, 0.95) == pytest.approx((ci.low, ci.high))
    (v,) = decide([d])
    assert v.p_value == pytest.approx(ref.pvalue)


def test_a_side_with_several_runs_enters_with_its_mean_over_runs():
    rng = np.random.default_rng(2)
    arm, control = rng.random((3, 25)), rng.random((1, 25))
    d = eval_only_difference(arm, control)
    ref = sps.ttest_rel(arm.mean(axis=0), control[0])
    assert (d.n_arm, d.n_control) == (3, 1)
    assert d.diff / d.se == pytest.approx(ref.statistic) and d.df == 24


def test_untestable_cases_say_why():
    one = eval_only_difference([[0.5]], [[0.2]])
    assert not one.testable and "at least 2 prompts" in one.reason and one.diff == pytest.approx(0.3)
    flat = eval_only_difference([[1.0, 0.5, 1.0]], [[1.0, 0.5, 1.0]])
    assert not flat.testable and "no interval" in flat.reason
    same = eval_only_difference([[1.0, 0.0, 1.0]], [[1.0, 0.0, 1.0]])  # 0/1: the binary interval has one
    assert same.testable and same.test == "eval_only_binary" and same.binary.arm_only == same.binary.control_only == 0
    with pytest.raises(ValueError, match="same prompts"):
        eval_only_difference([[1.0, 0.0]], [[1.0, 0.0, 1.0]])
    with pytest.raises(ValueError, match="non-finite"):
        eval_only_difference([[1.0, np.nan]], [[1.0, 0.0]])


def test_the_verdict_says_eval_only_and_plans_no_seeds():
    rng = np.random.default_rng(3)
    c = (rng.random(200) < 0.5).astype(float)
    a = np.where(rng.random(200) < 0.3, 1.0, c)  # 30% of prompts flipped to solved
    better, same = decide(
        [eval_only_difference(a[None], c[None]), eval_only_difference(c[None], c[None][:, ::-1])], min_effect=0.5
    )
    assert better.label == "better (eval-only)" and better.family_size == 2
    assert "conditional on these checkpoints" in better.reason and "training seed's noise is unknown" in better.reason
    assert "interval over prompts" in better.reason
    assert better.seeds_needed_effect is None and better.seeds_needed_null is None
    assert same.label.endswith("(eval-only)") and same.label.split()[0] in ("equivalent", "inconclusive")


# ----------------------------------------------------------------------------- simulation


def _checkpoints(rng, reps, P, delta, spread):
    """Two fixed checkpoints' success probabilities on ``reps`` x ``P`` prompts drawn from a
    population (logit difficulty N(0, 1), the arm's per-prompt gain N(delta, spread))."""
    z = rng.normal(0.0, 1.0, (reps, P))
    q_c = special.expit(z)
    q_a = special.expit(z + rng.normal(delta, spread, (reps, P)))
    return q_a, q_c


def _true_difference(delta, spread, n=2_000_000):
    q_a, q_c = _checkpoints(np.random.default_rng(99), 1, n, delta, spread)
    return float(np.mean(q_a - q_c))


@pytest.mark.parametrize("k", [1, 8])
def test_coverage_on_binary_scores_greedy_and_sampled(k):
    """95% intervals cover the checkpoints' difference over the prompt population at the nominal
    rate, with k = 1 (binary scores) and k = 8 samples (means of 8 Bernoulli draws): eval
    sampling is inside the interval with nothing added. 4000 replicates: MC sd 0.0035."""
    rng = np.random.default_rng(10 + k)
    reps, P, delta, spread = 4000, 150, 0.3, 0.5
    truth = _true_difference(delta, spread)
    q_a, q_c = _checkpoints(rng, reps, P, delta, spread)
    y_a = rng.binomial(k, q_a) / k
    y_c = rng.binomial(k, q_c) / k
    d = y_a - y_c
    se = d.std(axis=1, ddof=1) / math.sqrt(P)
    half = special.stdtrit(P - 1, 0.975) * se
    cover = np.mean(np.abs(d.mean(axis=1) - truth) <= half)
    assert 0.94 <= cover <= 0.96, cover


def test_coverage_on_heavy_tailed_scores():
    rng = np.random.default_rng(7)
    reps, P = 4000, 60
    # per-prompt differences: true part t(3) around 0.1, plus sampling noise; truth 0.1
    d = 0.1 + 0.2 * rng.standard_t(3, (reps, P)) + rng.normal(0, 0.1, (reps, P))
    se = d.std(axis=1, ddof=1) / math.sqrt(P)
    half = special.stdtrit(P - 1, 0.975) * se
    cover = np.mean(np.abs(d.mean(axis=1) - 0.1) <= half)
    assert 0.935 <= cover <= 0.965, cover


def test_the_split_of_a_difference_recovers_its_prompt_and_sampling_parts():
    """Two checkpoints scored with k = 4 samples: the mean over replicates of the split's parts
    equals the true tau^2 (variance of the checkpoints' per-prompt differences) and sampling
    variance of d_p, within Monte Carlo error. The prompt part is truncated at 0 (a display
    split), which biases it up where it binds: here tau^2 is large enough that it never does
    (checked), so the estimates are unbiased."""
    rng = np.random.default_rng(11)
    reps, P, k = 600, 200, 4
    q_a, q_c = _checkpoints(rng, reps, P, 0.2, 1.2)
    draws_a = rng.random((reps, P, k)) < q_a[..., None]
    draws_c = rng.random((reps, P, k)) < q_c[..., None]
    prompt, sampling = [], []
    for r in range(reps):
        rows = np.stack([draws_a[r].mean(axis=1), draws_c[r].mean(axis=1)])
        pooled = (draws_a[r].var(axis=1, ddof=1).mean() + draws_c[r].var(axis=1, ddof=1).mean()) / 2
        split = one_run_components(rows, sample_var=float(pooled), samples=k).difference_split()
        prompt.append(split.prompt)
        sampling.append(split.sampling)
    true_prompt = np.var(q_a - q_c, axis=1, ddof=1)
    true_sampling = np.mean(q_a * (1 - q_a) + q_c * (1 - q_c), axis=1) / k
    assert min(prompt) > 0  # the truncation never bound
    for got, want in ((prompt, true_prompt), (sampling, true_sampling)):
        err = np.asarray(got) - want
        assert abs(err.mean()) < 3 * err.std(ddof=1) / math.sqrt(reps) + 1e-4, (np.mean(got), np.mean(want))
    d = draws_a[0].mean(axis=1) - draws_c[0].mean(axis=1)
    rows = np.stack([draws_a[0].mean(axis=1), draws_c[0].mean(axis=1)])
    greedy = one_run_components(rows).difference_split()
    assert greedy.sampling == 0.0  # no recorded variance: greedy, nothing to split
    split = one_run_components(rows, sample_var=0.2, samples=k).difference_split()
    assert split.se() == pytest.approx(float(np.std(d, ddof=1)) / math.sqrt(P))  # the parts add up
    assert split.se(prompts=4 * P) == pytest.approx(split.se() / 2)
    assert split.se(samples=2 * k) < split.se()


def test_one_run_components_recover_known_parts():
    """rows[arm, p] = v_p + w_ap + e_ap with sd 0.5 / 0.2 / 0.1: mean estimates within MC error."""
    rng = np.random.default_rng(12)
    reps, arms, P = 800, 4, 80
    v = rng.normal(0, 0.5, (reps, 1, P))
    w = rng.normal(0, 0.2, (reps, arms, P))
    e = rng.normal(0, 0.1, (reps, arms, P))
    got = np.array(
        [
            [c.prompt, c.arm_x_prompt, c.eval_sampling]
            for c in (one_run_components(r, sample_var=0.01 * 3, samples=3) for r in v + w + e)
        ]
    )
    want = np.array([0.25, 0.04, 0.01])
    err = got.mean(axis=0) - want
    assert np.all(np.abs(err) < 3 * got.std(axis=0, ddof=1) / math.sqrt(reps) + 1e-4), (got.mean(axis=0), want)
    c = one_run_components(v[0] + w[0] + e[0])
    assert c.eval_sampling == 0.0 and c.difference_split().prompt == pytest.approx(2 * c.arm_x_prompt)
    with pytest.raises(ValueError, match="at least 2"):
        one_run_components(np.zeros((1, 5)))


# ----------------------------------------------------------------------------- across benchmarks


def test_the_overall_eval_only_difference_is_the_mean_of_the_benchmarks_with_satterthwaite_df():
    rng = np.random.default_rng(21)
    diffs = [eval_only_difference(rng.random((1, P)) + 0.1, rng.random((1, P))) for P in (30, 60, 200)]
    d = eval_only_mean(diffs)
    assert d.test == "eval_only_benchmarks_mean" and d.testable and d.n_prompts == 290
    assert d.diff == pytest.approx(np.mean([x.diff for x in diffs]))
    var = np.array([x.se**2 for x in diffs]) / 9
    assert d.se == pytest.approx(math.sqrt(var.sum()))
    assert d.df == pytest.approx(var.sum() ** 2 / np.sum(var**2 / np.array([29, 59, 199])))
    (v,) = decide([d], min_effect=0.5)
    assert v.label.endswith("(eval-only)") and "conditional on these checkpoints" in v.reason
    flat = eval_only_difference([[1.0, 0.5]], [[1.0, 0.5]])
    assert not eval_only_mean([diffs[0], flat]).testable
    assert "cannot be tested (the two sides score the same" in eval_only_mean([diffs[0], flat]).reason
    same = eval_only_difference([[1.0, 0.0]], [[1.0, 0.0]])  # 0/1, no prompt changed: no spread to add
    assert eval_only_mean([diffs[0], same]).testable and not eval_only_mean([same, same]).testable


def test_the_overall_eval_only_interval_covers_by_simulation():
    """Three benchmarks (40, 60, 30 prompts) of two fixed checkpoints scored with k = 4 samples:
    95% intervals of the mean of their differences cover the mean of the true differences.
    1500 replicates: MC sd 0.0056."""
    rng = np.random.default_rng(22)
    reps, k, sizes, deltas = 1500, 4, (40, 60, 30), (0.3, 0.0, 0.6)
    truth = np.mean([_true_difference(delta, 0.5) for delta in deltas])
    cover = 0
    tables = [_checkpoints(rng, reps, P, delta, 0.5) for P, delta in zip(sizes, deltas)]
    scored = [(rng.binomial(k, q_a) / k, rng.binomial(k, q_c) / k) for q_a, q_c in tables]
    for r in range(reps):
        d = eval_only_mean([eval_only_difference(a[r][None], c[r][None]) for a, c in scored])
        half = special.stdtrit(d.df, 0.975) * d.se
        cover += abs(d.diff - truth) <= half
    assert 0.935 <= cover / reps <= 0.965, cover / reps
