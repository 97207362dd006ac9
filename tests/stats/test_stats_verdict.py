"""verdicts(): the three labels, multiplicity, direction, degenerate comparisons."""

import json
import math

import numpy as np
import pytest

from harness.stats import (
    LABELS,
    adjust_pvalues,
    compare,
    seeds_needed,
    seeds_needed_paired,
    verdicts,
)


def test_clear_effect_clears_and_direction_is_reported():
    c = compare([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])  # Welch p = 0.0213
    (v,) = verdicts([c])
    assert v.label == "clears noise floor"
    assert v.p_adjusted == pytest.approx(c.p_value)
    assert v.direction_ok is False  # arm is worse and we maximize
    assert "worse" in v.reason
    assert "mann_whitney" in v.robustness_note and "cannot reach" in v.robustness_note
    (v,) = verdicts([c], direction="minimize")
    assert v.direction_ok is True and "improves" in v.reason
    assert v.label in LABELS


def test_multiplicity_can_remove_a_clear_verdict():
    c = compare([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])  # raw p 0.0213
    family = [c] * 3  # Holm: 3 * 0.0213 = 0.064
    vs = verdicts(family)
    np.testing.assert_allclose([v.p_adjusted for v in vs], adjust_pvalues([c.p_value] * 3))
    assert all(v.label != "clears noise floor" for v in vs)
    # seeds are planned at alpha / m = 0.05 / 3 for the observed |diff| = 3 with sds 1 and 1
    assert vs[0].seeds_needed == seeds_needed(3.0, 1.0, 1.0, alpha=0.05 / 3)
    assert vs[0].label == ("underpowered" if 3 < vs[0].seeds_needed else "within noise")
    assert verdicts(family, method="bh")[0].p_adjusted == pytest.approx(c.p_value)  # all equal p: BH leaves them


def test_underpowered_vs_within_noise():
    arm, control = [0.50, 0.62, 0.55, 0.47, 0.58], [0.52, 0.49, 0.60, 0.51, 0.56]
    c = compare(arm, control)
    assert c.p_value > 0.05
    (v,) = verdicts([c])  # observed |diff| tiny relative to the noise: far more seeds needed
    assert v.label == "underpowered"
    assert v.seeds_needed == seeds_needed(abs(c.diff), c.std_arm, c.std_control) > 5
    assert str(v.seeds_needed) in v.reason and "5 were run" in v.reason
    # a pre-registered target effect of 0.2 (about 4 seed sds) is detectable with 5 seeds
    (v,) = verdicts([c], target_effect=0.2)
    assert v.seeds_needed == seeds_needed(0.2, c.std_arm, c.std_control) <= 5
    assert v.label == "within noise"
    assert v.effect_for_power == pytest.approx(0.2)
    # a smaller target makes the same data underpowered again
    assert verdicts([c], target_effect=0.03)[0].label == "underpowered"


def test_paired_verdict_plans_with_the_sd_of_differences():
    rng = np.random.default_rng(0)
    base = rng.normal(0, 1.0, 6)
    arm, control = base + 0.05 + rng.normal(0, 0.1, 6), base + rng.normal(0, 0.1, 6)
    c = compare(arm, control, paired=True)
    (v,) = verdicts([c], target_effect=0.3)
    assert v.seeds_needed == seeds_needed_paired(0.3, c.std_diff)
    assert v.test == "paired_t"


def test_unreachable_effect_is_reported_as_more_than_max_n():
    c = compare([1.0, 2.0, 3.0], [1.0, 2.5, 2.5])  # diff exactly 0
    (v,) = verdicts([c], max_n=1000)
    assert v.seeds_needed == 1001 and v.label == "underpowered"
    assert "more than 1000" in v.reason


def test_degenerate_comparisons_are_underpowered_with_reason():
    vs = verdicts([compare([0.4], [0.1, 0.2]), compare([1.0, 1.0], [0.0, 0.0]), compare([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])])
    assert [v.label for v in vs[:2]] == ["underpowered", "underpowered"]
    assert vs[0].seeds_needed is None and "at least 2 seeds" in vs[0].reason
    assert "zero variance" in vs[1].reason and math.isnan(vs[1].p_adjusted)
    # the untestable comparisons do not count in the multiplicity family
    assert vs[2].p_adjusted == pytest.approx(compare([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]).p_value)  # m = 1
    json.dumps([v.to_dict() for v in vs], allow_nan=False)


def test_ci_is_recomputed_at_the_verdict_alpha():
    c = compare([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], alpha=0.2)
    (v,) = verdicts([c], alpha=0.05)
    assert v.ci_low == pytest.approx(-3 - 2.266958, abs=1e-6)
    assert c.ci_low > v.ci_low  # the comparison's own 80% CI is narrower


@pytest.mark.parametrize("kwargs, match", [
    (dict(direction="up"), "maximize, minimize"),
    (dict(method="bonferroni"), "holm, bh"),
    (dict(target_effect=0.0), "target_effect"),
    (dict(alpha=0.0), "alpha"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        verdicts([compare([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])], **kwargs)


def test_rejects_non_comparisons():
    with pytest.raises(TypeError):
        verdicts([{"p_value": 0.01}])
