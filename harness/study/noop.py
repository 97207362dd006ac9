"""Arms that must differ: two conditions whose configurations differ in the study file but whose
loss and gradient agree on the probe batch (``harness.algorithms.probe``) waste a study. Such a
pair is an error before anything runs; two conditions with the same configuration are only a
warning (``study_warnings``), and pairs that differ where the probe cannot see (learning rate,
schedule, group size, train settings) are never flagged. Probe results are kept in the cache
(``probe_cache``): a study whose configurations were probed before is checked without torch.
"""

from __future__ import annotations

from pydantic import BaseModel

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
    """One line per pair of conditions whose differences are no-ops on the probe batch.

    Linear in the conditions, not quadratic (a study may have thousands of arms): only conditions
    alike in their train settings and in every field the probe cannot see can pair
    (:func:`_groups`), and within such a group only the pairs :func:`_candidates` finds, which
    include every pair the rule flags, are compared."""
    specs = _condition_specs(study)
    order = {name: i for i, name in enumerate(specs)}
    results: dict[str, ProbeResult] = {}

    def result(name: str) -> ProbeResult:
        if name not in results:
            spec = specs[name]
            results[name] = probe_result(spec.algorithm, spec.train.max_new_tokens, spec.cache_dir)
        return results[name]

    pairs = sorted(
        (pair for group in _groups(specs) for pair in _candidates(group, specs, result)),
        key=lambda pair: (order[pair[0]], order[pair[1]]),
    )
    lines = []
    for first, second in pairs:
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


_SEEN_BY_NAME_ONLY = sorted(UNPROBED - {"name"})


def _groups(specs: dict[str, TrialSpec]) -> list[list[str]]:
    """The RL conditions by their train settings and the fields the probe cannot see (the preset's
    name aside), each group in the study's order: two conditions in different groups never pair."""
    groups: dict[object, list[str]] = {}
    for name, spec in specs.items():
        if isinstance(spec.algorithm, RLConfig):
            unseen = tuple(_frozen(getattr(spec.algorithm, f)) for f in _SEEN_BY_NAME_ONLY)
            groups.setdefault((_frozen(spec.train), unseen), []).append(name)
    return [group for group in groups.values() if len(group) > 1]


def _candidates(group: list[str], specs: dict[str, TrialSpec], result) -> list[tuple[str, str]]:
    """Pairs of ``group`` (in its order) that may be no-ops: those alike but for the preset's name,
    and those whose probe losses agree to the tolerance (found by sorting on the loss, so a group
    of different computations costs n log n). Probes run only where the rule reads them: when the
    group holds configurations that differ in more than the name."""
    alike: dict[object, list[str]] = {}
    for name in group:
        config = specs[name].algorithm
        key = tuple(_frozen(getattr(config, f)) for f in RLConfig.model_fields if f != "name")
        alike.setdefault(key, []).append(name)
    pairs = [(a, b) for names in alike.values() for i, a in enumerate(names) for b in names[i + 1 :]]
    if len(alike) > 1:
        position = {name: i for i, name in enumerate(group)}
        by_loss = sorted(group, key=lambda name: result(name).loss)
        for i, first in enumerate(by_loss):
            for second in by_loss[i + 1 :]:
                if result(second).loss - result(first).loss > TOLERANCE:
                    break
                pairs.append(tuple(sorted((first, second), key=position.__getitem__)))
    return list(dict.fromkeys(pairs))


def _frozen(value: object) -> object:
    """``value`` as a hashable value with the same equality (models and containers as tuples)."""
    if isinstance(value, BaseModel):
        return (type(value).__name__, tuple((f, _frozen(getattr(value, f))) for f in type(value).model_fields))
    if isinstance(value, dict):
        return frozenset((key, _frozen(item)) for key, item in value.items())
    if isinstance(value, list | tuple):
        return tuple(_frozen(item) for item in value)
    if isinstance(value, set | frozenset):
        return frozenset(_frozen(item) for item in value)
    return value


def check_arms_differ(study: Study) -> None:
    """A ``ConfigError`` naming every no-op pair of conditions, if there is one."""
    lines = noop_pairs(study)
    if lines:
        raise ConfigError("arms: " + "; ".join(lines))
