"""seed_prompt_se / seed_prompt_difference, PlanVariance and variance_components: reference values.

Hand-worked ANOVA tables (plain loops), the reduction to Welch / paired t when the arm x prompt
term is truncated, exact-expectation tables for the Satterthwaite df of the plan, and the
components against statsmodels' REML fit of the crossed random-effects model.
"""

import json
import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from harness.stats import (
    Components,
    PlanVariance,
    paired_test,
    seed_prompt_difference,
    seed_prompt_se,
    variance_components,
    welch_test,
)

# a seed effect (rows drift up), a shared prompt effect and an arm x prompt term: every
# component of the hand-worked analyses below is positive, so nothing is truncated
ARM = [[1.4, 0.2, 0.1, 0.6], [1.6, 0.5, 0.8, 1.1], [2.3, 1.3, 1.1, 1.2]]
CONTROL = [[0.8, 0.6, -0.4, 0.4], [0.9, 0.3, 0.0, 0.3], [1.2, 1.4, 0.4, 1.3]]


def mean(xs):
    return sum(xs) / len(xs)


def var(xs):
    m = mean(xs)
    return sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def anova(table):
    """Row means, column means and the two-way residual mean square, with loops."""
    n, P = len(table), len(table[0])
    rows = [mean(r) for r in table]
    cols = [mean([table[s][p] for s in range(n)]) for p in range(P)]
    grand = mean(rows)
    ss = 0.0
    for s in range(n):
        for p in range(P):
            ss += (table[s][p] - rows[s] - cols[p] + grand) ** 2
    return rows, cols, ss / ((n - 1) * (P - 1))


def test_unpaired_seed_prompt_se_by_hand():
    n, P = 3, 4
    rows_a, cols_a, ms_a = anova(ARM)
    rows_c, cols_c, ms_c = anova(CONTROL)
    diff = mean(rows_a) - mean(rows_c)
    ra, rc = var(rows_a) / n, var(rows_c) / n  # trial-means (Welch) terms
    col_term = var([a - c for a, c in zip(cols_a, cols_c)]) / P
    res_a, res_c = ms_a / (n * P), ms_c / (n * P)
    prompt = col_term - res_a - res_c
    assert prompt > 0  # this table has an arm x prompt term: nothing truncated
    v = ra + rc + prompt
    df = v**2 / (
        ra**2 / (n - 1)
        + rc**2 / (n - 1)
        + col_term**2 / (P - 1)
        + res_a**2 / ((n - 1) * (P - 1))
        + res_c**2 / ((n - 1) * (P - 1))
    )
    d, se, dof, se_trial, comp = seed_prompt_se(np.array(ARM), np.array(CONTROL), paired=False)
    assert float(d) == pytest.approx(diff, rel=1e-12)
    assert float(se) == pytest.approx(math.sqrt(v), rel=1e-12)
    assert float(dof) == pytest.approx(df, rel=1e-12)
    assert float(se_trial) == pytest.approx(math.sqrt(ra + rc), rel=1e-12)
    assert float(se_trial) == pytest.approx(float(welch_test(np.mean(ARM, 1), np.mean(CONTROL, 1)).se))
    assert float(comp["prompt"]) == pytest.approx(prompt * P)
    assert float(comp["residual"]) == pytest.approx(ms_a + ms_c)
    seed = var(rows_a) - ms_a / P + var(rows_c) - ms_c / P
    assert seed > 0 and float(comp["seed"]) == pytest.approx(seed)


def test_paired_seed_prompt_se_by_hand():
    n, P = 3, 4
    table = [[a - c for a, c in zip(ra, rc)] for ra, rc in zip(ARM, CONTROL)]
    rows, cols, ms = anova(table)
    r = var(rows) / n
    col_term = var(cols) / P
    res = ms / (n * P)
    prompt = col_term - res
    assert prompt > 0
    v = r + prompt
    df = v**2 / (r**2 / (n - 1) + col_term**2 / (P - 1) + res**2 / ((n - 1) * (P - 1)))
    d, se, dof, se_trial, comp = seed_prompt_se(np.array(ARM), np.array(CONTROL), paired=True)
    assert (float(d), float(se), float(dof)) == pytest.approx((mean(rows), math.sqrt(v), df), rel=1e-12)
    assert float(se_trial) == pytest.approx(float(paired_test(np.mean(ARM, 1), np.mean(CONTROL, 1)).se))
    assert var(rows) - ms / P > 0 and float(comp["seed"]) == pytest.approx(var(rows) - ms / P)


