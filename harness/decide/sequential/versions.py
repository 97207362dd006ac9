"""A sequential rule's versions: fixed at the first look, checked by every reader, and the
next version ``harness run --new-version`` starts.

The rule (:mod:`.rule`) is fixed once, when the study's first look is queued, in the study
database (:mod:`.rule_store`: exactly once across machines, and copied into the study folder).
Every reader (``harness run`` and ``harness worker`` before they start, each look replay,
``harness status``, ``harness report``) compares the study file's rule with the one in force
(:func:`rule_in_force`, the one check), and a difference is refused with one line naming each
change and the way out (:class:`RuleChanged`).

The way out is a new study, or, asked for explicitly (``harness run --new-version``), a new
version of this one: the edited rule is fixed as the next version, on seeds no earlier version
read (the same seeds would repeat the same trials, bit for bit, and re-read what was seen). The
looks start over on those seeds, and the earlier versions' trials are kept and listed as an
earlier design, never pooled (:mod:`harness.study.design`).

A study with looks over compute (``compute_looks:``) has its rule too (the same
:class:`~.rule.SequentialRule`, its fractions of the budget, catch-up and reference set), fixed
when its first segments are queued and checked by the same readers in the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.decide.frames import meta_of, study_name
from harness.decide.rules import DecisionRules
from harness.decide.sequential import rule_store
from harness.decide.sequential.rule import SequentialRule, now, rule_of_meta, rule_of_study, shown
from harness.errors import ConfigError
from harness.tracking.study_meta import StudyMeta


class RuleChanged(ConfigError):
    """The study file (or a command's options) would read the looks under another rule than the
    one fixed at the first look."""


def stored_rules(meta: StudyMeta) -> list[SequentialRule]:
    """The versions of the rule stored with the study, oldest first (``meta.sequential_rules``)."""
    return [SequentialRule.model_validate(rule) for rule in meta.sequential_rules or []]


#: how to go on after an edit of a fixed rule: a new study, on seeds that are new to it
NEW_STUDY = (
    "start a new study (give it a new name: and seeds: this one has not run, or the same trials repeat bit for bit)"
)


def _way_out() -> str:
    return (
        f"{NEW_STUDY}, or keep the name: give it such seeds and run `harness run --new-version` (the looks "
        "start over on them; the trials so far are kept and listed, never pooled)"
    )


def rule_in_force(current: SequentialRule, versions: list[SequentialRule], *, study: str) -> SequentialRule | None:
    """The stored rule in force (the latest version; None before the first look), when the
    study file's rule ``current`` is the same; otherwise raise :class:`RuleChanged`."""
    if not versions:
        return None
    fixed = versions[-1]
    changes = fixed.changes_to(current)
    if changes:
        raise RuleChanged(
            f"study {study!r}: the study file changes the {fixed.kind} rule fixed at its first look (rule "
            f"{fixed.label}, fixed {fixed.when}): {'; '.join(changes)}; a look is read only under the rule it was "
            f"queued under: {_way_out()}"
        )
    return fixed


def check_dropped(versions: list[SequentialRule], *, study: str) -> None:
    """Refuse a study file without a ``sequential:`` or ``compute_looks:`` section for a study
    whose looks were read under a rule: read as a fixed design, its trials would be re-read all
    at once."""
    if versions:
        fixed = versions[-1]
        raise RuleChanged(
            f"study {study!r}: the study file drops its {fixed.section}: section, but its looks were read under the "
            f"{fixed.kind} rule {fixed.label} (fixed {fixed.when}); a look is read only under the rule it was queued "
            f"under: {NEW_STUDY}"
        )


@dataclass(frozen=True)
class RuleVersions:
    """A sequential study's rules as a reader sees them."""

    current: SequentialRule  # the study file's, at the reader's alpha, correction and min_effect
    versions: list[SequentialRule]  # stored, oldest first
    in_force: (
        SequentialRule | None
    )  # the latest version (None: not fixed yet, or a study from before rules were stored)


def read_rules(results, rules: DecisionRules) -> RuleVersions:
    """The rule ``results``' looks are read under, checked against the study file and against
    the reader's ``rules`` (a report's alpha, correction and min_effect): a difference raises
    :class:`RuleChanged`."""
    alpha, correction, min_effect = rules.alpha, rules.correction, rules.min_effect
    meta = meta_of(results)
    name = study_name(results)
    versions = stored_rules(meta)
    fixed = versions[-1] if versions else None
    in_file = rule_of_meta(
        meta,
        alpha=fixed.alpha if fixed else alpha,
        correction=fixed.correction if fixed else correction,
        min_effect=meta.min_effect,
    )
    in_force = rule_in_force(in_file, versions, study=name)
    current = rule_of_meta(meta, alpha=alpha, correction=correction, min_effect=min_effect)
    if in_force is not None:
        changes = in_force.changes_to(current)
        if changes:
            raise RuleChanged(
                f"study {name!r}: its looks were read under the {in_force.kind} rule {in_force.label} (fixed "
                f"{in_force.when}), and the options change it: {'; '.join(changes)}; leave those options out "
                "(a look is read only under the rule it was queued under)"
            )
    return RuleVersions(current, versions, in_force)


def next_version(current: SequentialRule, versions: list[SequentialRule], *, study: str) -> SequentialRule:
    """``current`` as the study's next rule version (``harness run --new-version``): its looks
    must read seeds no earlier version read, or it would re-read what was seen."""
    read = sorted({seed for rule in versions for seed in rule.seeds})
    overlap = sorted(set(current.seeds) & set(read))
    if overlap:
        start = read[-1] + 1
        fresh = shown("seeds", list(range(start, start + len(current.seeds))))
        raise ConfigError(
            f"study {study!r}: --new-version starts the looks over, so they need seeds no earlier version read; "
            f"seeds {shown('seeds', overlap)} were read under rule {versions[-1].label}: give seeds: the study "
            f"has not run (e.g. {fresh}) and run again"
        )
    return current.model_copy(update={"version": versions[-1].version + 1, "fixed_at": now()})


def versions_line(rules: RuleVersions) -> str:
    """A report's header line on the rule: the one in force and the versions it replaced."""
    if rules.in_force is None:
        return "not recorded: the study's looks were queued before rules were stored (read under the study file's)"
    earlier = [f"{r.label} (fixed {r.when}; its trials are kept and listed, not used)" for r in rules.versions[:-1]]
    return rules.in_force.line() + (f"; replaces {', '.join(earlier)}" if earlier else "")


def settle(
    engine,
    folder: Path,
    name: str,
    current: SequentialRule | None,
    *,
    first_look: bool = False,
    new_version: bool = False,
    say: Callable[[str], None] = lambda _: None,
) -> SequentialRule | None:
    """The rule in force for study ``name`` in the study database ``engine``, checked against the
    study file's rule ``current`` (None: the file has no ``sequential:`` or ``compute_looks:``
    section); the one place
    a rule version is fixed:

    * ``first_look``: the first look is about to be queued, so ``current`` is fixed as version 1
      unless a rule is fixed already (exactly once across machines; a process that got there
      first with another rule wins, and this one is refused);
    * ``new_version`` (``harness run --new-version``): a ``current`` that changes the rule in
      force is fixed as the next version (:func:`next_version`);
    * otherwise the stored versions are only read.

    A ``current`` the rule in force does not match raises :class:`RuleChanged` (so does a
    dropped ``sequential:`` or ``compute_looks:`` section after the first look). Keeps the study folder's copy
    ``folder`` current. None before the first look."""
    versions = rule_store.stored_versions(engine, name)
    if current is None:
        check_dropped(versions, study=name)
        return None
    if first_look:
        rule_store.fix_version(engine, name, current)
        versions = rule_store.stored_versions(engine, name)
    elif new_version and versions and versions[-1].changes_to(current):
        fixed = rule_store.fix_version(engine, name, next_version(current, versions, study=name))
        versions.append(fixed)
        if not fixed.changes_to(current):  # this process fixed it (or another fixed the same)
            say(
                f"{fixed.kind} rule {fixed.label} fixed: the looks start over on seeds "
                f"{', '.join(map(str, fixed.seeds))}; the trials of rule {versions[-2].label} are kept, not used"
            )
    elif new_version and versions:
        say(f"--new-version: the study file keeps the {versions[-1].kind} rule {versions[-1].label}; its looks go on")
    rule_store.keep_folder_copy(engine, folder, name)
    return rule_in_force(current, versions, study=name)


def check_study_rule(study, storage, folder: Path, *, new_version: bool = False, say: Callable[[str], None]) -> None:
    """Before ``harness run`` writes anything or ``harness worker`` starts: refuse ``study``
    (``RuleChanged``, one line) when its file changes the rule fixed at its first look in
    ``storage`` (an Optuna RDB storage) or drops its ``sequential:`` (or ``compute_looks:``)
    section; with ``new_version``, fix the file's rule as the next version instead (:func:`settle`)."""
    looked = study.sequential is not None or study.compute_looks is not None
    current = rule_of_study(study) if looked else None
    settle(storage.engine, folder, study.name, current, new_version=new_version, say=say)
