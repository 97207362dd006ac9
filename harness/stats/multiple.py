"""Multiple-comparison adjustment of p-values (Holm step-down; Benjamini-Hochberg step-up)."""

from __future__ import annotations

import numpy as np

METHODS = ("holm", "bh")


def adjust_pvalues(pvalues, *, method: str = "holm") -> np.ndarray:
    """Adjusted p-values, in the input order; reject where adjusted p < alpha.

    * ``"holm"`` (Holm 1979): controls the family-wise error rate under any dependence.
      Sorted ascending, p_adj(i) = max_{j <= i} min(1, (m - j + 1) p(j)).
    * ``"bh"`` (Benjamini & Hochberg 1995): controls the false discovery rate (independent or
      positively dependent tests). p_adj(i) = min_{j >= i} min(1, m p(j) / j).

    A 1-D array is one family. A 2-D array is one family per row (vectorised simulations).
    NaN p-values (comparisons that could not be tested) stay NaN and do not count in m.
    Unknown ``method`` -> ValueError listing the valid ones.
    """
    if method not in METHODS:
        raise ValueError(f"unknown p-value adjustment method {method!r}; valid: {', '.join(METHODS)}")
    p = np.asarray(pvalues, dtype=float)
    if p.ndim == 0:
        p = p.reshape(1)
    if p.ndim > 2:
        raise ValueError(f"pvalues must be 1-D (one family) or 2-D (a family per row); got shape {p.shape}")
    valid = ~np.isnan(p)
    if np.any((p[valid] < 0) | (p[valid] > 1)):
        raise ValueError("p-values must lie in [0, 1]")
    rows = np.atleast_2d(p)
    k = rows.shape[1]
    order = np.argsort(rows, axis=1, kind="stable")  # NaN sorts last
    sorted_p = np.take_along_axis(rows, order, axis=1)
    m = np.sum(~np.isnan(rows), axis=1, keepdims=True)
    ranks = np.arange(1, k + 1)[None, :]
    if method == "holm":
        adj = np.maximum.accumulate(np.minimum(1.0, (m - ranks + 1) * sorted_p), axis=1)  # NaNs trail
    else:
        scaled = np.where(np.isnan(sorted_p), np.inf, m * sorted_p / ranks)
        adj = np.minimum(1.0, np.minimum.accumulate(scaled[:, ::-1], axis=1)[:, ::-1])
    adj = np.where(np.isnan(sorted_p), np.nan, adj)
    out = np.empty_like(rows)
    np.put_along_axis(out, order, adj, axis=1)
    return out.reshape(p.shape)
