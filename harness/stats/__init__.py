"""Statistics for seed-noise-aware comparisons: pure numpy/scipy functions over arrays.

No plotting, no torch, no MLflow. Every random draw takes an explicit ``rng`` (a
``np.random.Generator`` or an int seed; None means a generator seeded with 0, so reports are
reproducible). Result objects are frozen dataclasses whose ``to_dict()`` is JSON-safe
(NaN/inf become None).

Map:
    noise      noise_floor -> NoiseFloor (Bonett / chi-square sd intervals)
    binary_paired  0/1 scores: McNemar exact + Newcombe interval, PairedCounts (few discordant prompts)
    crossed    seed_prompt_difference -> Difference (seed x prompt), PlanVariance
    components variance_components of several arms' seed x prompt tables
    pass_at_k  pass_at_k, pass_hat_k (unbiased pass@k and pass^k from n samples, c correct)
    planning   decision_probability, seeds_to_decide (prospective, at a chosen effect)
    power      seeds_needed, minimal_detectable_effect, power_two_sample, power_paired
    compare    compare -> Comparison (with robustness Checks); trial_means_difference -> Difference
    multiple   adjust_pvalues ("holm", "bh")
    eval_subset subset_variance -> SubsetVariance (Cochran's stratified variance of a subset read), widen
    eval_only  eval_only_difference -> Difference over prompts (one training run; 0/1: binary), EvalOnlySplit,
               eval_only_mean (the overall one across benchmarks)
    verdict    decide -> [Verdict]: better / worse / equivalent / inconclusive (eval-only forms), untested
    sequential efficacy_bounds (Lan-DeMets), Look (repeated intervals), look_odds
    compute_looks  look_alphas, stop_rate, stops (looks over compute: spending on the compute fraction, union
               bound over the looks), draw_scores and simulate (a design's calibration)
    bootstrap  Interval, bootstrap_ci (reporting only)
    aggregates benchmarks_difference (the overall verdict's); rliable's iqm, probability_of_improvement,
               performance_profile, stratified_bootstrap
    curves     curve_band, align_on_grid
    scaling    fit_curve, fit_scaling (saturating compute curves, seed-jackknife intervals),
               scaling_difference (ceiling, efficiency), extrapolation_check
"""

from .aggregates import (
    benchmarks_difference,
    iqm,
    performance_profile,
    probability_of_improvement,
    stratified_bootstrap,
    stratified_interval,
)
from .binary_paired import (
    BINARY_TEST,
    EVAL_ONLY_BINARY_TEST,
    PairedCounts,
    is_binary,
    mcnemar_exact_p,
    newcombe_interval,
)
from .bootstrap import Interval, bootstrap_ci, bootstrap_diff_ci
from .compare import (
    Check,
    Comparison,
    TTest,
    compare,
    hedges_g,
    mann_whitney_check,
    paired_test,
    permutation_check,
    prob_improvement,
    sign_flip_check,
    trial_means_difference,
    welch_test,
    yuen_test,
)
from .components import COMBINED, SOURCES, Components, variance_components
from .crossed import Difference, PlanVariance, seed_prompt_difference, seed_prompt_se
from .curves import align_on_grid, curve_band
from .eval_only import (
    EVAL_ONLY_MEAN_TEST,
    EVAL_ONLY_TEST,
    EVAL_ONLY_TESTS,
    EvalOnlySplit,
    OneRunComponents,
    eval_only_difference,
    eval_only_mean,
    one_run_components,
    prompt_differences,
)
from .eval_subset import SubsetVariance, subset_variance, widen
from .multiple import adjust_pvalues
from .noise import NoiseFloor, bonett_std_interval, chi_square_std_interval, noise_floor
from .pass_at_k import pass_at_k, pass_hat_k
from .planning import decision_probability, seeds_can_decide, seeds_to_decide
from .power import (
    minimal_detectable_effect,
    power_paired,
    power_two_sample,
    seeds_needed,
    seeds_needed_paired,
)
from .scaling import (
    EFFICIENCY_LABELS,
    CurveFit,
    Extrapolation,
    ScalingFit,
    extrapolation_check,
    fit_curve,
    fit_scaling,
    saturating_curve,
    scaling_difference,
)
from .sequential import SPENDING, Look, LookOdds, efficacy_bounds, look_odds
from .verdict import (
    CORRECTIONS,
    EVAL_ONLY_LABELS,
    LABELS,
    UNTESTED,
    Verdict,
    check_margin,
    decide,
    interval_level,
    label_of,
)

__all__ = [
    "SubsetVariance",
    "subset_variance",
    "widen",
    "COMBINED",
    "BINARY_TEST",
    "PairedCounts",
    "is_binary",
    "mcnemar_exact_p",
    "newcombe_interval",
    "CORRECTIONS",
    "EFFICIENCY_LABELS",
    "CurveFit",
    "Extrapolation",
    "ScalingFit",
    "extrapolation_check",
    "fit_curve",
    "fit_scaling",
    "saturating_curve",
    "scaling_difference",
    "EVAL_ONLY_LABELS",
    "EVAL_ONLY_TEST",
    "EVAL_ONLY_TESTS",
    "EVAL_ONLY_MEAN_TEST",
    "EVAL_ONLY_BINARY_TEST",
    "EvalOnlySplit",
    "OneRunComponents",
    "one_run_components",
    "UNTESTED",
    "eval_only_difference",
    "eval_only_mean",
    "prompt_differences",
    "SOURCES",
    "SPENDING",
    "Look",
    "LookOdds",
    "efficacy_bounds",
    "look_odds",
    "Check",
    "Components",
    "Comparison",
    "Difference",
    "Interval",
    "LABELS",
    "NoiseFloor",
    "PlanVariance",
    "TTest",
    "Verdict",
    "adjust_pvalues",
    "benchmarks_difference",
    "iqm",
    "performance_profile",
    "probability_of_improvement",
    "stratified_bootstrap",
    "stratified_interval",
    "align_on_grid",
    "bonett_std_interval",
    "bootstrap_ci",
    "bootstrap_diff_ci",
    "check_margin",
    "chi_square_std_interval",
    "compare",
    "curve_band",
    "decide",
    "decision_probability",
    "hedges_g",
    "interval_level",
    "label_of",
    "mann_whitney_check",
    "minimal_detectable_effect",
    "noise_floor",
    "paired_test",
    "pass_at_k",
    "pass_hat_k",
    "permutation_check",
    "power_paired",
    "power_two_sample",
    "prob_improvement",
    "seed_prompt_difference",
    "seed_prompt_se",
    "seeds_can_decide",
    "seeds_needed",
    "seeds_needed_paired",
    "seeds_to_decide",
    "sign_flip_check",
    "trial_means_difference",
    "variance_components",
    "welch_test",
    "yuen_test",
]
