"""The decision rule of a sequential study: what its looks are read under.

A sequential study reads its looks under one rule: the looks (seeds per arm; a study with looks
over compute, ``compute_looks:``, also their fractions of the budget, the catch-up allowance and
what an arm is stopped against), the spending function, alpha and its correction,
``min_effect``, the primary test, metric and direction, where the comparison reads each trial
(``primary_at``), the failure policy, the control, the seeds the looks read and every
condition's configuration. A look read again under another rule is a look that never happened:
a stricter ``min_effect`` re-opens an arm that stopped, a looser one hides trials that ran,
other looks move the stops. So the rule is fixed once, when the study's first
look is queued, and every reader compares the study file's rule with the one fixed
(:mod:`.versions`: fixing, checking, and the versions ``harness run --new-version`` starts).

This module is the rule itself: its fields, its fingerprint, the changes between two rules,
and the rule a study file (:func:`rule_of_study`) or a study's results meta
(:func:`rule_of_meta`) sets.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ConfigDict, Field, PositiveInt

from harness.ground.strict import StrictModel
from harness.study.expand import condition_configs
from harness.study.schema import Study
from harness.study.sections import ComputeLooks, PrimaryAt
from harness.tracking.study_meta import ComputeLookDesign, StudyMeta

#: the level and correction every look is read at (the runner's; the plan and report assume them)
ALPHA, CORRECTION = 0.05, "bonferroni"


#: the fields only a compute-look study's rule holds; None (a seed-look rule) leaves them out of
#: its decision and fingerprint, as rules fixed before they existed
COMPUTE_FIELDS = ("at", "catch_up", "against", "forecast")


class SequentialRule(StrictModel):
    """What a sequential study's looks are read under; fixed at its first look. The looks are
    over seeds (``sequential:``) or, where ``at`` is set, over compute (``compute_looks:``)."""

    model_config = ConfigDict(frozen=True)

    version: PositiveInt = Field(1, description="1, then one more for each `harness run --new-version`")
    fixed_at: dt.datetime = Field(description="when it was fixed (UTC): as the first look of its version was queued")
    looks: list[int] = Field(
        description="seeds per arm at each look (looks over compute: one entry, the seeds every look reads)"
    )
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
    at: list[float] | None = Field(
        None, description="looks over compute: each look's fraction of the budget (None: looks over seeds)"
    )
    catch_up: float | None = Field(
        None, description="looks over compute: the catch-up allowance (compute_looks.catch_up, else min_effect)"
    )
    against: str | None = Field(None, description="looks over compute: what an arm is stopped against")
    forecast: bool | None = Field(
        None, description="looks over compute: whether interim looks also call verdicts from the fitted curve"
    )

    def decision(self) -> dict[str, Any]:
        """The fields that decide the looks (not the version or when it was fixed; the optional
        ones only where set, so that a rule fixed before they existed keeps its fingerprint)."""
        unset = {key for key in ("primary_at", *COMPUTE_FIELDS) if getattr(self, key) is None}
        return self.model_dump(mode="json", exclude={"version", "fixed_at", *unset})

    @property
    def over_compute(self) -> bool:
        return self.at is not None

    @property
    def kind(self) -> str:
        """``sequential`` or ``compute-look``, as a refusal names the rule."""
        return "compute-look" if self.over_compute else "sequential"

    @property
    def section(self) -> str:
        """The study file's section that sets the looks."""
        return "compute_looks" if self.over_compute else "sequential"

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
        prefix = _one_starts_the_other(self.seeds, other.seeds) and not (self.over_compute or other.over_compute)
        same = {"configs", *(["seeds"] if prefix else [])}
        keys = [*mine, *(key for key in theirs if key not in mine)]  # looks over seeds <-> over compute
        out = [
            f"{key} {shown(key, mine.get(key))} -> {shown(key, theirs.get(key))}"
            for key in keys
            if key not in same and mine.get(key) != theirs.get(key)
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
        if self.over_compute:
            looks = (
                f"compute looks at {', '.join(f'{f:g}' for f in self.at)} of the budget on {self.looks[-1]} seeds "
                f"per arm (seeds {shown('seeds', self.seeds)}), catch-up {self.catch_up:g} against the {self.against}"
                f"{', forecasts on' if self.forecast else ''}"
            )
        else:
            looks = f"looks at {', '.join(map(str, self.looks))} seeds per arm (seeds {shown('seeds', self.seeds)})"
        return (
            f"rule {self.label}, fixed {self.when}: {looks}, {self.spending.replace('_', '-')} spending, alpha "
            f"{self.alpha:g} ({self.correction}), min_effect {margin}, test {self.test} on {self.primary_metric} "
            f"({self.direction}){read_at}, failures {self.failures}, control {self.control}"
        )


def shown(key: str, value: Any) -> str:
    """A rule field's value in a refusal or header line (a run of seeds as ``first..last``)."""
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


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def rule_of_study(study: Study, *, alpha: float = ALPHA, correction: str = CORRECTION) -> SequentialRule:
    """The rule ``study``'s file sets (the runner's alpha and correction), as it would be fixed now."""
    if study.compute_looks is not None:
        section = study.compute_looks
        catch_up = section.catch_up if section.catch_up is not None else study.min_effect
        design = _over_compute(study.seeds, section, catch_up)
    else:
        design = _over_seeds(study.seeds, study.sequential.schedule(), study.sequential.spending)
    return SequentialRule(
        fixed_at=now(),
        **design,
        alpha=alpha,
        correction=correction,
        min_effect=study.min_effect,
        test=study.test,
        primary_metric=study.primary_metric,
        direction=study.direction,
        failures=study.failures,
        control=study.control,
        configs=condition_configs(study),
        primary_at=_primary_at(study.primary_at.model_dump()),
    )


def _over_seeds(seeds: Sequence[int], looks: Sequence[int], spending: str) -> dict[str, Any]:
    """A seed-look rule's looks: seeds per arm at each look, read from the pool's first."""
    return {"looks": list(looks), "spending": spending, "seeds": list(seeds)[: looks[-1]]}


def _over_compute(seeds: Sequence[int], looks: ComputeLooks | ComputeLookDesign, catch_up: float) -> dict[str, Any]:
    """A compute-look rule's looks (from the study file's section or the results' design): every
    look reads every seed of the pool, at its fraction of the budget."""
    return {
        "looks": [len(seeds)],
        "spending": looks.spending,
        "seeds": list(seeds),
        "at": [float(f) for f in looks.at],
        "catch_up": float(catch_up),
        "against": looks.against,
        "forecast": bool(looks.forecast),
    }


def _primary_at(fields: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A rule's ``primary_at``: None at the final evaluation (as rules before the key), else its fields."""
    if not fields or fields.get("point", "final") == "final":
        return None
    return dict(fields)


def rule_of_meta(meta: StudyMeta, *, alpha: float, correction: str, min_effect: float | None) -> SequentialRule:
    """The same rule from a study's results meta (``harness.tracking.results``), read at
    ``alpha``, ``correction`` and ``min_effect`` (the study's, or a command's options)."""
    if meta.compute_looks is not None:
        looks = meta.compute_looks
        design = _over_compute(meta.seeds, looks, looks.catch_up)
    else:
        design = _over_seeds(meta.seeds, meta.sequential.looks, meta.sequential.spending)
    return SequentialRule(
        fixed_at=now(),
        **design,
        alpha=alpha,
        correction=correction,
        min_effect=min_effect,
        test=meta.test,
        primary_metric=meta.primary_metric,
        direction=meta.direction,
        failures=meta.failures,
        control=meta.control,
        configs=meta.configs,
        primary_at=_primary_at(meta.primary_at),
    )
