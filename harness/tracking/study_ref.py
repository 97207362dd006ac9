"""Study references: a study's name, its file, its folder or a ``Study`` object, resolved to
where its outputs are and what is known about it.

A name (``quickstart``) that is not itself a file or folder here is looked up relative to the
working folder as ``studies/<name>.yaml`` (``STUDIES_ROOT``) and ``runs/<name>/`` (``RUNS_ROOT``,
where ``harness.study.expand.study_dir`` puts a study without ``output_dir``). The name is
checked like any study name, so it never reaches outside those folders.
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import ConfigError, HarnessError
from harness.study.expand import RUNS_ROOT, study_dir
from harness.study.load import load_study, read_study_data
from harness.study.schema import Study, check_name
from harness.tracking.records import read_records

#: Where a study name is looked up as ``<name>.yaml``, relative to the working folder.
STUDIES_ROOT = Path("studies")


@dataclass
class StudyRef:
    """Where a study's outputs are, and what is known about it (a Study or its raw YAML)."""

    dir: Path
    study: Study | None = None  # None when a folder's study.yaml no longer loads
    raw: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None  # the study file or folder the reference resolved to (None: a Study)

    def describe(self) -> str:
        """What the reference resolved to, in one line:
        ``study quickstart: studies/quickstart.yaml, runs/quickstart``."""
        name = study_name(self, from_records=False)
        shown = name if name.isprintable() else repr(name)
        if self.path is not None and self.path.is_file():
            return f"study {shown}: {self.path}, {self.dir}"
        kept = "its study.yaml" if (self.dir / "study.yaml").is_file() else "no study.yaml: read from its records"
        return f"study {shown}: {self.dir} ({kept})"


def resolve_study(study_or_dir: Any) -> StudyRef:
    """A Study object, a study YAML path, a study folder (with or without study.yaml), or a
    study name that is neither: ``studies/<name>.yaml`` or ``runs/<name>/`` (see the module)."""
    if isinstance(study_or_dir, Study):
        return StudyRef(study_dir(study_or_dir), study_or_dir)
    path = Path(os.fspath(study_or_dir))
    if not path.exists() and _is_name(str(path)):
        return _by_name(str(path))
    return _at(path)


def _is_name(text: str) -> bool:
    """A study name rather than a file name: passes the name checks and is not ``*.yaml``."""
    try:
        check_name(text, "study name")
    except ValueError:
        return False
    return not text.endswith((".yaml", ".yml"))


def _by_name(name: str) -> StudyRef:
    """``studies/<name>.yaml`` or ``runs/<name>/``; both when they are the same study's."""
    file = path_under(STUDIES_ROOT, f"{name}.yaml")
    folder = path_under(RUNS_ROOT, name)
    if not file.is_file():
        if folder.is_dir():
            return _at(folder)
        raise HarnessError(
            f"no study named {name!r} here: tried {file} and {folder}/ under {Path.cwd()}; "
            "give the study file or its output folder"
        )
    ref = _at(file)
    if folder.is_dir() and ref.dir.resolve() != folder.resolve():
        raise HarnessError(
            f"study name {name!r} is ambiguous: {file} writes to {ref.dir}/, and {folder}/ is another "
            "study folder; give the file or the folder"
        )
    return ref


def _at(path: Path) -> StudyRef:
    """The study file or study folder at ``path``."""
    if path.is_dir():
        snapshot = path / "study.yaml"
        ref = StudyRef(path, path=path)
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
        return StudyRef(study_dir(study), study, raw, path)
    raise HarnessError(f"no study file or study folder at {path}")


def study_name(ref: StudyRef, *, from_records: bool = True) -> str:
    """The study's name: its Study, its raw YAML, its records (read only when needed, and
    ``from_records``), else its folder's name."""
    if ref.study is not None:
        return ref.study.name
    if isinstance(ref.raw.get("name"), str):
        return ref.raw["name"]
    records = read_records(ref.dir) if from_records else []
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
