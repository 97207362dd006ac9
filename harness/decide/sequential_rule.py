"""The decision rule of a sequential study, fixed at its first look.

A sequential study reads its looks under one rule: the looks (seeds per arm), the spending
function, alpha and its correction, ``min_effect``, the primary test, metric and direction, where
the comparison reads each trial (``primary_at``), the failure policy, the control, the seeds the
looks read and every condition's configuration. A
look read again under another rule is a look that never happened: a stricter ``min_effect``
re-opens an arm that stopped, a looser one hides trials that ran, other looks move the stops.
So the rule is fixed once, when the study's first look is queued, and stored with the study
(:mod:`harness.store.rules`: in the study database, exactly once across machines,
and copied into the study folder); every reader (``harness run``, ``harness worker`` and its
look replay, ``harness status``, ``harness report``) compares the study file's rule with the
stored one, and a difference is refused with one line naming each change and the way out
(:class:`RuleChanged`).

The way out is a new study, or, asked for explicitly (``harness run --new-version``), a new
version of this one: the edited rule is fixed as the next version, on seeds no earlier version
read (the same seeds would repeat the same trials, bit for bit, and re-read what was seen). The
looks start over on those seeds, and the earlier versions' trials are kept and listed as an
earlier design, never pooled (:mod:`harness.study.design`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ConfigDict, Field, PositiveInt

from harness.decide.frames import meta_of, study_name
from harness.errors import ConfigError
from harness.ground.strict import StrictModel
from harness.study.expand import condition_configs
from harness.study.schema import Study
from harness.study.sections import PrimaryAt

#: the level and correction every look is read at (the runner's; the plan and report assume them)
ALPHA, CORRECTION = 0.05, "bonferroni"


class RuleChanged(ConfigError):
    """The study file (or a command's options) would read the looks under another rule than the
    one fixed at the first look."""


class SequentialRule(StrictModel):
    """What a sequential study's looks are read under; fixed at its first look."""

    model_config = ConfigDict(frozen=True)

    version: PositiveInt = Field(1, description="1, then one more for each `harness run --new-version`")
    fixed_at: dt.datetime = Field(description="when it was fixed (UTC): as the first look of its version was queued")
    looks: list[int] = Field(description="seeds per arm at each look")
    spending: str = Field(description="the alpha-spending function")
    alpha: float = Field(description="the family's error rate, spent across the looks")
    correction: str = Field(description="the multiple-comparison correction across the comparisons")
    min_effect: float | None = Field(description="the equivalence margin (None: no equivalence verdict)")
    test: str = Field(description="the primary test")
    primary_metric: str = Field(description="the metric the comparisons are read on")
    direction: str = Field(description="maximize or minimize")
    failures: str = Field(description="what a failed trial counts as: drop or worst")
    control: str = Field(description="the arm every other is compared with")
    seeds: list[int] = Field(description="the seeds the looks read, in order (the pool's first, up to the last look)")
    configs: dict[str, str | None] | None = Field(
        description="each condition's config hash, its seed left out (harness.study.expand.condition_configs); "
        "None where unknown (a study file that no longer loads), and then not compared"
    )
    primary_at: dict[str, Any] | None = Field(
        None,
        description="where the comparison reads each trial ({point, axis, budget}); None: at its final "
        "evaluation, the point every rule read before the key existed (so their fingerprints stay)",
    )

    def decision(self) -> dict[str, Any]:
        """The fields that decide the looks (not the version or when it was fixed)."""
        unset = {"primary_at"} if self.primary_at is None else set()
        return self.model_dump(mode="json", exclude={"version", "fixed_at", *unset})

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self.decision(), sort_keys=True).encode()).hexdigest()[:12]

    @property
    def label(self) -> str:
        """``v1 3f2a9c1b0d4e``: its version and fingerprint, as the Looks table names it."""
        return f"v{self.version} {self.fingerprint()}"

    @property
    def when(self) -> str:
        return self.fixed_at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")

    def changes_to(self, other: SequentialRule) -> list[str]:
        """Each decision field ``other`` has otherwise, ``field old -> new`` (configs by condition;
        the seeds only where they differ in order or value, not where other looks read fewer or
        more of the same pool: the looks say that)."""
        mine, theirs = self.decision(), other.decision()
        mine["primary_at"], theirs["primary_at"] = self.primary_point(), other.primary_point()
        same = {"configs", *(["seeds"] if _one_starts_the_other(self.seeds, other.seeds) else [])}
        out = [
            f"{key} {_show(key, mine[key])} -> {_show(key, theirs[key])}"
            for key in mine
            if key not in same and mine[key] != theirs[key]
        ]
        if self.configs is not None and other.configs is not None:
            out += _config_changes(self.configs, other.configs)
        return out

    def primary_point(self) -> str:
        """Where the comparison reads each trial, in words."""
        return PrimaryAt.model_validate(self.primary_at or {}).describe(self.primary_metric)

    def line(self) -> str:
        """The rule in one line, for a report's header."""
        margin = "none" if self.min_effect is None else f"{self.min_effect:g}"
        read_at = "" if self.primary_at is None else f", read as {self.primary_point()}"
        return (
            f"rule {self.label}, fixed {self.when}: looks at {', '.join(map(str, self.looks))} seeds per arm "
            f"(seeds {_show('seeds', self.seeds)}), {self.spending.replace('_', '-')} spending, alpha "
            f"{self.alpha:g} ({self.correction}), min_effect {margin}, test {self.test} on {self.primary_metric} "
            f"({self.direction}){read_at}, failures {self.failures}, control {self.control}"
        )


