"""pass@k and pass^k: the unbiased estimators from n sampled answers of which c are correct.

* **pass@k** (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"): the chance
  that at least one of k answers drawn without replacement from the n is correct,
  ``1 - C(n - c, k) / C(n, k)``; unbiased for ``1 - (1 - p)^k`` when the n answers are
  independent draws with success probability p.
* **pass^k** (Yao et al. 2024, tau-bench): the chance that *all* k drawn answers are correct,
  ``C(c, k) / C(n, k)``; unbiased for ``p^k``. It measures reliability where pass@k measures
  coverage.

Both are computed as products (Chen et al.'s numerically stable form) rather than with
factorials, vectorised over arrays of c (and n); k <= n.
"""

from __future__ import annotations

import numpy as np


def _check(n, c, k: int):
    n_arr = np.asarray(n, dtype=float)
    c_arr = np.asarray(c, dtype=float)
    if k < 1 or np.any(n_arr < k):
        raise ValueError(f"pass@k needs 1 <= k <= n; got k={k} with n={np.min(n_arr):g}")
    if np.any((c_arr < 0) | (c_arr > n_arr)) or np.any(c_arr != np.round(c_arr)):
        raise ValueError("the correct counts c must be whole numbers between 0 and n")
    return n_arr, c_arr


def pass_at_k(n, c, k: int):
    """``1 - C(n - c, k) / C(n, k)`` = ``1 - prod_{i=n-c+1}^{n} (1 - k / i)`` (1 when n - c < k)."""
    n_arr, c_arr = _check(n, c, k)
    j = np.arange(int(np.max(n_arr)))
    remaining = n_arr[..., None] - j  # n, n - 1, ...: the factor (1 - k / i) for i = n - j, j < c
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(j < c_arr[..., None], 1.0 - k / remaining, 1.0)
    out = 1.0 - np.prod(factor, axis=-1)  # a factor of 0 (i = k) appears exactly when n - c < k
    return float(out) if out.ndim == 0 else out


def pass_hat_k(n, c, k: int):
    """``C(c, k) / C(n, k)`` = ``prod_{i=0}^{k-1} (c - i) / (n - i)`` (0 when c < k)."""
    n_arr, c_arr = _check(n, c, k)
    i = np.arange(k)
    ratio = np.clip(c_arr[..., None] - i, 0.0, None) / (n_arr[..., None] - i)
    out = np.prod(ratio, axis=-1)
    return float(out) if out.ndim == 0 else out
