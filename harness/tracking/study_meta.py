"""A study's metadata as its results carry it: one typed, frozen object, built once where the
study is loaded (:func:`harness.tracking.results.load_results`, or a tidy table's settings in
:mod:`harness.tracking.tidy_results`) and read by attribute everywhere after.

Nothing stores it: it is worked out again from the study file and the records at each load.
:meth:`StudyMeta.from_dict` and :meth:`StudyMeta.to_dict` convert at the boundary with the plain
mapping it was before (a results object made by hand, a test's fake), key for key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class LookDesign:
    """A sequential study's looks: seeds per arm at each look, and the alpha-spending function."""

    looks: list[int]
    spending: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | LookDesign | None) -> LookDesign | None:
        if data is None or isinstance(data, LookDesign):
            return data
        return cls(looks=list(data["looks"]), spending=str(data["spending"]))


@dataclass(frozen=True)
class ComputeLookDesign:
    """A study's looks over compute, resolved to where they read: the fractions of the budget,
    the spending function, the catch-up allowance (the study's min_effect where the section
    leaves it out), the reference an arm is stopped against, and the axis, budget and reading
    (``budget`` or ``auc``; a study read at its final evaluation reads its looks at fractions of
    ``train.steps`` on the step axis, ``budget``), and whether interim looks also call verdicts
    from the fitted curve (``forecast``)."""

    at: list[float]
    spending: str
    catch_up: float
    against: str
    axis: str
    budget: float
    point: str
    forecast: bool = False  # verdicts also called at interim looks from the fitted curve

    @property
    def points(self) -> list[float]:
        """Each look's point on the axis (the last is the budget)."""
        return [f * self.budget for f in self.at]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | ComputeLookDesign | None) -> ComputeLookDesign | None:
        if data is None or isinstance(data, ComputeLookDesign):
            return data
        return cls(
            at=[float(f) for f in data["at"]],
            spending=str(data["spending"]),
            catch_up=float(data["catch_up"]),
            against=str(data["against"]),
            axis=str(data["axis"]),
            budget=float(data["budget"]),
            point=str(data["point"]),
            forecast=bool(data.get("forecast", False)),
        )

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class BenchmarkMeta:
    """A held-out benchmark as the decisions read it: its name, the full name of the metric decided
    on (``eval/<name>/accuracy``) and its min_effect (None: the study's)."""

    name: str
    metric: str
    min_effect: float | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | BenchmarkMeta) -> BenchmarkMeta:
        if isinstance(data, BenchmarkMeta):
            return data
        return cls(name=data["name"], metric=data["metric"], min_effect=data.get("min_effect"))


@dataclass(frozen=True)
class StudyMeta:
    """What the decisions and the report need to know of a study besides its trials."""

    study: str = "study"
    description: str = ""
    study_dir: str | None = None
    primary_metric: str | None = None
    direction: str = "maximize"
    min_effect: float | None = None  # the pre-registered smallest effect of interest (None: none)
    test: str = "auto"
    failures: str = "drop"  # what a failed trial counts as: drop or worst
    metric_ranges: dict[str, Any] = field(default_factory=dict)  # metric -> (worst, best) bounds
    control: str | None = None
    conditions: list[str] = field(default_factory=list)  # in the study's order
    comparisons: list[tuple[str, str]] | None = None  # None: every condition against the control
    calibration: list[tuple[str, str, str]] = field(default_factory=list)  # (condition, other, role)
    seed_pools: dict[str, list[int]] = field(default_factory=dict)  # condition -> its own seed pool
    mirrors: dict[str, str] = field(default_factory=dict)  # calibration condition -> the control it follows
    seeds: list[int] = field(default_factory=list)  # the study's seed pool
    seed_matched: bool = False
    sequential: LookDesign | None = None
    primary_at: dict[str, Any] | None = None  # {point, axis, budget}: where the comparison reads a trial
    compute_looks: ComputeLookDesign | None = None  # looks over compute (None: none)
    scaling: dict[str, Any] | None = None  # {fit, efficiency_margin}
    configs: dict[str, str | None] | None = None  # a sequential study's condition configs (its rule's)
    seeds_by_condition: dict[str, list[int]] = field(default_factory=dict)  # completed seeds
    benchmarks: list[BenchmarkMeta] = field(default_factory=list)
    status_counts: dict[str, int] = field(default_factory=dict)
    harness_version: str | None = None
    git_commit: str | None = None
    earlier_design: list[str] = field(default_factory=list)  # lines on trials of an earlier design
    sequential_rules: list[dict[str, Any]] | None = None  # the stored rule versions, as stored (JSON)
    source: str | None = None  # a tidy table: the file it was read from
    input_notes: list[str] = field(default_factory=list)  # a tidy table: what reading it did (samples, dropped prompts)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | StudyMeta | None) -> StudyMeta:
        """The typed meta of a plain mapping (keys it lacks take the readers' defaults; others
        are ignored)."""
        if isinstance(data, StudyMeta):
            return data
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known and v is not None}
        values["study"] = str(data.get("study") or data.get("name") or data.get("study_name") or "study")
        for key, default in (("description", ""), ("direction", "maximize"), ("test", "auto"), ("failures", "drop")):
            values[key] = data.get(key) or default
        values["seed_matched"] = bool(data.get("seed_matched"))
        for key in ("min_effect", "comparisons", "primary_at", "scaling", "configs", "sequential_rules"):
            values[key] = data.get(key)
        values["sequential"] = LookDesign.from_dict(data.get("sequential") or None)
        values["compute_looks"] = ComputeLookDesign.from_dict(data.get("compute_looks") or None)
        values["benchmarks"] = [BenchmarkMeta.from_dict(b) for b in data.get("benchmarks") or []]
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The plain mapping, key for key as the results loader built it before it was typed."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        design = self.sequential
        out["sequential"] = None if design is None else {"looks": design.looks, "spending": design.spending}
        if self.compute_looks is None:  # key for key as before the section existed
            del out["compute_looks"]
        else:
            out["compute_looks"] = self.compute_looks.to_dict()
        out["benchmarks"] = [{"name": b.name, "metric": b.metric, "min_effect": b.min_effect} for b in self.benchmarks]
        if self.sequential_rules is None:
            del out["sequential_rules"]
        if self.source is None:
            del out["source"]
        if not self.input_notes:
            del out["input_notes"]
        return out
