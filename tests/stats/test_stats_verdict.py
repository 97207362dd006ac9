"""decide(): better / worse / equivalent / inconclusive from one Bonferroni interval; label_of,
interval_level, the family, direction, planning figures, degenerate comparisons."""

import json
import math

import numpy as np
import pytest
from scipy import stats

from harness.stats import (
    LABELS,
    PlanVariance,
    adjust_pvalues,
    compare,
    decide,
    interval_level,
    label_of,
    paired_test,
    seed_prompt_difference,
    seeds_needed,
    seeds_to_decide,
    trial_means_difference,
    welch_test,
    yuen_test,
)

A, C = [1.0, 2.0, 3.0], [4.0, 5.0, 6.0]  # Welch: diff -3, se sqrt(2/3), df 4, p = 0.0213


def welch(arm, control):
    return trial_means_difference(arm, control, test="welch_t")


def test_clear_effect_is_worse_when_maximizing_and_better_when_minimizing():
    d = welch(A, C)
    c = compare(A, C)
    assert d.diff == -3.0 and d.df == pytest.approx(4.0) and d.se == pytest.approx(math.sqrt(2 / 3))
    (v,) = decide([d])
    assert v.label == "worse" and v.label in LABELS
    assert v.p_value == pytest.approx(c.p_value) == pytest.approx(0.0213, abs=1e-4)
    assert v.p_adjusted == pytest.approx(c.p_value)  # m = 1
    assert v.ci_level == 0.95 and v.family_size == 1 and v.seeds_run == 3
    assert (v.ci_low, v.ci_high) == pytest.approx((c.ci_low, c.ci_high))  # the 95% Welch interval
    assert "Worse than the control by -3" in v.reason
    (v,) = decide([d], direction="minimize")
    assert v.label == "better" and "Better than the control" in v.reason


def test_multiplicity_widens_the_interval_and_can_remove_a_clear_verdict():
    d = welch(A, C)
    vs = decide([d] * 3)  # Bonferroni: each interval at 1 - 0.05 / 3, p_adjusted = 3 p = 0.064
    assert all(v.label == "inconclusive" and v.family_size == 3 for v in vs)
    assert vs[0].ci_level == pytest.approx(1 - 0.05 / 3)
    half = stats.t.ppf(1 - 0.05 / 6, 4) * math.sqrt(2 / 3)
    assert (vs[0].ci_low, vs[0].ci_high) == pytest.approx((-3 - half, -3 + half))
    # with all p equal Holm's adjustment is Bonferroni's; BH leaves them as they are
    p = vs[0].p_value
    assert vs[0].p_adjusted == pytest.approx(3 * p)
    np.testing.assert_allclose([v.p_adjusted for v in vs], adjust_pvalues([p] * 3, method="holm"))
    np.testing.assert_allclose(adjust_pvalues([p] * 3, method="bh"), [p] * 3)
    # correction="none": each comparison alone, the clear verdict comes back
    assert [v.label for v in decide([d] * 3, correction="none")] == ["worse"] * 3


def test_p_adjusted_below_alpha_exactly_when_the_interval_excludes_zero():
    rng = np.random.default_rng(0)
    diffs = [welch(rng.normal(1.5, 1.0, 4), rng.normal(0.0, 1.0, 5)) for _ in range(60)]
    for m in (1, 3):
        decided = []
        for start in range(0, len(diffs), m):
            for v in decide(diffs[start : start + m]):
                assert v.family_size == m
                assert (v.p_adjusted < 0.05) == (v.label in ("better", "worse")), v
                decided.append(v.label in ("better", "worse"))
        assert 0 < sum(decided) < len(diffs)  # both outcomes occur


def test_equivalent_inside_the_margin_and_inconclusive_beyond_it():
    rng = np.random.default_rng(1)
    arm, control = 0.5 + rng.normal(0, 0.01, 6), 0.5 + rng.normal(0, 0.01, 6)
    d = welch(arm, control)
    lo, hi = welch_test(arm, control).ci_low, welch_test(arm, control).ci_high
    width = max(abs(lo), abs(hi))
    (v,) = decide([d], min_effect=1.5 * width)
    assert v.label == "equivalent" and not v.smaller_than_min_effect
    assert "inside +-" in v.reason
    (v,) = decide([d], min_effect=0.5 * width)  # the interval reaches beyond the margin
    assert v.label == "inconclusive" and "beyond" in v.reason
    (v,) = decide([d])  # no margin: no equivalence can be concluded
    assert v.label == "inconclusive" and "without min_effect" in v.reason


