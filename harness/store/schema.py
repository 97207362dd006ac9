"""The harness's own tables in the study database, next to Optuna's, and the version of their
layout.

Optuna owns and migrates its tables; these are the harness's, and this module owns them the same
way. Every one is declared here:

- ``harness_records``: a copy of every trial record, so that results reach every machine
  (:mod:`.records`; what a record means is :mod:`harness.tracking.shared_records`'s);
- ``harness_sequential_rules``: each sequential study's fixed decision rule, one row per
  version (:mod:`.rules`);
- ``harness_schema``: one row, the layout version of these tables (:data:`SCHEMA_VERSION`) and
  the harness release that wrote it.

Opening a study database (:func:`prepare`, called by :func:`.database.open_storage`) reads that
row: the current version goes on; a newer one (a store written by a later harness) is refused in
one line naming both versions; none, or an older one, is migrated in place, one step per version
(:data:`MIGRATIONS`), in one transaction that holds the database's write lock (SQLite) or the
version table's lock (PostgreSQL), so that two workers opening the store at once migrate it once
and the second finds it done. A store of release 0.1.0 has the layout of version 0: its records
and rules tables (each made when first written, so either may be missing) and no version row.

To change a table: declare the new layout here, raise :data:`SCHEMA_VERSION`, and append the step
that turns the previous layout into it (inside the caller's transaction; it must leave a store
already in the new layout as it is) with a test on a store of the previous release.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import sqlalchemy as sa

from harness.ground.urls import redact_url
from harness.store.errors import StorageError, error_line
from harness.version import __version__

#: the layout version of the harness's own tables that this harness writes and reads
SCHEMA_VERSION = 1

_METADATA = sa.MetaData()

RECORDS = sa.Table(
    "harness_records",
    _METADATA,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("study", sa.String(512), nullable=False),
    sa.Column("trial_id", sa.String(512), nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("phase", sa.String(16), nullable=False),
    sa.Column("fingerprint", sa.String(64), nullable=False),
    sa.Column("record", sa.Text, nullable=False),
    sa.Column("written_at", sa.DateTime, server_default=sa.func.current_timestamp()),
    sa.UniqueConstraint("study", "trial_id", "attempt", name="uq_harness_records_attempt"),
)

RULES = sa.Table(
    "harness_sequential_rules",
    _METADATA,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("study", sa.String(512), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("rule", sa.Text, nullable=False),
    sa.Column("written_at", sa.DateTime, server_default=sa.func.current_timestamp()),
    sa.UniqueConstraint("study", "version", name="uq_harness_sequential_rules_version"),
)

#: the one row saying which layout the tables above have (``name`` is always :data:`_ROW`)
VERSION = sa.Table(
    "harness_schema",
    _METADATA,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("written_by", sa.String(64), nullable=False),  # the harness release that wrote the row
)
_ROW = "harness"


class SchemaTooNew(StorageError):
    """The study database's harness tables were written by a later harness, in a layout this one
    does not know."""


def _create_missing(conn: sa.Connection, *tables: sa.Table) -> None:
    for table in tables:
        table.create(conn, checkfirst=True)


def _from_release_0_1_0(conn: sa.Connection) -> None:
    """Version 0 (release 0.1.0) to 1: the same two tables, made here when missing (0.1.0 made
    each when it first wrote one); the version row is written by :func:`_migrate`."""
    _create_missing(conn, RECORDS, RULES)


#: ``MIGRATIONS[v]`` turns the layout of version ``v`` into that of ``v + 1``, in the caller's
#: transaction
MIGRATIONS: tuple[Callable[[sa.Connection], None], ...] = (_from_release_0_1_0,)

_PREPARED: weakref.WeakSet[sa.Engine] = weakref.WeakSet()  # engines whose database was found current


def prepare(engine: sa.Engine) -> None:
    """Make sure the harness's tables in ``engine``'s database have this harness's layout: made
    (with the version row) when missing, migrated when older, refused with :class:`SchemaTooNew`
    when newer. Once per engine; every failure is one line (a ``StorageError``)."""
    if engine in _PREPARED:
        return
    url = redact_url(engine.url.render_as_string(hide_password=False))
    try:
        if stored_version(engine) != SCHEMA_VERSION:
            _migrate(engine, url)
    except StorageError:
        raise
    except sa.exc.SQLAlchemyError as err:
        raise StorageError(f"cannot set up the harness's tables in {url}: {error_line(err, url)}") from None
    _PREPARED.add(engine)


def stored_version(engine: sa.Engine) -> int | None:
    """The layout version the database's harness tables have (None: no version row, which is
    release 0.1.0's layout, or a database the harness has not written yet)."""
    if not sa.inspect(engine).has_table(VERSION.name):
        return None
    with engine.connect() as conn:
        return conn.execute(sa.select(VERSION.c.version).where(VERSION.c.name == _ROW)).scalar()


def _refuse_newer(found: int, written_by: str | None, url: str) -> None:
    if found > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"the study database {url} was written by harness {written_by or 'unknown'} (schema version "
            f"{found}); this harness {__version__} reads schema version {SCHEMA_VERSION} at most: upgrade the "
            "harness on this machine to the release every machine of the study runs (pip install -U harness)"
        )


_MIGRATION_TRIES = 3


def _migrate(engine: sa.Engine, url: str) -> None:
    """Bring the tables to :data:`SCHEMA_VERSION` in one transaction under the lock (see the
    module's docstring). A process of release 0.1.0 creating a table at that very moment can make
    the transaction fail (PostgreSQL); it is tried again, and finds the table there."""
    if not sa.inspect(engine).has_table(VERSION.name):
        _create_once(engine, VERSION)
    for attempt in range(_MIGRATION_TRIES):
        try:
            with engine.begin() as conn:
                _lock(conn)
                held = conn.execute(sa.select(VERSION.c.version, VERSION.c.written_by).where(VERSION.c.name == _ROW))
                row = held.first()
                found = row[0] if row is not None else 0
                _refuse_newer(found, row[1] if row is not None else None, url)
                for step in MIGRATIONS[found:]:
                    step(conn)
                if row is None:
                    conn.execute(sa.insert(VERSION).values(name=_ROW, version=SCHEMA_VERSION, written_by=__version__))
                elif found != SCHEMA_VERSION:
                    conn.execute(
                        sa.update(VERSION)
                        .where(VERSION.c.name == _ROW)
                        .values(version=SCHEMA_VERSION, written_by=__version__)
                    )
            return
        except sa.exc.SQLAlchemyError:
            if attempt + 1 == _MIGRATION_TRIES:
                raise


def _lock(conn: sa.Connection) -> None:
    """Hold the version table against every other migration until this transaction ends: on
    PostgreSQL its table lock (reads go on); on SQLite a write to it, which takes the database's
    write lock (SQLite has no other lock to take) even when it changes no row."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text(f"LOCK TABLE {VERSION.name} IN EXCLUSIVE MODE"))
    else:
        conn.execute(sa.update(VERSION).where(VERSION.c.name == _ROW).values(version=VERSION.c.version))


def _create_once(engine: sa.Engine, table: sa.Table) -> None:
    """Create ``table`` if it is missing, safely when several processes try at once."""
    try:
        table.create(engine, checkfirst=True)
    except sa.exc.SQLAlchemyError:
        # Another process created it between the check and the CREATE (PostgreSQL raises then).
        if not sa.inspect(engine).has_table(table.name):
            raise