@pytest.mark.parametrize("paired", [False, True])
def test_without_arm_x_prompt_variance_it_is_the_trial_means_test_when_truncated(paired):
    # seed, prompt and residual variance but no arm x prompt term: about half the replicates
    # truncate the prompt term at 0, and there the analysis IS Welch's (or the paired) t on the
    # trial means, se and df alike; elsewhere it is wider than that.
    rng = np.random.default_rng(0)
    R, n, P = 2000, 4, 16
    v = rng.normal(0, 0.7, (R, 1, P))  # the prompt effect, shared by the arms
    u = rng.normal(0, 0.3, (R, 2, n, 1))
    if paired:
        u[:, 1] = 0.8 * u[:, 0] + 0.6 * u[:, 1]  # seed-matched arms: correlated seed effects
    y = 0.1 + u + v[:, None] + rng.normal(0, 1.0, (R, 2, n, P))
    arm, control = y[:, 0] + 0.2, y[:, 1]
    d, se, df, se_trial, _ = seed_prompt_se(arm, control, paired=paired)
    t = (paired_test if paired else welch_test)(arm.mean(-1), control.mean(-1))
    np.testing.assert_allclose(d, t.diff, rtol=1e-12)
    np.testing.assert_allclose(se_trial, t.se, rtol=1e-12)
    truncated = np.isclose(se, se_trial, rtol=1e-14, atol=0)
    assert 0.3 < truncated.mean() < 0.7
    np.testing.assert_allclose(df[truncated], t.df[truncated], rtol=1e-12)
    assert np.all(se[~truncated] > se_trial[~truncated])


def test_constant_column_differences_truncate_exactly():
    # control = arm - 0.25 + a per-seed offset: every prompt differs by the same amount up to the
    # seed offsets, so the prompt term is negative and truncated
    rng = np.random.default_rng(1)
    arm = rng.normal(size=(5, 12))
    control = arm - 0.25 + rng.normal(size=(5, 1))
    d = seed_prompt_difference(arm, control, paired=False)
    t = welch_test(arm.mean(1), control.mean(1))
    assert (d.se, d.df) == pytest.approx((float(t.se), float(t.df)), rel=1e-12)
    assert d.plan.prompt == 0.0 and d.se_trial_means == pytest.approx(d.se)


def _exact_var(x, v):
    x = x - x.mean()
    return x * math.sqrt(v / x.var(ddof=1))


def _exact_residual(rng, n, P, ms):
    e = rng.normal(size=(n, P))
    e = e - e.mean(0) - e.mean(1)[:, None] + e.mean()
    return e * math.sqrt(ms * (n - 1) * (P - 1) / (e**2).sum())


@pytest.mark.parametrize("n, P, su, sw, se", [(3, 8, 0.5, 0.4, 1.0), (5, 64, 0.3, 0.2, 1.0), (10, 16, 0.1, 0.5, 2.0)])
@pytest.mark.parametrize("paired", [False, True])
def test_plan_variance_and_df_are_the_estimator_at_its_expectation(n, P, su, sw, se, paired):
    # Tables built so that every mean square equals its expectation under the model with seed sd
    # su, arm x prompt sd sw and residual sd se: the estimator then returns the true variance of
    # the difference, and its Satterthwaite df must be PlanVariance.df at the true components.
    rng = np.random.default_rng(n + P)
    if paired:  # su, se: sds of the paired differences' seed and cell terms
        control = rng.normal(size=(n, P))
        arm = (
            control
            + _exact_var(rng.normal(size=n), su**2 + se**2 / P)[:, None]
            + _exact_var(rng.normal(size=P), 2 * sw**2 + se**2 / n)[None]
            + _exact_residual(rng, n, P, se**2)
        )
        plan = PlanVariance(
            seed=su**2, prompt=2 * sw**2, residual=se**2, sampling=0.0, n_prompts=P, samples=1, paired=True
        )
    else:
        arm = (
            _exact_var(rng.normal(size=n), su**2 + se**2 / P)[:, None]
            + _exact_var(rng.normal(size=P), 2 * sw**2 + 2 * se**2 / n)[None]
            + _exact_residual(rng, n, P, se**2)
        )
        control = _exact_var(rng.normal(size=n), su**2 + se**2 / P)[:, None] + _exact_residual(rng, n, P, se**2)
        plan = PlanVariance(
            seed=2 * su**2, prompt=2 * sw**2, residual=2 * se**2, sampling=0.0, n_prompts=P, samples=1, paired=False
        )
    d = seed_prompt_difference(arm, control, paired=paired)
    assert d.se**2 == pytest.approx(float(plan.variance(n)), rel=1e-10)
    assert d.df == pytest.approx(float(plan.df(n)), rel=1e-10)
    assert (d.plan.seed, d.plan.prompt, d.plan.residual) == pytest.approx((plan.seed, plan.prompt, plan.residual))