def test_smaller_than_min_effect_flags_a_real_but_small_difference():
    arm, control = [1.00, 1.01, 1.02, 1.03], [0.90, 0.91, 0.92, 0.93]  # diff 0.1, tiny noise
    (v,) = decide([welch(arm, control)], min_effect=0.5)
    assert v.label == "better" and v.smaller_than_min_effect
    assert "smaller than min_effect" in v.reason
    (v,) = decide([welch(arm, control)], min_effect=0.05)
    assert v.label == "better" and not v.smaller_than_min_effect


def test_label_of_is_vectorised_and_follows_direction():
    lo = np.array([0.1, -0.5, -0.2, -0.5, 0.05])
    hi = np.array([0.5, -0.1, 0.2, 0.8, 0.15])
    labels, small = label_of(lo, hi, margin=0.3)
    assert list(labels) == ["better", "worse", "equivalent", "inconclusive", "better"]
    assert list(small) == [False, False, False, False, True]
    labels, _ = label_of(lo, hi, margin=0.3, direction="minimize")
    assert list(labels) == ["worse", "better", "equivalent", "inconclusive", "worse"]
    labels, small = label_of(lo, hi, margin=None)
    assert list(labels) == ["better", "worse", "inconclusive", "inconclusive", "better"] and not small.any()
    # the bounds are open: an interval touching 0 or the margin decides nothing
    assert label_of(0.0, 1.0, margin=None)[0] == "inconclusive"
    assert label_of(-0.3, 0.1, margin=0.3)[0] == "inconclusive"
    assert label_of(np.zeros((2, 3)), np.ones((2, 3)), margin=None)[0].shape == (2, 3)


def test_interval_level():
    assert interval_level(0.05, 1) == 0.95
    assert interval_level(0.05, 6) == pytest.approx(1 - 0.05 / 6)
    assert interval_level(0.05, 6, "none") == 0.95
    assert interval_level(0.05, 0) == 0.95  # an empty family is treated as one comparison
    with pytest.raises(ValueError, match="bonferroni, none"):
        interval_level(0.05, 2, "holm")


def test_planning_figures_are_seeds_to_decide_at_the_verdict_level():
    rng = np.random.default_rng(2)
    arm, control = rng.normal(0.3, 1.0, 5), rng.normal(0.0, 1.0, 5)
    d = welch(arm, control)
    assert d.plan.seed == pytest.approx(arm.var(ddof=1) + control.var(ddof=1)) and d.plan.prompt == 0.0
    vs = decide([d, d], min_effect=1.0)
    level = 1 - 0.05 / 2
    assert vs[0].planning_effect == 1.0
    assert vs[0].seeds_needed_effect == seeds_to_decide(1.0, d.plan, level=level, margin=1.0)
    assert vs[0].seeds_needed_null == seeds_to_decide(0.0, d.plan, level=level, margin=1.0)
    # a trial-means plan at equal sds asks what Welch's own sample-size formula asks (at n >= 4:
    # planning uses the df at the true variances, see test_stats_planning.py)
    sd = math.sqrt(d.plan.seed / 2)
    (v,) = decide([d], planning_effect=3 * sd)
    assert v.seeds_needed_null is None  # no margin: a true difference of 0 is never decided
    assert v.seeds_needed_effect == seeds_needed(3.0, 1.0) == 4
    # without min_effect or planning_effect: no planning figures
    (v,) = decide([d])
    assert v.seeds_needed_effect is None and v.seeds_needed_null is None and math.isnan(v.planning_effect)


def test_paired_difference_plans_with_the_sd_of_differences():
    rng = np.random.default_rng(0)
    base = rng.normal(0, 1.0, 6)
    arm, control = base + 0.05 + rng.normal(0, 0.1, 6), base + rng.normal(0, 0.1, 6)
    d = trial_means_difference(arm, control, test="paired_t")
    t = paired_test(arm, control)
    assert d.paired and d.test == "paired_t" and d.df == 5
    assert (d.diff, d.se) == pytest.approx((float(t.diff), float(t.se)))
    assert d.plan.seed == pytest.approx((arm - control).var(ddof=1)) and d.plan.paired
    (v,) = decide([d], min_effect=0.3)
    assert v.test == "paired_t"
    assert v.seeds_needed_effect == seeds_to_decide(0.3, d.plan, level=0.95, margin=0.3)


