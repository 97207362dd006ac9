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

import yaml

from harness.errors import HarnessError
from harness.study.expand import study_dir
from harness.study.load import load_study
from harness.study.schema import Study
from harness.tracking.records import TrialRecord


@dataclass
class StudyRef:
    """Where a study's outputs are, and what is known about it (a Study or its raw YAML)."""

    dir: Path
    study: Study | None = None  # None when a folder's study.yaml no longer loads
    raw: dict[str, Any] = field(default_factory=dict)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise HarnessError(f"cannot read study file {path}: {err}") from err
    if not isinstance(data, dict):
        raise HarnessError(f"study file {path} is not a mapping")
    return data


def resolve_study(study_or_dir: Any) -> StudyRef:
    """A study YAML path, a study folder (with or without study.yaml) or a Study object."""
    if isinstance(study_or_dir, Study):
        return StudyRef(study_dir(study_or_dir), study_or_dir)
    path = Path(os.fspath(study_or_dir))
    if path.is_dir():
        snapshot = path / "study.yaml"
        ref = StudyRef(path)
        if snapshot.is_file():
            ref.raw = _read_yaml(snapshot)
            try:
                ref.study = load_study(snapshot)
            except (HarnessError, ValueError, OSError) as err:
                warnings.warn(f"{snapshot}: {err}; using its raw fields", stacklevel=3)
        return ref
    if path.is_file():
        raw = _read_yaml(path)
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
