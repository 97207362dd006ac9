"""A tuning phase's search space, as Optuna samples it: through a ``Trial``'s suggest calls."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from harness.errors import ConfigError
from harness.study.overrides import numeric_kind
from harness.study.schema import Study


def suggest_params(study: Study, trial: Any) -> dict[str, Any]:
    """Sample the search space through an Optuna ``Trial`` (suggest_float/int/categorical)."""
    if study.tuning is None:
        raise ConfigError(f"study {study.name!r} has no tuning section")
    out: dict[str, Any] = {}
    for key, p in study.tuning.search_space.items():
        if p.choices is not None:
            out[key] = trial.suggest_categorical(key, p.choices)
        elif numeric_kind(key) == "int":
            out[key] = trial.suggest_int(key, int(p.low), int(p.high), log=p.log, step=int(p.step or 1))
        else:
            out[key] = trial.suggest_float(key, p.low, p.high, log=p.log, step=p.step)
    return out


def tuning_space_key(study: Study) -> str:
    """A short hash of what a tuning trial's result depends on besides the arm: the search space
    and the tuning seeds (not ``n_trials``: a larger budget continues the same phase)."""
    if study.tuning is None:
        raise ConfigError(f"study {study.name!r} has no tuning section")
    payload = {
        "search_space": {k: p.model_dump(mode="json") for k, p in sorted(study.tuning.search_space.items())},
        "seeds": study.tuning.seeds,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:8]