def test_plan_variance_budgets():
    plan = PlanVariance(seed=0.2, prompt=0.1, residual=0.6, sampling=0.4, n_prompts=50, samples=4, paired=False)
    assert float(plan.variance(5)) == pytest.approx(0.2 / 5 + 0.1 / 50 + 1.0 / 250)
    # twice the prompts halves the prompt and cell terms; twice the samples halves the sampling part
    assert float(plan.variance(5, prompts=100)) == pytest.approx(0.2 / 5 + 0.1 / 100 + 1.0 / 500)
    assert float(plan.variance(5, samples=8)) == pytest.approx(0.2 / 5 + 0.1 / 50 + 0.8 / 250)
    np.testing.assert_allclose(plan.variance(np.array([5, 10])), [plan.variance(5), plan.variance(10)])
    trial = PlanVariance(seed=2.0, prompt=0.0, residual=0.0, sampling=0.0, n_prompts=1, samples=1, paired=False)
    assert float(trial.df(6)) == 10 and float(trial.variance(4)) == 0.5


def test_seed_prompt_difference_object_and_errors():
    d = seed_prompt_difference(ARM, CONTROL, paired=False, sample_var=0.01, samples=4)
    assert d.test == "seed_prompt" and d.n_prompts == 4 and d.testable and not d.paired
    assert d.plan.sampling == pytest.approx(2 * 0.01 / 4) and d.plan.samples == 4
    assert d.plan.residual + d.plan.sampling == pytest.approx(anova(ARM)[2] + anova(CONTROL)[2])
    json.dumps(d.to_dict(), allow_nan=False)
    one = seed_prompt_difference([ARM[0]], CONTROL, paired=False)
    assert not one.testable and "at least 2 seeds" in one.reason
    flat = seed_prompt_difference(np.ones((3, 4)), np.zeros((3, 4)), paired=False)
    assert not flat.testable and "zero variance" in flat.reason
    with pytest.raises(ValueError, match="same prompts"):
        seed_prompt_difference(ARM, np.array(CONTROL)[:, :3], paired=False)
    with pytest.raises(ValueError, match="same seeds"):
        seed_prompt_difference(ARM, CONTROL[:2], paired=True)
    with pytest.raises(ValueError, match="at least 2 prompts"):
        seed_prompt_se(np.ones((3, 1)), np.ones((3, 1)), paired=False)
    with pytest.raises(ValueError, match="non-finite"):
        seed_prompt_difference(np.array(ARM) * np.nan, CONTROL, paired=False)
    with pytest.raises(ValueError, match=r"\[seeds, prompts\]"):
        seed_prompt_difference(ARM[0], CONTROL[0], paired=False)


# ---------------------------------------------------------------- variance components


def _balanced_tables(rng, arms, n, P, sd_seed, sd_prompt, sd_ap, sd_res):
    v = rng.normal(0, sd_prompt, P)
    return {
        f"arm{a}": 0.2 * a
        + rng.normal(0, sd_seed, (n, 1))
        + v
        + rng.normal(0, sd_ap, P)
        + rng.normal(0, sd_res, (n, P))
        for a in range(arms)
    }


def test_variance_components_by_hand():
    tables = {"a": ARM, "c": CONTROL}
    n, P, k = 3, 4, 2
    parts = [anova(t) for t in (ARM, CONTROL)]
    residual = mean([ms for _, _, ms in parts])  # equal dof: the plain mean
    seed = mean([var(rows) - residual / P for rows, _, _ in parts])
    means = [cols for _, cols, _ in parts]  # [arms][prompts]
    _, _, ms_ap = anova(means)
    arm_x_prompt = ms_ap - residual / n
    prompt = var([mean([means[a][p] for a in range(k)]) for p in range(P)]) - arm_x_prompt / k - residual / (k * n)
    c = variance_components(tables)
    assert (c.seed, c.arm_x_prompt, c.seed_x_prompt) == pytest.approx((seed, arm_x_prompt, residual))
    assert min(seed, prompt, arm_x_prompt) > 0 and c.prompt == pytest.approx(prompt)
    assert (c.n_prompts, c.arms, c.seeds, c.eval_sampling) == (4, 2, 3.0, 0.0)
    # two arms with equal seeds: the components' plan is the difference's own variance model
    d = seed_prompt_difference(ARM, CONTROL, paired=False)
    assert c.as_plan().variance(3) == pytest.approx(d.se**2)
    assert c.trial_sd() == pytest.approx(math.sqrt(c.seed + c.seed_x_prompt / P))
    split = variance_components(tables, sample_var=0.02, samples=4)
    assert split.eval_sampling == pytest.approx(0.005)
    assert split.eval_sampling + split.seed_x_prompt == pytest.approx(residual)
    assert set(c.by_source()) == {"seed", "prompt", "arm x prompt", "seed x prompt", "eval sampling"}


