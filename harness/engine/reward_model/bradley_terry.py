"""The Bradley-Terry loss of a reward model and the metrics of its score differences.

Training minimises, over pairs (x, y_w, y_l),

    L = -log sigmoid(r(x, y_w) - r(x, y_l))                      (Bradley & Terry 1952; seed §2 (2))

whose gradient, with Delta = r(x, y_w) - r(x, y_l), is -(1 - sigmoid(Delta)) (grad r_w - grad r_l):
each pair pushes its two scores apart by the model's probability of ranking it wrong. Held-out
pairs give the metrics: pair accuracy against the labels, the BT loss, the Brier score of
sigmoid(Delta) and its expected calibration error over ``ECE_BINS`` bins of confidence; for pairs
built from the verifier also against the noise-free labels (``*_gold``).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

ECE_BINS = 10


def bradley_terry_loss(chosen: torch.Tensor, rejected: torch.Tensor) -> torch.Tensor:
    """Mean of -log sigmoid(r_w - r_l) over pairs (seed §2, eq. 2)."""
    return -F.logsigmoid(chosen - rejected).mean()


def expected_calibration_error(delta, bins: int = ECE_BINS) -> float:
    """ECE of the pairs' predicted preferences: each pair's confidence in the winner it predicts,
    sigmoid(|Delta|) in [0.5, 1], in ``bins`` equal bins; the sum over bins of the bin's share of
    pairs times |its accuracy - its mean confidence| (a tie counts as half right)."""
    d = np.asarray(delta, dtype=float)
    confidence = 1.0 / (1.0 + np.exp(-np.abs(d)))
    correct = (d > 0) + 0.5 * (d == 0)
    edges = np.linspace(0.5, 1.0, bins + 1)
    index = np.clip(np.searchsorted(edges, confidence, side="right") - 1, 0, bins - 1)
    total = 0.0
    for b in range(bins):
        inside = index == b
        if inside.any():
            total += inside.mean() * abs(correct[inside].mean() - confidence[inside].mean())
    return float(total)


def pair_metrics(delta, gold=None, bins: int = ECE_BINS) -> dict[str, float]:
    """Accuracy, BT loss, Brier score and ECE of score differences Delta = r(chosen) - r(rejected)
    against the labels; with ``gold`` (per pair: does its label agree with the verifier) the same
    against the noise-free labels, as ``*_gold``."""
    d = np.asarray(delta, dtype=float)

    def of(x: np.ndarray, suffix: str) -> dict[str, float]:
        p = 1.0 / (1.0 + np.exp(-x))
        return {
            f"accuracy{suffix}": float(np.mean((x > 0) + 0.5 * (x == 0))),
            f"loss{suffix}": float(np.mean(np.logaddexp(0.0, -x))),
            f"brier{suffix}": float(np.mean((1.0 - p) ** 2)),
            f"ece{suffix}": expected_calibration_error(x, bins),
        }

    out = of(d, "")
    if gold is not None:
        out.update(of(np.where(np.asarray(gold, dtype=bool), d, -d), "_gold"))
    return out