def _show(key: str, value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    if key == "seeds" and len(value) > 3 and value == list(range(value[0], value[0] + len(value))):
        return f"{value[0]}..{value[-1]}"
    return str(value)


def _one_starts_the_other(a: list[int], b: list[int]) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _config_changes(old: Mapping[str, str | None], new: Mapping[str, str | None]) -> list[str]:
    out = [
        f"condition {c} {old[c] or 'that no longer builds'} -> {new[c] or 'one that does not build'}"
        for c in old
        if c in new and old[c] != new[c]
    ]
    out += [f"condition {c} removed" for c in old if c not in new]
    return out + [f"condition {c} added" for c in new if c not in old]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def rule_of_study(study: Study, *, alpha: float = ALPHA, correction: str = CORRECTION) -> SequentialRule:
    """The rule ``study``'s file sets (the runner's alpha and correction), as it would be fixed now."""
    looks = study.sequential.schedule()
    return SequentialRule(
        fixed_at=_now(),
        looks=looks,
        spending=study.sequential.spending,
        alpha=alpha,
        correction=correction,
        min_effect=study.min_effect,
        test=study.test,
        primary_metric=study.primary_metric,
        direction=study.direction,
        failures=study.failures,
        control=study.control,
        seeds=list(study.seeds[: looks[-1]]),
        configs=condition_configs(study),
        primary_at=_primary_at(study.primary_at.model_dump()),
    )


def _primary_at(fields: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A rule's ``primary_at``: None at the final evaluation (as rules before the key), else its fields."""
    if not fields or fields.get("point", "final") == "final":
        return None
    return dict(fields)


def rule_of_meta(meta: Mapping[str, Any], *, alpha: float, correction: str, min_effect: float | None) -> SequentialRule:
    """The same rule from a study's results meta (``harness.tracking.results``), read at
    ``alpha``, ``correction`` and ``min_effect`` (the study's, or a command's options)."""
    looks = list(meta["sequential"]["looks"])
    return SequentialRule(
        fixed_at=_now(),
        looks=looks,
        spending=meta["sequential"]["spending"],
        alpha=alpha,
        correction=correction,
        min_effect=min_effect,
        test=meta.get("test") or "auto",
        primary_metric=meta["primary_metric"],
        direction=meta.get("direction") or "maximize",
        failures=meta.get("failures") or "drop",
        control=meta["control"],
        seeds=list(meta.get("seeds") or [])[: looks[-1]],
        configs=meta.get("configs"),
        primary_at=_primary_at(meta.get("primary_at")),
    )


def stored_rules(meta: Mapping[str, Any]) -> list[SequentialRule]:
    """The versions of the rule stored with the study, oldest first (``meta["sequential_rules"]``)."""
    return [SequentialRule.model_validate(rule) for rule in meta.get("sequential_rules") or []]


#: how to go on after an edit of a fixed rule: a new study, on seeds that are new to it
NEW_STUDY = (
    "start a new study (give it a new name: and seeds: this one has not run, or the same trials repeat bit for bit)"
)


def _way_out() -> str:
    return (
        f"{NEW_STUDY}, or keep the name: give it such seeds and run `harness run --new-version` (the looks "
        "start over on them; the trials so far are kept and listed, never pooled)"
    )


def check_file(current: SequentialRule, versions: list[SequentialRule], *, study: str) -> SequentialRule | None:
    """The stored rule in force (the latest version; None before the first look), when the
    study file's rule ``current`` is the same; otherwise raise :class:`RuleChanged`."""
    if not versions:
        return None
    fixed = versions[-1]
    changes = fixed.changes_to(current)
    if changes:
        raise RuleChanged(
            f"study {study!r}: the study file changes the sequential rule fixed at its first look (rule "
            f"{fixed.label}, fixed {fixed.when}): {'; '.join(changes)}; a look is read only under the rule it was "
            f"queued under: {_way_out()}"
        )
    return fixed


def check_dropped(versions: list[SequentialRule], *, study: str) -> None:
    """Refuse a study file without a ``sequential:`` section for a study whose looks were read
    under a rule: read as a fixed design, its trials would be re-read all at once."""
    if versions:
        fixed = versions[-1]
        raise RuleChanged(
            f"study {study!r}: the study file drops its sequential: section, but its looks were read under the "
            f"sequential rule {fixed.label} (fixed {fixed.when}); a look is read only under the rule it was queued "
            f"under: {NEW_STUDY}"
        )


@dataclass(frozen=True)
class Rules:
    """A sequential study's rules as a reader sees them."""

    current: SequentialRule  # the study file's, at the reader's alpha, correction and min_effect
    versions: list[SequentialRule]  # stored, oldest first
    in_force: (
        SequentialRule | None
    )  # the latest version (None: not fixed yet, or a study from before rules were stored)


def read_rules(results, *, alpha: float, correction: str, min_effect: float | None) -> Rules:
    """The rule ``results``' looks are read under, checked against the study file and against
    the reader's ``alpha``, ``correction`` and ``min_effect`` (a report's options): a difference
    raises :class:`RuleChanged`."""
    meta = meta_of(results)
    name = study_name(results)
    versions = stored_rules(meta)
    fixed = versions[-1] if versions else None
    in_file = rule_of_meta(
        meta,
        alpha=fixed.alpha if fixed else alpha,
        correction=fixed.correction if fixed else correction,
        min_effect=meta.get("min_effect"),
    )
    in_force = check_file(in_file, versions, study=name)
    current = rule_of_meta(meta, alpha=alpha, correction=correction, min_effect=min_effect)
    if in_force is not None:
        changes = in_force.changes_to(current)
        if changes:
            raise RuleChanged(
                f"study {name!r}: its looks were read under the sequential rule {in_force.label} (fixed "
                f"{in_force.when}), and the options change it: {'; '.join(changes)}; leave those options out "
                "(a look is read only under the rule it was queued under)"
            )
    return Rules(current, versions, in_force)


def next_version(current: SequentialRule, versions: list[SequentialRule], *, study: str) -> SequentialRule:
    """``current`` as the study's next rule version (``harness run --new-version``): its looks
    must read seeds no earlier version read, or it would re-read what was seen."""
    read = sorted({seed for rule in versions for seed in rule.seeds})
    overlap = sorted(set(current.seeds) & set(read))
    if overlap:
        start = read[-1] + 1
        fresh = _show("seeds", list(range(start, start + len(current.seeds))))
        raise ConfigError(
            f"study {study!r}: --new-version starts the looks over, so they need seeds no earlier version read; "
            f"seeds {_show('seeds', overlap)} were read under rule {versions[-1].label}: give seeds: the study "
            f"has not run (e.g. {fresh}) and run again"
        )
    return current.model_copy(update={"version": versions[-1].version + 1, "fixed_at": _now()})


def versions_line(rules: Rules) -> str:
    """A report's header line on the rule: the one in force and the versions it replaced."""
    if rules.in_force is None:
        return "not recorded: the study's looks were queued before rules were stored (read under the study file's)"
    earlier = [f"{r.label} (fixed {r.when}; its trials are kept and listed, not used)" for r in rules.versions[:-1]]
    return rules.in_force.line() + (f"; replaces {', '.join(earlier)}" if earlier else "")
