"""Study references: a study file, a study folder or a ``Study`` object, resolved to where its
outputs are and what is known about it.
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import ConfigError, HarnessError
from harness.study.expand import study_dir
from harness.study.load import load_study, read_study_data
from harness.study.schema import Study, check_name
from harness.tracking.records import TrialRecord


@dataclass
class StudyRef:
    """Where a study's outputs are, and what is known about it (a Study or its raw YAML)."""

    dir: Path
    study: Study | None = None  # None when a folder's study.yaml no longer loads
    raw: dict[str, Any] = field(default_factory=dict)


def resolve_study(study_or_dir: Any) -> StudyRef:
    """A study YAML path, a study folder (with or without study.yaml) or a Study object."""
    if isinstance(study_or_dir, Study):
        return StudyRef(study_dir(study_or_dir), study_or_dir)
    path = Path(os.fspath(study_or_dir))
    if path.is_dir():
        snapshot = path / "study.yaml"
        ref = StudyRef(path)
        if snapshot.is_file():
            ref.raw = read_study_data(snapshot)
            try:
                ref.study = load_study(snapshot)
            except (HarnessError, ValueError, OSError) as err:
                warnings.warn(f"{snapshot}: {err}; using its raw fields", stacklevel=3)
        return ref
    if path.is_file():
        raw = read_study_data(path)
        study = load_study(path)
        return StudyRef(study_dir(study), study, raw)
    raise HarnessError(f"no study file or study folder at {path}")


def resolve_study_dir(study_or_dir: Any) -> Path:
    return resolve_study(study_or_dir).dir


def study_name(ref: StudyRef, records: list[TrialRecord]) -> str:
    """The study's name: its Study, its raw YAML, its records, else its folder's name."""
    if ref.study is not None:
        return ref.study.name
    if isinstance(ref.raw.get("name"), str):
        return ref.raw["name"]
    if records:
        return Counter(r.study for r in records).most_common(1)[0][0]
    return ref.dir.name


def checked_name(name: Any, what: str = "study name") -> str:
    """``name`` if it is safe as a folder or file name (``harness.study.schema.check_name``),
    else a one-line ``ConfigError`` saying why."""
    try:
        return check_name(name, what)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def path_under(root: str | os.PathLike, name: Any, what: str = "study name") -> Path:
    """``root / name`` for a checked ``name`` whose resolved path stays inside ``root``.

    Every folder the harness derives from a name (a report under ``reports/``) comes from
    here: a name with a separator or ``..`` is refused by :func:`checked_name`, and a folder
    that resolves outside ``root`` anyway (a symbolic link) is refused too. Raises
    ``ConfigError``; creates nothing.
    """
    root = Path(root)
    path = root / checked_name(name, what)
    base, target = root.resolve(), path.resolve()
    if target == base or not target.is_relative_to(base):
        raise ConfigError(f"{what} {name!r}: {path} resolves to {target}, outside {root}/")
    return path
