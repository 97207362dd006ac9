"""Arms that must differ: two conditions whose configurations differ in the study file but whose
loss and gradient agree on the probe batch (``harness.algorithms.probe``) waste a study. Such a
pair is an error before anything runs; two conditions with the same configuration are only a
warning (``study_warnings``), and pairs that differ where the probe cannot see (learning rate,
schedule, group size, train settings) are never flagged. Probe results are kept in the cache
(``probe_cache``): a study whose configurations were probed before is checked without torch.
"""

from __future__ import annotations

from harness.algorithms.config import RLConfig
from harness.algorithms.probe_result import (
    TOLERANCE,
    UNPROBED,
    ProbeResult,
    differing_fields,
)
from harness.engine.spec import TrialSpec
from harness.errors import ConfigError
from harness.study.expand import condition_spec, tuning_specs
from harness.study.overrides import format_value
from harness.study.probe_cache import probe_result
from harness.study.schema import Study


def _condition_specs(study: Study) -> dict[str, TrialSpec]:
    seed = study.seeds[0] if study.tuning is None else study.tuning.seeds[0]
    if study.tuning is None:
        return {c.name: condition_spec(study, c, seed) for c in study.iter_conditions() if c.role == "arm"}
    return {a.name: tuning_specs(study, a.name, {}, seed) for a in study.arms}


def _only_probed_differences(a: TrialSpec, b: TrialSpec) -> list[str] | None:
    """The algorithm fields two specs differ in, when the probe sees every difference (the preset's
    name is read by nothing); else None."""
    if not (isinstance(a.algorithm, RLConfig) and isinstance(b.algorithm, RLConfig)):
        return None
    if a.train != b.train:
        return None
    fields = differing_fields(a.algorithm, b.algorithm)
    if not fields or set(fields) & (UNPROBED - {"name"}):
        return None
    return fields


def noop_pairs(study: Study) -> list[str]:
    """One line per pair of conditions whose differences are no-ops on the probe batch."""
    specs = _condition_specs(study)
    results: dict[str, ProbeResult] = {}

    def result(name: str) -> ProbeResult:
        if name not in results:
            spec = specs[name]
            results[name] = probe_result(spec.algorithm, spec.train.max_new_tokens, spec.cache_dir)
        return results[name]

    names, lines = list(specs), []
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            fields = _only_probed_differences(specs[first], specs[second])
            if fields is None:
                continue
            if fields != ["name"] and not result(first).same_as(result(second)):
                continue
            a, b = specs[first].algorithm, specs[second].algorithm
            diff = ", ".join(f"{f} ({format_value(getattr(a, f))} vs {format_value(getattr(b, f))})" for f in fields)
            lines.append(
                f"{first} and {second} differ only in {diff}, yet their loss and gradient agree to "
                f"{TOLERANCE:g} on the probe batch: the difference is a no-op; drop one of them or "
                "change a setting their parts act on"
            )
    return lines


def check_arms_differ(study: Study) -> None:
    """A ``ConfigError`` naming every no-op pair of conditions, if there is one."""
    lines = noop_pairs(study)
    if lines:
        raise ConfigError("arms: " + "; ".join(lines))
