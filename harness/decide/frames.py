"""Reading a ``Results`` object: its meta, conditions, comparisons and metrics, the completed
seeds of a condition, and the checks of the report's settings (one-line ConfigErrors).

A ``Results`` object is anything with ``trials`` (one row per trial), ``curves`` (long frame of
per-step metrics), ``meta`` (a :class:`~harness.tracking.study_meta.StudyMeta`, or the plain mapping it converts
from) and optionally ``prompts`` (the long per-prompt frame), as
``harness.tracking.results.load_results`` returns them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from harness import stats
from harness.errors import ConfigError, unknown_name
from harness.tracking.study_meta import StudyMeta

#: Trial-frame columns that are bookkeeping, not final metrics.
BASE_COLUMNS = ("trial_id", "arm", "seed", "status", "error", "wall_time_s", "config_hash", "warnings")
CORRECTIONS = stats.CORRECTIONS
MIN_SEEDS_FOR_TEST = 2


def meta_of(results) -> StudyMeta:
    """The study's typed metadata (a results object made by hand may carry the plain mapping)."""
    meta = getattr(results, "meta", None)
    return meta if isinstance(meta, StudyMeta) else StudyMeta.from_dict(meta)


def study_name(results) -> str:
    return meta_of(results).study


def conditions_of(results) -> list[str]:
    """Conditions in the study's order (meta), then any others seen in the trials frame."""
    names = [str(c) for c in meta_of(results).conditions]
    if "arm" in results.trials:
        names += [str(a) for a in results.trials["arm"].dropna().unique() if str(a) not in names]
    return names


def comparisons_of(results) -> list[tuple[str, str]]:
    meta = meta_of(results)
    pairs = meta.comparisons
    if pairs is None:
        pairs = [(c, meta.control) for c in conditions_of(results) if c != meta.control]
    return [(str(a), str(b)) for a, b in pairs]


def metric_names(trials: pd.DataFrame) -> list[str]:
    """Final-metric columns of a trials frame (everything that is neither bookkeeping nor param/)."""
    return [c for c in trials.columns if c not in BASE_COLUMNS and not str(c).startswith("param/")]


def check_metric(results, metric: str | None) -> str:
    """The metric to analyse (default: the primary one); unknown names raise, listing the valid."""
    primary = meta_of(results).primary_metric
    metric = metric or primary
    valid = metric_names(results.trials)
    if metric is None:
        raise ConfigError(f"no metric given and the study names no primary_metric; valid: {', '.join(sorted(valid))}")
    if metric not in valid and metric != primary:  # the primary metric is valid before any trial reports it
        raise unknown_name("metric", metric, valid)
    return metric


def _unit_interval(value: Any, what: str, example: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{what} must be a number between 0 and 1 (e.g. {example}), got {value!r}") from None
    if not 0.0 < number < 1.0:  # NaN fails this too
        raise ConfigError(f"{what} must be between 0 and 1, both excluded (e.g. {example}), got {value!r}")
    return number


def check_alpha(alpha: Any) -> float:
    """The significance level: a number strictly between 0 and 1 (NaN and inf are refused)."""
    return _unit_interval(alpha, "alpha", "0.05")


def check_power(power: Any) -> float:
    return _unit_interval(power, "power", "0.8")


def check_correction(correction: str) -> str:
    if correction not in CORRECTIONS:
        raise unknown_name("correction", correction, CORRECTIONS)
    return correction


def check_condition(results, name: str) -> str:
    valid = conditions_of(results)
    if name not in valid:
        raise unknown_name("arm", name, valid)
    return name


def completed(trials: pd.DataFrame) -> pd.DataFrame:
    return trials[trials["status"] == "completed"]


def seed_values(trials: pd.DataFrame, condition: str, metric: str) -> pd.Series:
    """Completed, finite values of ``metric`` for one condition, indexed by seed (sorted)."""
    rows = completed(trials)
    rows = rows[rows["arm"] == condition]
    values = pd.to_numeric(rows[metric], errors="coerce") if metric in rows else pd.Series(dtype=float)
    out = pd.Series(values.to_numpy(dtype=float), index=rows["seed"].to_numpy())
    out = out[np.isfinite(out.to_numpy())]
    return out.sort_index()


def check_min_effect(value: Any) -> float | None:
    """A smallest effect of interest from the CLI or the study: None, or a finite number > 0."""
    if value is None:
        return None
    try:
        return stats.check_margin(value)
    except (TypeError, ValueError):
        raise ConfigError(
            f"min_effect must be a finite number > 0 in the metric's units (e.g. 0.02), got {value!r}"
        ) from None
