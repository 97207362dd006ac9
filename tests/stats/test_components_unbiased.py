"""Variance components recovered from simulated tables with known components: seed, prompt,
arm x prompt, seed x prompt and eval sampling, at k = 1 and k > 1, normal and binary.

Each estimate is averaged over R replicate studies; its Monte Carlo error is the sd of the R
estimates / sqrt(R), and a component passes within 4 of those (plus 1% of the truth for the
small bias of truncating seed x prompt at 0 where it is near 0; none at these sizes).
"""

import math

import numpy as np
import pytest
from scipy import special

from harness.stats import COMBINED, variance_components
from harness.stats.crossed import seed_prompt_se, two_way

FIELDS = ("seed", "prompt", "arm_x_prompt", "seed_x_prompt", "eval_sampling")


def _normal_study(rng, arms, seeds, prompts, k, sd):
    """Per arm: the mean of k samples per cell, and the mean within-cell sample variance."""
    v = rng.normal(0, sd["prompt"], prompts)
    tables, sample_vars = {}, []
    for a in range(arms):
        cell = (
            0.1 * a
            + rng.normal(0, sd["seed"], (seeds, 1))
            + v
            + rng.normal(0, sd["arm_x_prompt"], prompts)
            + rng.normal(0, sd["seed_x_prompt"], (seeds, prompts))
        )
        draws = cell[..., None] + rng.normal(0, sd["eval_sampling"], (seeds, prompts, k))
        tables[f"arm{a}"] = draws.mean(axis=-1)
        sample_vars.append(draws.var(axis=-1, ddof=1).mean() if k > 1 else math.nan)
    return tables, float(np.mean(sample_vars))


def _recover(estimates, truth):
    est = np.array(estimates)
    mc = est.std(axis=0, ddof=1) / math.sqrt(len(est))
    gap = np.abs(est.mean(axis=0) - truth)
    assert np.all(gap < 4 * mc + 0.01 * np.abs(truth)), (est.mean(axis=0), truth, mc)
    return est.mean(axis=0), mc


@pytest.mark.parametrize("k", [2, 4])
def test_normal_components_with_k_samples_are_recovered(k):
    rng = np.random.default_rng(k)
    sd = dict(seed=0.3, prompt=0.5, arm_x_prompt=0.2, seed_x_prompt=0.25, eval_sampling=0.8)
    truth = np.array([sd[f] ** 2 for f in FIELDS])
    truth[-1] /= k  # the sampling variance of a cell's mean of k samples
    est = []
    for _ in range(400):
        tables, sample_var = _normal_study(rng, 3, 4, 40, k, sd)
        c = variance_components(tables, sample_var=sample_var, samples=k)
        est.append([getattr(c, f) for f in FIELDS])
    _recover(est, truth)


def test_the_old_cap_was_biased_low_and_the_estimate_now_is_not():
    """Where seed x prompt is small next to sampling, min(residual, s^2 / k) sits below the truth."""
    rng = np.random.default_rng(3)
    sd = dict(seed=0.2, prompt=0.5, arm_x_prompt=0.1, seed_x_prompt=0.05, eval_sampling=0.8)
    k, capped, unbiased = 2, [], []
    for _ in range(400):
        tables, sample_var = _normal_study(rng, 2, 3, 30, k, sd)
        c = variance_components(tables, sample_var=sample_var, samples=k)
        unbiased.append(c.eval_sampling)
        residual = np.mean([two_way(t)[2] for t in tables.values()])  # equal seeds: the pooled residual
        capped.append(min(c.eval_sampling, residual))
    truth = 0.8**2 / k
    mc = np.std(unbiased, ddof=1) / math.sqrt(len(unbiased))
    assert abs(np.mean(unbiased) - truth) < 4 * mc
    assert np.mean(capped) < truth - 4 * mc  # the cap's bias, measured on the same draws


def test_binary_components_with_k_samples_are_recovered():
    """0/1 rewards: a cell's k draws are Bernoulli(pi[seed, prompt]) with pi on the logit scale;
    the true components are the variances of pi's parts (by the same two-way ANOVA on a huge
    design) and the true sampling variance E[pi (1 - pi)] / k."""
    rng = np.random.default_rng(8)
    arms, seeds, prompts, k = 2, 4, 40, 4

    def probabilities(seeds_n, prompts_n):
        v = rng.normal(0, 1.0, prompts_n)
        return {
            a: special.expit(
                0.3 * a
                + rng.normal(0, 0.4, (seeds_n, 1))
                + v
                + rng.normal(0, 0.3, prompts_n)
                + rng.normal(0, 0.5, (seeds_n, prompts_n))
            )
            for a in range(arms)
        }

    sampling_truth = []
    est, est_pi = [], []
    for _ in range(300):
        pi = probabilities(seeds, prompts)
        draws = {a: rng.random((seeds, prompts, k)) < p[..., None] for a, p in pi.items()}
        tables = {a: d.mean(axis=-1) for a, d in draws.items()}
        sample_var = float(np.mean([d.astype(float).var(axis=-1, ddof=1).mean() for d in draws.values()]))
        c = variance_components(tables, sample_var=sample_var, samples=k)
        est.append([getattr(c, f) for f in FIELDS])
        truth_pi = variance_components(pi)  # pi's own components: no sampling
        est_pi.append([getattr(truth_pi, f) for f in FIELDS[:4]])
        sampling_truth.append(np.mean([(p * (1 - p)).mean() for p in pi.values()]) / k)
    truth = np.append(np.mean(est_pi, axis=0), np.mean(sampling_truth))
    est = np.array(est)
    mc = np.hypot(est.std(axis=0, ddof=1), np.append(np.std(est_pi, axis=0, ddof=1), 0.0)) / math.sqrt(len(est))
    assert np.all(np.abs(est.mean(axis=0) - truth) < 4 * mc + 0.01 * truth), (est.mean(axis=0), truth, mc)


def test_k_one_sampled_is_reported_as_one_component_not_as_zero_sampling():
    rng = np.random.default_rng(1)
    sd = dict(seed=0.3, prompt=0.5, arm_x_prompt=0.2, seed_x_prompt=0.25, eval_sampling=0.8)
    est = []
    for _ in range(400):
        tables, _ = _normal_study(rng, 3, 4, 40, 1, sd)
        c = variance_components(tables, samples=1, sampled=True)
        assert not c.separable and COMBINED in c.by_source() and "eval sampling" not in c.by_source()
        est.append([c.seed, c.prompt, c.arm_x_prompt, c.seed_x_prompt])
    # the combined residual is seed x prompt + sampling, each recovered
    _recover(est, np.array([0.09, 0.25, 0.04, 0.25**2 + 0.8**2]))
    greedy = variance_components(tables)  # greedy scores: no sampling term, nothing to split
    assert greedy.separable and greedy.eval_sampling == 0.0


def test_difference_plan_splits_without_the_cap():
    rng = np.random.default_rng(2)
    sd = dict(seed=0.2, prompt=0.5, arm_x_prompt=0.1, seed_x_prompt=0.05, eval_sampling=0.8)
    k, sampling = 2, []
    for _ in range(400):
        tables, sample_var = _normal_study(rng, 2, 3, 30, k, sd)
        *_, comp = seed_prompt_se(tables["arm1"], tables["arm0"], paired=False, sample_var=sample_var, samples=k)
        sampling.append(float(comp["sampling"]))
        assert comp["residual"] >= 0
    mc = np.std(sampling, ddof=1) / math.sqrt(len(sampling))
    assert abs(np.mean(sampling) - 2 * 0.8**2 / k) < 4 * mc