def test_trial_means_difference_matches_the_cores_and_checks_its_arguments():
    rng = np.random.default_rng(3)
    arm, control = rng.normal(0.5, 1.0, 7), rng.normal(0.0, 2.0, 9)
    for test, core in (("welch_t", welch_test), ("yuen", yuen_test)):
        d, t = trial_means_difference(arm, control, test=test), core(arm, control)
        assert (d.diff, d.se, d.df) == pytest.approx((float(t.diff), float(t.se), float(t.df)))
        assert d.test == test and not d.paired and d.se_trial_means == d.se and d.testable
    with pytest.raises(ValueError, match="same seeds"):
        trial_means_difference(arm, control, test="paired_t")
    with pytest.raises(ValueError, match="welch_t, paired_t, yuen"):
        trial_means_difference(arm, control, test="seed_prompt")


def test_unreachable_effect_says_to_add_prompts():
    # a large arm x prompt component and 8 prompts: the variance never falls below 2 s_w^2 / P
    rng = np.random.default_rng(4)
    w = rng.normal(0, 1.0, (2, 8))
    arm = 0.1 + w[0] + rng.normal(0, 0.2, (4, 8))
    control = w[1] + rng.normal(0, 0.2, (4, 8))
    d = seed_prompt_difference(arm, control, paired=False)
    assert d.plan.prompt > 0.5
    (v,) = decide([d], min_effect=0.05)
    assert v.seeds_needed_effect is None and v.seeds_needed_null is None
    assert "add eval prompts" in v.reason and "with 8 eval prompts" in v.reason
    # a reachable but distant effect says "more than max_n"
    plan = PlanVariance(seed=1.0, prompt=0.0, residual=0.0, sampling=0.0, n_prompts=1, samples=1, paired=False)
    assert seeds_to_decide(0.05, plan, level=0.95, max_n=100) is None
    (v,) = decide([welch([0.0, 1.0, 2.0], [0.0, 1.5, 1.5])], planning_effect=0.01, max_n=100)
    assert v.seeds_needed_effect is None and "more than 100 seeds" in v.reason


def test_degenerate_comparisons_are_untested_with_reason_and_leave_the_family():
    ds = [welch([0.4], [0.1, 0.2]), welch([1.0, 1.0], [0.0, 0.0]), welch(A, C)]
    assert [d.testable for d in ds] == [False, False, True]
    vs = decide(ds, min_effect=1.0)
    assert [v.label for v in vs[:2]] == ["untested", "untested"]  # never "inconclusive": not tested
    assert "at least 2 seeds" in vs[0].reason and "zero variance" in vs[1].reason
    assert math.isnan(vs[1].p_adjusted) and vs[0].seeds_needed_effect is None
    # the untestable comparisons do not count in the family: m = 1
    assert vs[2].family_size == 1 and vs[2].ci_level == 0.95
    assert vs[2].p_adjusted == pytest.approx(compare(A, C).p_value)
    json.dumps([v.to_dict() for v in vs], allow_nan=False)


def test_ci_is_recomputed_at_the_verdict_level():
    c = compare(A, C, alpha=0.2)
    (v,) = decide([welch(A, C)], alpha=0.05)
    assert v.ci_low == pytest.approx(-3 - 2.266958, abs=1e-6)  # t(0.975, 4) sqrt(2/3)
    assert c.ci_low > v.ci_low  # the comparison's own 80% CI is narrower


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(direction="up"), "maximize, minimize"),
        (dict(correction="holm"), "bonferroni, none"),
        (dict(min_effect=0.0), "min_effect"),
        (dict(min_effect=math.inf), "min_effect"),
        (dict(alpha=0.0), "alpha"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        decide([welch(A, C)], **kwargs)


def test_rejects_non_differences():
    with pytest.raises(TypeError, match="Difference"):
        decide([compare(A, C)])
    with pytest.raises(TypeError):
        decide([{"p_value": 0.01}])
