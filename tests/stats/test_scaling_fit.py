"""Fitted saturating compute curves (harness.stats.scaling): the fit against scipy's curve_fit,
recovery of known parameters, the identification and convergence checks, the seed jackknife,
the differences a verdict reads and the extrapolation check's numbers worked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize
from scipy import stats as sps

from harness.stats import (
    decide,
    extrapolation_check,
    fit_curve,
    fit_scaling,
    saturating_curve,
    scaling_difference,
)
from harness.stats import scaling as scaling_module

C = np.arange(0, 11) * 1000.0


@pytest.mark.parametrize(
    ("r0", "a", "b", "c_mid", "bounds"),
    [
        (0.4, 0.7, 1.5, 3000.0, (0.0, 1.0)),
        (0.1, 0.9, 0.8, 1500.0, (0.0, 1.0)),
        (0.2, 0.5, 3.0, 4000.0, None),
        (2.0, 1.1, 1.2, 2500.0, (0.0, None)),  # a loss falling to its floor (direction: minimize)
    ],
)
def test_the_fit_recovers_known_parameters_from_noiseless_points(r0, a, b, c_mid, bounds):
    fit = fit_curve(C, saturating_curve(C, r0, a, b, c_mid), a_bounds=bounds)
    assert fit.converged and fit.identified, fit.reason
    assert fit.r0 == pytest.approx(r0)
    assert (fit.a, fit.b, fit.c_mid) == pytest.approx((a, b, c_mid), rel=1e-5)
    assert fit.rmse < 1e-8


def test_the_fit_agrees_with_scipy_curve_fit_on_noisy_points():
    rng = np.random.default_rng(3)
    y = saturating_curve(C, 0.4, 0.7, 1.5, 3000.0) + rng.normal(0, 0.01, C.size)
    y[0] = 0.4
    ours = fit_curve(C, y)

    def model(c, a, b, c_mid):
        return 0.4 + (a - 0.4) / (1 + (c_mid / c) ** b)

    ref, _ = optimize.curve_fit(model, C[1:], y[1:], p0=(0.7, 1.0, 2000.0))
    assert (ours.a, ours.b, ours.c_mid) == pytest.approx(tuple(ref), rel=1e-5)


def test_r0_is_the_mean_of_the_start_evaluations_not_fitted():
    ys = [saturating_curve(C, 0.4, 0.7, 1.5, 3000.0) + d for d in (-0.01, 0.01)]
    ys[0][0], ys[1][0] = 0.38, 0.44
    fit = fit_curve([C, C], ys)
    assert fit.r0 == pytest.approx(0.41)


def test_not_identified_when_every_point_lies_before_the_midpoint():
    fit = fit_curve(C, saturating_curve(C, 0.4, 0.7, 1.5, 50_000.0), a_bounds=(0.0, 1.0))
    assert fit.converged and not fit.identified
    assert "beyond the largest observed compute" in fit.reason or "at or past the fitted midpoint" in fit.reason


def test_not_identified_with_one_point_past_the_midpoint():
    fit = fit_curve(C, saturating_curve(C, 0.4, 0.7, 4.0, 9500.0), a_bounds=(0.0, 1.0))
    assert fit.converged and not fit.identified
    assert fit.past_midpoint == 1 and "1 evaluation(s) at or past the fitted midpoint" in fit.reason


def test_a_flat_curve_has_a_singular_covariance():
    fit = fit_curve(C, np.full(C.size, 0.4), a_bounds=(0.0, 1.0))
    assert fit.converged and not fit.identified
    assert "singular covariance" in fit.reason


def test_a_ceiling_pinned_at_the_metrics_bound_is_not_identified():
    y = np.minimum(saturating_curve(C, 0.4, 1.3, 1.5, 3000.0), 1.0)
    fit = fit_curve(C, y, a_bounds=(0.0, 1.0))
    assert fit.converged and not fit.identified
    assert "at the metric's bound" in fit.reason


@pytest.mark.parametrize(
    ("compute", "score", "why"),
    [
        (C[1:], saturating_curve(C[1:], 0.4, 0.7, 1.5, 3000.0), "no evaluation at C = 0"),
        (C[:3], saturating_curve(C[:3], 0.4, 0.7, 1.5, 3000.0), "fewer than 3 evaluations"),
    ],
)
def test_a_fit_that_cannot_run_says_why(compute, score, why):
    fit = fit_curve(compute, score)
    assert not fit.converged and not fit.identified and why in fit.reason
    assert math.isnan(fit.a)


def test_an_optimiser_that_stops_early_gives_a_reason_not_an_exception(monkeypatch):
    def stopped(fun, x0, **kw):
        return optimize.OptimizeResult(
            x=np.asarray(x0), cost=1.0, fun=fun(x0), jac=kw["jac"](x0), status=0, message="max evaluations"
        )

    monkeypatch.setattr(scaling_module.optimize, "least_squares", stopped)
    fit = fit_curve(C, saturating_curve(C, 0.4, 0.7, 1.5, 3000.0))
    assert not fit.converged and "did not converge: max evaluations" in fit.reason
    arm = fit_scaling([C, C, C], [saturating_curve(C, 0.4, 0.7, 1.5, 3000.0)] * 3)
    assert math.isnan(arm.a_low) and "did not converge" in arm.interval_reason


def test_a_refit_without_a_seed_that_fails_leaves_no_interval(monkeypatch):
    real = scaling_module.fit_curve
    calls = []

    def flaky(*args, **kw):
        calls.append(kw.get("start"))
        fit = real(*args, **kw)
        if len(calls) == 3:  # the fit without the second seed
            return scaling_module._failed("the fit did not converge: test")
        return fit

    monkeypatch.setattr(scaling_module, "fit_curve", flaky)
    ys = [saturating_curve(C, 0.4, 0.7 + d, 1.5, 3000.0) for d in (-0.01, 0.0, 0.01)]
    arm = fit_scaling([C] * 3, ys, seeds=["s0", "s1", "s2"])
    assert arm.fit.identified and math.isnan(arm.a_low)
    assert arm.interval_reason.startswith("the fit without seed s1 did not converge")


def test_the_jackknife_interval_of_a_pure_ceiling_shift_is_the_t_interval_of_the_seeds():
    """Seeds that differ only by a shift d_i of A fitted exactly: A_hat is the mean of A + d_i, and
    the jackknife is exact for a mean, so the interval is scipy's t interval of the seeds' A."""
    shifts = np.array([-0.02, 0.005, 0.01, 0.03])
    ceilings = 0.7 + shifts
    ys = [saturating_curve(C, 0.4, a, 1.5, 3000.0) for a in ceilings]
    arm = fit_scaling([C] * 4, ys, alpha=0.1)
    low, high = sps.t.interval(0.9, 3, loc=ceilings.mean(), scale=sps.sem(ceilings))
    assert arm.fit.a == pytest.approx(ceilings.mean(), abs=1e-6)
    assert arm.se_a == pytest.approx(sps.sem(ceilings), rel=1e-3)
    assert (arm.a_low, arm.a_high) == pytest.approx((low, high), rel=1e-3)
    assert arm.level == 0.9 and arm.df == 3


def _arm(shifts, c_mid=3000.0, seeds=None):
    ys = [saturating_curve(C, 0.4, 0.7 + d, 1.5, c_mid) for d in shifts]
    return fit_scaling([C] * len(ys), ys, seeds=seeds)


def test_paired_and_welch_differences_follow_their_formulas():
    arm, control = _arm([0.0, 0.02, 0.05]), _arm([-0.03, 0.0, 0.01])
    paired = scaling_difference(arm, control, "ceiling")
    d = np.array([a[0] - c[0] for a, c in zip(arm.jackknife, control.jackknife)])
    assert paired.paired and paired.df == 2
    assert paired.diff == pytest.approx(arm.fit.a - control.fit.a)
    assert paired.se == pytest.approx(math.sqrt(2 / 3 * np.sum((d - d.mean()) ** 2)))
    welch = scaling_difference(arm, control, "ceiling", paired=False)
    va, vc = arm.se_a**2, control.se_a**2
    assert not welch.paired and welch.se == pytest.approx(math.sqrt(va + vc))
    assert welch.df == pytest.approx((va + vc) ** 2 / (va**2 / 2 + vc**2 / 2))
    other_seeds = _arm([-0.03, 0.0, 0.01], seeds=[7, 8, 9])
    assert not scaling_difference(arm, other_seeds, "ceiling").paired  # different seeds cannot pair


def test_the_efficiency_difference_is_the_log_ratio_of_the_midpoints():
    arm, control = _arm([0.0, 0.01, 0.02], c_mid=1000.0), _arm([0.0, 0.01, 0.02], c_mid=3000.0)
    d = scaling_difference(arm, control, "efficiency")
    assert d.diff == pytest.approx(math.log(1000.0 / 3000.0), abs=1e-4)


def test_a_quantity_of_a_fit_that_is_not_identified_gets_no_verdict():
    late = fit_scaling([C] * 3, [saturating_curve(C, 0.4, 0.7 + d, 1.5, 50_000.0) for d in (0, 0.01, 0.02)])
    d = scaling_difference(_arm([0.0, 0.01, 0.02]), late, "ceiling")
    assert not d.testable and d.reason.startswith("the control's fit is not identified")
    with pytest.raises(ValueError, match="unknown quantity"):
        scaling_difference(late, late, "slope")


def test_ceiling_verdicts_read_the_difference_like_the_main_verdicts():
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 0.003, (3, 3))
    control = _arm(noise[0])
    better = scaling_difference(_arm(0.15 + noise[1]), control, "ceiling")
    same = scaling_difference(_arm(noise[2]), control, "ceiling")
    labels = [v.label for v in decide([better, same], min_effect=0.05)]
    assert labels == ["better", "equivalent"]
    assert decide([better], direction="minimize", min_effect=0.05)[0].label == "worse"


def test_the_extrapolation_check_by_hand():
    """Both seeds lie on the true curve over the first half, so its fit is that curve; over the
    second half they sit +0.01 and +0.03 above it: the mean curve is 0.02 above the prediction,
    its seed SE sd/sqrt(2) = 0.01, and the band t_{1, 0.975} x 0.01 = 0.127."""
    truth = saturating_curve(C, 0.4, 0.7, 1.5, 2000.0)
    late = C > 5000
    ys = [truth + np.where(late, off, 0.0) for off in (0.01, 0.03)]
    check = extrapolation_check([C, C], ys, a_bounds=(0.0, 1.0))
    assert check.c_split == 5000.0 and check.fit.identified
    assert check.n_checked == 5
    assert check.rmse == pytest.approx(0.02, abs=1e-6)
    assert check.max_abs_error == pytest.approx(0.02, abs=1e-6)
    assert check.noise_se == pytest.approx(0.01, abs=1e-9)
    assert check.band == pytest.approx(sps.t.ppf(0.975, 1) * 0.01)
    assert check.within is True
    far = extrapolation_check([C, C], [truth + np.where(late, off, 0.0) for off in (0.2, 0.22)], a_bounds=(0, 1))
    assert far.rmse == pytest.approx(0.21, abs=1e-6) and far.within is False


def test_the_extrapolation_check_aligns_seeds_with_their_own_compute():
    """Seeds whose evaluations fall at different compute are compared on a shared grid (read
    off each seed's curve by linear interpolation: the error left is that interpolation's)."""
    cs = [C, C * 1.1]
    ys = [saturating_curve(c, 0.4, 0.7, 1.5, 2000.0) for c in cs]
    check = extrapolation_check(cs, ys)
    assert check.fit.a == pytest.approx(0.7) and check.fit.c_mid == pytest.approx(2000.0)
    assert check.c_split == 5500.0 and check.n_checked == 5
    assert check.rmse < 5e-4 and check.within


def test_one_seed_gives_a_fit_without_interval_or_noise_band():
    y = saturating_curve(C, 0.4, 0.7, 1.5, 2000.0)
    arm = fit_scaling([C], [y])
    assert arm.fit.identified and math.isnan(arm.a_low) and arm.interval_reason.startswith("one seed")
    check = extrapolation_check([C], [y])
    assert check.within is None and check.reason == "one seed: no noise band"


def test_bad_input_is_refused_with_a_clear_message():
    with pytest.raises(ValueError, match="same seeds"):
        fit_curve([C, C], [C])
    with pytest.raises(ValueError, match="compute must be >= 0"):
        fit_curve(-C, C)


def test_the_prompt_jackknife_is_the_grouped_jackknife_of_the_prompts_ceilings():
    """Every prompt's curve has its own ceiling A + w_p, and the seeds are alike: A_hat is A plus
    the mean of w, and its variance is the grouped jackknife's over 10 groups of 2 prompts, with
    G - 1 = 9 df (the seeds add nothing)."""
    w = np.random.default_rng(4).normal(0, 0.05, 20)
    table = saturating_curve(C[:, None], 0.4, 0.7 + w[None, :], 1.5, 3000.0)
    arm = fit_scaling(
        [C] * 3, [table.mean(axis=1)] * 3, prompt_scores=[table] * 3, prompts=[f"p{i}" for i in range(20)]
    )
    assert arm.fit.a == pytest.approx(0.7 + w.mean(), abs=1e-6)
    left_out = np.array([np.delete(w, [2 * g, 2 * g + 1]).mean() for g in range(10)])
    var = 9 / 10 * np.sum((left_out - left_out.mean()) ** 2)
    assert arm.se_a == pytest.approx(math.sqrt(var), rel=1e-3)
    crit = sps.t.ppf(0.975, 9)
    assert arm.a_high - arm.fit.a == pytest.approx(crit * arm.se_a, rel=1e-3)
    assert len(arm.prompt_jackknife) == 10 and arm.prompts[0] == "p0"


def test_a_difference_pairs_the_prompt_groups_of_arms_scored_on_the_same_prompts():
    w = np.random.default_rng(5).normal(0, 0.05, 20)
    shifts = (-0.01, 0.0, 0.01)

    def arm(extra):
        tables = [saturating_curve(C[:, None], 0.4, 0.7 + extra + d + w[None, :], 1.5, 3000.0) for d in shifts]
        return fit_scaling([C] * 3, [t.mean(axis=1) for t in tables], prompt_scores=tables)

    d = scaling_difference(arm(0.1), arm(0.0), "ceiling")
    assert d.test == "seed jackknife, paired + prompt jackknife"
    assert d.diff == pytest.approx(0.1, abs=1e-5)
    assert d.se < 1e-4  # the prompts' ceilings and the seeds' shifts are shared: both cancel


def test_prompt_scores_of_the_wrong_shape_are_refused():
    with pytest.raises(ValueError, match=r"\[evaluations x prompts\]"):
        fit_scaling([C] * 2, [C] * 2, prompt_scores=[np.ones((3, 4))] * 2)
