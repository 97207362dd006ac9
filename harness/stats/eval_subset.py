"""The added variance of reading a comparison on a stratified subset of the held-out prompts.

An intermediate evaluation of a study with ``eval_subset`` scores a fixed stratified sample of
the N held-out prompts: stratum h holds N_h of them (W_h = N_h / N) and the subset n_h
(f_h = n_h / N_h). The full set's mean of a per-prompt quantity d (here the paired per-prompt
difference of two arms' means over their seeds) is estimated by the stratified mean

    d_st = sum_h W_h dbar_h                                           (Cochran 1977, eq. 5.1)

with dbar_h the mean over the stratum's sampled prompts. It is unbiased for the full set's mean,
and its sampling variance over draws of the subset is estimated by

    v(d_st) = sum_h W_h^2 (1 - f_h) s_h^2 / n_h                       (Cochran 1977, eq. 5.10)

(Theorem 5.3, with the finite-population correction 1 - f_h), s_h^2 the sample variance
(ddof=1) of d over the stratum's sampled prompts; its degrees of freedom are Satterthwaite's,

    n_e = (sum_h g_h s_h^2)^2 / sum_h g_h^2 s_h^4 / (n_h - 1),   g_h = N_h (N_h - n_h) / n_h
                                                                      (Cochran 1977, section 5.4)

W. G. Cochran, *Sampling Techniques*, 3rd ed., Wiley 1977, chapter 5.

The error of a comparison read on the subset, against the full set's mean difference, is the
test's own error on the subset (training seeds, eval sampling: its standard error ``se``) plus
the subset's draw (v above), independent of it: the subset is fixed before any training. So
the interval reads ``sqrt(se^2 + v)`` with the Welch-Satterthwaite combination of the two dfs
(:func:`widen`). s_h^2 of the observed differences also holds their training noise, which
``se`` counts already, and the seed x prompt test's ``se`` treats the prompts as drawn from a
population: both make the sum conservative (wider), never narrower than it should be.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._util import JsonMixin


@dataclass(frozen=True)
class SubsetVariance(JsonMixin):
    """The stratified mean of a per-prompt quantity over a subset, its estimated sampling
    variance about the full set's mean (``variance``) and Satterthwaite's df of it (inf when
    the variance is 0: every stratum read whole, or no spread)."""

    mean: float
    variance: float
    df: float
    n_subset: int
    n_full: int


def subset_variance(values, strata, stratum_sizes: dict[int, int]) -> SubsetVariance:
    """Cochran's stratified mean and its variance (eqs. 5.1, 5.10) of ``values`` (one per sampled
    prompt) in ``strata`` (each prompt's stratum label), with ``stratum_sizes`` the N_h of every
    stratum of the full set. Every stratum needs at least 2 sampled prompts where it was not
    read whole (a variance of one), and no more than its size (a ValueError otherwise)."""
    values = np.asarray(values, dtype=float)
    strata = np.asarray(strata)
    if values.shape != strata.shape or values.ndim != 1:
        raise ValueError("values and strata must be 1-d and of one length")
    n_full = sum(stratum_sizes.values())
    labels = set(strata.tolist())
    if not labels <= set(stratum_sizes):
        raise ValueError(f"strata {sorted(labels - set(stratum_sizes))} have no size")
    mean = variance = 0.0
    g_s2, g2_s4 = 0.0, 0.0
    for label, size in stratum_sizes.items():
        d = values[strata == label]
        n = len(d)
        if n == 0 or n > size:
            raise ValueError(f"stratum {label}: {n} sampled prompts of {size}")
        weight = size / n_full
        mean += weight * float(d.mean())
        if n == size:  # read whole: no sampling error
            continue
        if n < 2:
            raise ValueError(f"stratum {label}: 1 sampled prompt of {size} has no variance")
        s2 = float(d.var(ddof=1))
        variance += weight**2 * (1.0 - n / size) * s2 / n
        g = size * (size - n) / n
        g_s2 += g * s2
        g2_s4 += g**2 * s2**2 / (n - 1)
    df = g_s2**2 / g2_s4 if g2_s4 > 0 else math.inf
    return SubsetVariance(mean, variance, df, len(values), n_full)


def widen(se: float, df: float, added: SubsetVariance) -> tuple[float, float]:
    """(se, df) of a test's difference with the subset's variance added: ``sqrt(se^2 + v)``, and
    the Welch-Satterthwaite df ``(se^2 + v)^2 / (se^4 / df + v^2 / n_e)``."""
    v = added.variance
    total = se**2 + v
    if v == 0:
        return se, df
    denominator = (se**4 / df if math.isfinite(df) else 0.0) + (v**2 / added.df if math.isfinite(added.df) else 0.0)
    return math.sqrt(total), (total**2 / denominator if denominator > 0 else math.inf)
