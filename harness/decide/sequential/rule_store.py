"""The one door to where fixed rules are kept.

The rules are rows of the harness's own table in the study database, with a copy in the study
folder (:mod:`harness.store.rules`, which knows nothing of what a rule means).
Every read and write of stored rule versions by this package goes through the functions here,
as :class:`~.rule.SequentialRule` objects, so the table's home can move without the rest of the
package noticing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa

from harness.decide.sequential.rule import SequentialRule
from harness.store import open_storage
from harness.store import rules as table


@contextmanager
def database(url: str) -> Iterator[sa.Engine]:
    """The engine of the existing study database at ``url``, disposed of afterwards."""
    rdb = open_storage(url, create=False)
    try:
        yield rdb.engine
    finally:
        rdb.engine.dispose()


def stored_versions(engine: sa.Engine, study: str) -> list[SequentialRule]:
    """Every rule version fixed for ``study``, oldest first (none before its first look)."""
    return [SequentialRule.model_validate(rule) for rule in table.stored(engine, study)]


def fix_version(engine: sa.Engine, study: str, rule: SequentialRule) -> SequentialRule:
    """Fix ``rule`` as ``study``'s version ``rule.version`` unless that version is fixed already
    (exactly once across machines); the rule fixed, another process's when it got there first."""
    return SequentialRule.model_validate(table.fix(engine, study, rule.version, rule.model_dump(mode="json")))


def keep_folder_copy(engine: sa.Engine, folder: str | os.PathLike, study: str) -> None:
    """Copy ``study``'s stored versions, as stored, into the study folder ``folder`` (what a
    report reads when the database cannot be reached)."""
    table.write_local(folder, table.stored(engine, study))
