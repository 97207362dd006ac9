"""Which trials belong to a study's current design.

A study file can change between runs: an arm's settings, its name, the grid, the seeds, the
tuning space. The runner then runs the new trials; the old ones keep their records. The analysis
must use exactly the trials of the current design, each condition x seed at the config the
study gives it now, and list the others rather than pool them. ``earlier_design(study, spec)``
says why a comparison trial does not belong (None when it does): the trial is rebuilt from the
current study and must come out with the same trial id.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from harness.engine.spec import TrialSpec
from harness.errors import ConfigError
from harness.study.expand import condition_spec, tuned_spec
from harness.study.overrides import split_key
from harness.study.schema import Study


def _tuned_values(study: Study, spec: TrialSpec) -> dict[str, Any]:
    """The search-space keys' values in ``spec`` (``lr`` from its algorithm, ``train.x`` ...)."""
    out = {}
    for key in study.tuning.search_space:
        section, name = split_key(key)
        out[key] = getattr({"train": spec.train, "rollout": spec.rollout}.get(section, spec.algorithm), name, None)
    return out


def _inside(study: Study, values: dict[str, Any]) -> bool:
    for key, value in values.items():
        param = study.tuning.search_space[key]
        if param.choices is not None:
            if value not in param.choices:
                return False
        elif value is None or not param.low <= value <= param.high:
            return False
    return True


def earlier_design(study: Study, spec: TrialSpec) -> str | None:
    """Why the comparison trial ``spec`` is not part of ``study``'s current design, or None."""
    conditions = {c.name: c for c in study.iter_conditions()}
    if spec.arm not in conditions:
        return f"arm {spec.arm} (no longer in the study)"
    if spec.seed not in study.condition_seeds(conditions[spec.arm]):
        return f"seed {spec.seed} (no longer among the study's seeds)"
    try:
        if study.tuning is None:
            current = condition_spec(study, spec.arm, spec.seed)
        else:
            values = _tuned_values(study, spec)
            if not _inside(study, values):
                return f"arm {spec.arm} tuned over an earlier search space"
            current = tuned_spec(study, spec.arm, values, spec.seed)
    except ConfigError:
        return f"an earlier version of arm {spec.arm}"
    if spec.looks is not None and spec.looks.run_to is not None and current.looks is not None:
        if spec.looks.run_to >= len(current.looks.at):
            return f"an earlier version of arm {spec.arm}"
        current = current.segment(spec.looks.run_to)  # a segment of a compute-look trial
    return None if current.trial_id == spec.trial_id else f"an earlier version of arm {spec.arm}"


def spec_of(payload: Any) -> TrialSpec | None:
    """A trial spec from a record or a queued job (a mapping or its JSON), None if it is not one
    of this harness version's specs."""
    try:
        if isinstance(payload, str):
            return TrialSpec.model_validate_json(payload)
        return TrialSpec.model_validate(payload) if isinstance(payload, dict) else None
    except ValueError:  # pydantic's ValidationError is a ValueError
        return None


def earlier_design_of(study: Study, payload: Any, arm: str) -> str | None:
    """``earlier_design`` for a stored spec; a spec this harness cannot read is an earlier design."""
    spec = spec_of(payload)
    return f"arm {arm} under an older version of the harness" if spec is None else earlier_design(study, spec)


def summary_lines(reasons: Iterable[str]) -> list[str]:
    """``4 trials from an earlier version of arm grpo are not used``, one line per reason."""
    return [
        f"{n} trial{'s' if n != 1 else ''} from {reason} {'are' if n != 1 else 'is'} not used"
        for reason, n in sorted(Counter(reasons).items())
    ]