def test_variance_components_recover_the_truth_on_average():
    rng = np.random.default_rng(5)
    sds = dict(sd_seed=0.3, sd_prompt=0.5, sd_ap=0.2, sd_res=0.8)
    est = np.array(
        [
            [
                getattr(variance_components(_balanced_tables(rng, 3, 6, 40, **sds)), f)
                for f in ("seed", "prompt", "arm_x_prompt", "seed_x_prompt")
            ]
            for _ in range(400)
        ]
    )
    truth = np.array([0.09, 0.25, 0.04, 0.64])
    se = est.std(axis=0) / math.sqrt(len(est))
    # truncation at 0 biases upward only where estimates reach 0: not at these sizes
    assert np.all(est.min(axis=0)[[1, 3]] > 0)
    assert np.all(np.abs(est.mean(axis=0) - truth) < 4 * se + 0.01 * truth), (est.mean(axis=0), truth, se)


def test_variance_components_errors():
    with pytest.raises(ValueError, match="2 seeds"):
        variance_components({"a": np.ones((1, 4))})
    with pytest.raises(ValueError, match="same 2 or more prompts"):
        variance_components({"a": np.ones((3, 4)), "b": np.ones((3, 5))})
    with pytest.raises(ValueError, match="non-finite"):
        variance_components({"a": np.full((3, 4), np.nan)})
    one = variance_components({"a": ARM})
    assert one.arm_x_prompt == 0.0 and one.arms == 1
    assert isinstance(one, Components)


def test_variance_components_agree_with_statsmodels_reml():
    # The crossed random-effects model y = arm + seed(arm) + prompt + arm:prompt + residual, fit by
    # REML with statsmodels' recipe for crossed effects (one group holding everything, each
    # random factor a variance component). In a balanced design REML equals the ANOVA (method of
    # moments) estimates whenever none of those is negative (Searle, Casella & McCulloch 1992,
    # ch. 6), so the only gap is the optimiser's convergence: rel 1e-3 allows for it (observed
    # ~1e-4) and is far below the sampling error of the components (~20% at these sizes).
    pd = pytest.importorskip("pandas")
    smf = pytest.importorskip("statsmodels.formula.api")
    rng = np.random.default_rng(4)
    arms, n, P = 2, 5, 16
    tables = _balanced_tables(rng, arms, n, P, sd_seed=0.4, sd_prompt=0.6, sd_ap=0.35, sd_res=0.5)
    rows = [
        dict(y=t[s, p], arm=a, seed=f"{a}_{s}", prompt=f"p{p}", arm_prompt=f"{a}_{p}", group=1)
        for a, t in enumerate(tables.values())
        for s in range(n)
        for p in range(P)
    ]
    model = smf.mixedlm(
        "y ~ C(arm)",
        pd.DataFrame(rows),
        groups="group",
        re_formula="0",
        vc_formula={"seed": "0 + C(seed)", "prompt": "0 + C(prompt)", "arm_prompt": "0 + C(arm_prompt)"},
    )
    fit = model.fit(reml=True, method=["lbfgs"])
    assert fit.converged
    reml = dict(zip(model.exog_vc.names, fit.vcomp))
    c = variance_components(tables)
    assert min(c.seed, c.prompt, c.arm_x_prompt) > 0  # nothing truncated: the equality applies
    assert c.seed == pytest.approx(reml["seed"], rel=1e-3)
    assert c.prompt == pytest.approx(reml["prompt"], rel=1e-3)
    assert c.arm_x_prompt == pytest.approx(reml["arm_prompt"], rel=1e-3)
    assert c.seed_x_prompt == pytest.approx(fit.scale, rel=1e-3)


def test_df_never_falls_below_the_trial_means_df():
    """0/1 scores on 30 prompts, 3 unmatched seeds a side, a 0.35 gain: the arm x prompt part is
    small beside noisy mean squares, and Satterthwaite's df of the sum fell to 0.57 (an interval
    of +-25 on a 0-1 metric). Floored at Welch's lower bound, min(n - 1) = 2, the interval is the
    trial-means one or wider, and the gain is found."""
    rng = np.random.default_rng(5)
    for prompts in (60, 50, 30):  # the third of three benchmarks drawn in turn: the case seen
        q = rng.uniform(0.1, 0.6, prompts)
        base, arm, _ = (
            np.stack([(rng.random(prompts) < q + lift).astype(float) for _ in range(runs)])
            for runs, lift in ((3, 0.0), (3, 0.35), (1, 0.0))
        )
    d = seed_prompt_difference(arm, base, paired=False)
    assert d.df >= 2
    half = scipy_stats.t.ppf(0.975, d.df) * d.se
    low, high = d.diff - half, d.diff + half
    assert low <= d.diff <= high and high - low < 1
    assert low > 0  # a 0.35 gain on every prompt is told from the noise
