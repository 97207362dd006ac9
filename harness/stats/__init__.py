"""Statistics for seed-noise-aware comparisons: pure numpy/scipy functions over arrays.

No plotting, no torch, no MLflow. Every random draw takes an explicit ``rng`` (a
``np.random.Generator`` or an int seed; None means a generator seeded with 0, so reports are
reproducible). Result objects are frozen dataclasses whose ``to_dict()`` is JSON-safe
(NaN/inf become None).

Map:
    noise      noise_floor -> NoiseFloor
    power      seeds_needed, minimal_detectable_effect, power_two_sample, power_paired
    compare    compare -> Comparison (with robustness Checks); welch_test / paired_test cores
    multiple   adjust_pvalues ("holm", "bh")
    verdict    verdicts -> [Verdict]
    bootstrap  Interval, bootstrap_ci (reporting only)
    curves     curve_band, align_on_grid
"""

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
    welch_test,
    yuen_test,
)
from .curves import align_on_grid, curve_band
from .multiple import adjust_pvalues
from .noise import NoiseFloor, noise_floor, std_interval
from .power import (
    minimal_detectable_effect,
    power_paired,
    power_two_sample,
    seeds_needed,
    seeds_needed_paired,
)
from .verdict import LABELS, Verdict, clears_noise_floor, verdicts

__all__ = [
    "Check", "Comparison", "Interval", "LABELS", "NoiseFloor", "TTest", "Verdict",
    "adjust_pvalues", "align_on_grid", "bootstrap_ci", "bootstrap_diff_ci",
    "clears_noise_floor", "compare", "curve_band", "hedges_g", "mann_whitney_check",
    "minimal_detectable_effect", "noise_floor", "paired_test", "permutation_check", "power_paired",
    "power_two_sample", "prob_improvement", "seeds_needed",
    "seeds_needed_paired", "sign_flip_check", "std_interval", "verdicts", "welch_test", "yuen_test",
]
