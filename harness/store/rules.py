"""Where a sequential study's fixed decision rule is kept: the study database, and a copy in the
study folder.

A sequential study's looks are read under one rule, fixed when its first look is queued
(:mod:`harness.decide.sequential` says what the rule holds and how a change is refused).
It must be fixed exactly once, however many machines find the first look due at once, so it is
a row of a table of the harness's own in the study database, ``harness_sequential_rules``
(declared in :mod:`.schema`): one row per study and rule version, unique on the two. The
first process to insert a version fixes it; an insert of a version already there fails on the
unique key inside the database (SQLite and PostgreSQL alike), and that process reads the rule
that was fixed instead (:func:`fix`). Optuna's own study attributes cannot do this: its
``set_user_attr`` overwrites, so the last writer would win.

The folder's copy (``sequential_rules.json``) is what a report reads when the database cannot
be reached; whoever reads or fixes the rules from the database writes it.

Rules travel here as plain mappings (their JSON); this module stores and reads them and knows
nothing of what they mean.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from harness.ground.files import atomic_write
from harness.ground.urls import redact_text, redact_url
from harness.store.database import open_storage
from harness.store.errors import StorageUnreadable
from harness.store.schema import RULES, prepare

#: the study folder's copy of every stored version, oldest first
LOCAL_COPY = "sequential_rules.json"


def stored(engine: sa.Engine, study: str) -> list[dict[str, Any]]:
    """Every rule version fixed for ``study``, oldest first (none before the first look)."""
    prepare(engine)
    with engine.connect() as conn:
        rows = conn.execute(sa.select(RULES.c.rule).where(RULES.c.study == study).order_by(RULES.c.version)).all()
    return [json.loads(text) for (text,) in rows]


def fix(engine: sa.Engine, study: str, version: int, rule: dict[str, Any]) -> dict[str, Any]:
    """Fix ``rule`` as ``study``'s rule ``version`` unless that version is fixed already, exactly
    once across processes and machines (the unique key decides); returns the rule fixed, which
    is another process's when it got there first."""
    prepare(engine)
    try:
        with engine.begin() as conn:
            conn.execute(sa.insert(RULES).values(study=study, version=version, rule=json.dumps(rule, sort_keys=True)))
    except sa.exc.IntegrityError:
        pass  # fixed by another process first: read it below
    with engine.connect() as conn:
        text = conn.execute(sa.select(RULES.c.rule).where(RULES.c.study == study, RULES.c.version == version)).scalar()
    return json.loads(text)


def write_local(study_dir: str | os.PathLike, rules: list[dict[str, Any]]) -> None:
    """Keep the folder's copy of the stored rules up to date (nothing to keep: left alone)."""
    if rules:
        Path(study_dir).mkdir(parents=True, exist_ok=True)
        atomic_write(Path(study_dir) / LOCAL_COPY, json.dumps(rules, indent=1, sort_keys=True) + "\n")


def read_local(study_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """The folder's copy of the stored rules (none when there is no copy)."""
    path = Path(study_dir) / LOCAL_COPY
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []


def read_rules(
    study_dir: str | os.PathLike, url: str | None, study: str, *, strict: bool = False
) -> list[dict[str, Any]]:
    """``study``'s stored rules: from the database at ``url``, or, without one or when it cannot
    be read (a warning says so; ``strict``: ``StorageUnreadable`` instead), from the folder's copy."""
    if url is not None:
        try:
            rdb = open_storage(url, create=False)
            try:
                return stored(rdb.engine, study)
            finally:
                rdb.engine.dispose()
        except Exception as err:  # noqa: BLE001 - the folder's copy stands in
            unread = StorageUnreadable(
                f"cannot read the sequential rules stored in {redact_url(url)}: {type(err).__name__}: "
                f"{redact_text(str(err), url)}"
            )
            if strict:
                raise unread from None
            warnings.warn(f"{unread}; showing the study folder's copy", stacklevel=2)
    return read_local(study_dir)
