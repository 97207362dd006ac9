"""The one adapter over Optuna's storage internals: every SQL statement the harness runs on
Optuna's own tables, and every private Optuna attribute it relies on, are in this module and
nowhere else (``tests/layout/test_optuna_internals.py`` holds that rule).

Why SQL at all: the queue needs what Optuna's public API cannot give several processes sharing
one database: a claim that is one conditional update (``Study.ask`` reads, then writes), a
result committed only while the claim holds, and an enqueue under the queue's lock (see
:mod:`harness.runner.queue`). Those statements are written against Optuna's tables, which Optuna
may change in any release, so what they expect is declared once, below (:data:`LAYOUT`,
:data:`PRIVATE_ATTRIBUTES`, :data:`FIXED_PARAMS`), and :func:`check_layout` compares it with the
installed Optuna and with the actual database before a runner uses a queue: a difference stops
the runner with one line naming the Optuna version and what differs, instead of trials that
quietly run twice or get lost.

The statements take a connection inside the caller's transaction (``engine(study).begin()``),
so the protocol modules (:mod:`harness.runner.queue`) decide what happens in one transaction
and in which order; this module only knows how each step is spelled in Optuna's tables. It sits in
:mod:`harness.store` beside the harness's own tables (:mod:`.schema`) because a commit writes both
in one transaction, and what is in the study database, and how, is then read in one package.
"""

from __future__ import annotations

import datetime as dt
import functools
import importlib
import json
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import optuna
import sqlalchemy as sa
from optuna.storages import RDBStorage
from optuna.trial import TrialState

from harness.errors import one_line
from harness.ground.urls import redact_url
from harness.store.errors import StorageError
from harness.store.names import WORKER

# --------------------------------------------------------------------------------------------
# what this module expects of Optuna: the one declared place

#: the Optuna releases this layout is tested on (pyproject.toml pins the same range; CI tests
#: the lowest and the newest)
TESTED_OPTUNA = ">=4.0,<6"

#: where Optuna keeps the ORM models of its tables (the statements take their column types there)
MODELS_MODULE = "optuna.storages._rdb.models"


@dataclass(frozen=True)
class OptunaTable:
    """One of Optuna's tables as the harness uses it."""

    name: str  # the table in the database
    model: str  # its ORM class in MODELS_MODULE
    columns: tuple[str, ...]  # the columns the harness reads or writes (no others)


#: every table and column the harness reads or writes in Optuna's part of the study database
LAYOUT: tuple[OptunaTable, ...] = (
    OptunaTable("studies", "StudyModel", ("study_id", "study_name")),
    # datetimes are written as naive UTC, as Optuna 5 does (Optuna 4 wrote local time: the same
    # on a machine whose clock is UTC)
    OptunaTable(
        "trials", "TrialModel", ("trial_id", "number", "study_id", "state", "datetime_start", "datetime_complete")
    ),
    OptunaTable("trial_user_attributes", "TrialUserAttributeModel", ("trial_id", "key", "value_json")),
    OptunaTable("trial_system_attributes", "TrialSystemAttributeModel", ("trial_id", "key", "value_json")),
    OptunaTable("trial_values", "TrialValueModel", ("trial_id", "objective", "value", "value_type")),
    OptunaTable("trial_heartbeats", "TrialHeartbeatModel", ("trial_id", "heartbeat")),
)


@dataclass(frozen=True)
class PrivateAttribute:
    """A private attribute of something Optuna makes, and what the harness reads it for."""

    owner: str  # whose: a class of Optuna's, or what makes the object
    name: str
    use: str


#: every private attribute the harness relies on
PRIVATE_ATTRIBUTES: tuple[PrivateAttribute, ...] = (
    PrivateAttribute("optuna.study.Study", "_study_id", "a queue's row in studies"),
    PrivateAttribute("optuna.study.Study", "_storage", "the storage under a study"),
    PrivateAttribute("optuna.trial.FrozenTrial", "_trial_id", "a job's row in trials"),
    PrivateAttribute("optuna.storages.get_storage(RDBStorage)", "_backend", "the RDBStorage under Optuna's cache"),
    PrivateAttribute(f"{MODELS_MODULE}.TrialValueModel.TrialValueType", "FINITE", "a finite objective value"),
)

#: the system attribute in which ``Study.enqueue_trial`` keeps a trial's fixed parameters (a
#: retried tuning slot is queued with them, and the sampler's suggestions return them); every
#: ``value_json`` column holds JSON text, as Optuna writes it
FIXED_PARAMS = "fixed_params"


# --------------------------------------------------------------------------------------------
# the check at start-up


class LayoutMismatch(StorageError):
    """The installed Optuna, or the study database, is not laid out as :data:`LAYOUT` says."""


def check_layout(storage: RDBStorage) -> None:
    """Compare the declared layout with the installed Optuna and with ``storage``'s database;
    on a difference raise :class:`LayoutMismatch`, one line naming the Optuna version and what
    differs. Cheap (the names of the database's tables and columns, read once per process and
    database): call it before a queue is used."""
    url = storage.engine.url.render_as_string(hide_password=False)
    if url in _CHECKED:
        return
    cache = {"optuna.storages.get_storage(RDBStorage)": optuna.storages.get_storage(storage)}  # no query
    problems = [*optuna_problems(), *attribute_problems(cache), *database_problems(storage.engine)]
    if problems:
        raise LayoutMismatch(
            f"the study database {redact_url(url)} does not have the layout this harness was tested on "
            f"(optuna {optuna.__version__}): {'; '.join(problems)}; install optuna{TESTED_OPTUNA} "
            f"(pip install 'optuna{TESTED_OPTUNA}') and use a study database it created"
        )
    _CHECKED.add(url)


_CHECKED: set[str] = set()  # the databases found as declared, by URL


def database_problems(engine: sa.Engine) -> list[str]:
    """The declared tables and columns the database lacks."""
    found = sa.inspect(engine)
    tables = set(found.get_table_names())
    problems = []
    for table in LAYOUT:
        if table.name not in tables:
            problems.append(f"it has no table {table.name}")
            continue
        columns = {c["name"] for c in found.get_columns(table.name)}
        problems += [f"table {table.name} has no column {c}" for c in table.columns if c not in columns]
    return problems


@functools.cache
def optuna_problems() -> tuple[str, ...]:
    """What the installed Optuna lacks of the declared models, private attributes and the
    fixed-parameters convention (the attributes tried on a study in memory)."""
    try:
        models = importlib.import_module(MODELS_MODULE)
    except ImportError:
        return (f"there is no module {MODELS_MODULE}",)
    problems = []
    for table in LAYOUT:
        model = getattr(models, table.model, None)
        if model is None:
            problems.append(f"{MODELS_MODULE} has no {table.model}")
            continue
        orm = model.__table__
        if orm.name != table.name:
            problems.append(f"{MODELS_MODULE}.{table.model} is table {orm.name}, not {table.name}")
        problems += [f"{MODELS_MODULE}.{table.model} has no column {c}" for c in table.columns if c not in orm.c]
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "a new study created in memory"
    try:
        study = optuna.create_study()
        study.enqueue_trial({"x": 0})
        trial = study.get_trials(deepcopy=False)[0]
    except Exception as err:  # noqa: BLE001 - whatever broke, it is one line of the refusal
        return (*problems, f"a study in memory cannot queue a trial ({one_line(err, 200)})")
    finally:
        optuna.logging.set_verbosity(verbosity)
    if trial.system_attrs.get(FIXED_PARAMS) != {"x": 0}:
        problems.append(f"Study.enqueue_trial keeps a trial's fixed parameters elsewhere than in {FIXED_PARAMS}")
    value_type = getattr(getattr(models, "TrialValueModel", None), "TrialValueType", None)
    return (
        *problems,
        *attribute_problems(
            {
                "optuna.study.Study": study,
                "optuna.trial.FrozenTrial": trial,
                f"{MODELS_MODULE}.TrialValueModel.TrialValueType": value_type,
            }
        ),
    )


def attribute_problems(samples: dict[str, Any]) -> list[str]:
    """The declared private attributes missing from ``samples`` (owner -> an object of it)."""
    return [
        f"{a.owner} has no attribute {a.name}"
        for a in PRIVATE_ATTRIBUTES
        if a.owner in samples and not hasattr(samples[a.owner], a.name)
    ]


# --------------------------------------------------------------------------------------------
# the storage under a study, and the rows of a study and a trial


def engine(study: optuna.Study) -> sa.Engine:
    """The SQLAlchemy engine of the RDB storage under an Optuna study (the queue needs SQL)."""
    storage = study._storage
    rdb = getattr(storage, "_backend", storage)
    if not isinstance(rdb, RDBStorage):
        raise StorageError("the harness queue needs an RDB storage (sqlite:///..., postgresql://...)")
    return rdb.engine


def trial_row(trial: optuna.trial.FrozenTrial) -> int:
    """A trial's row in ``trials`` (its storage id; Optuna's ``number`` counts within a study)."""
    return trial._trial_id


def load_trial(study: optuna.Study, row: int) -> optuna.trial.FrozenTrial:
    """One trial of the queue, read alone (``study.get_trials`` reads every trial of the study)."""
    return study._storage.get_trial(row)


def set_user_attr(study: optuna.Study, row: int, key: str, value: Any) -> bool:
    """Optuna's own write of a user attribute; False when the trial is finished (its attributes
    are frozen: Optuna raises ``UpdateFinishedTrialError``, a ``RuntimeError``; 4.0 raised a
    plain ``RuntimeError``)."""
    try:
        study._storage.set_trial_user_attr(row, key, value)
    except RuntimeError:
        return False
    return True


@functools.cache
def _tables() -> SimpleNamespace:
    """Each declared table, with only its declared columns (``t.trials.trial_id``; ``t.trials.table``
    is the table itself), on Optuna's ORM tables so that every value is typed as Optuna types it."""
    models = importlib.import_module(MODELS_MODULE)
    out = {}
    for table in LAYOUT:
        orm = getattr(models, table.model).__table__
        out[table.name] = SimpleNamespace(table=orm, **{c: orm.c[c] for c in table.columns})
    return SimpleNamespace(**out)


def _finite() -> Any:
    return importlib.import_module(MODELS_MODULE).TrialValueModel.TrialValueType.FINITE


def _utcnow() -> dt.datetime:
    """A timestamp as the tables hold them: naive UTC."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


# --------------------------------------------------------------------------------------------
# statements (each inside the caller's transaction)


def lock_queue(conn: sa.Connection, study: optuna.Study) -> None:
    """Lock the queue's study row with a no-op update: the lock Optuna itself takes to create a
    trial (a row lock in PostgreSQL, the write lock in SQLite)."""
    s = _tables().studies
    conn.execute(sa.update(s.table).where(s.study_id == study._study_id).values({s.study_name: s.study_name}))


def identities(
    conn: sa.Connection, study: optuna.Study, keys: tuple[str, ...]
) -> dict[int, tuple[int, TrialState, dict[str, Any]]]:
    """Every trial of the queue, in any state: row -> (number, state, its user attributes among ``keys``)."""
    t = _tables()
    trials, user = t.trials, t.trial_user_attributes
    rows = conn.execute(
        sa.select(trials.trial_id, trials.number, trials.state, user.key, user.value_json)
        .join(user.table, sa.and_(user.trial_id == trials.trial_id, user.key.in_(keys)), isouter=True)
        .where(trials.study_id == study._study_id)
    ).all()
    found: dict[int, tuple[int, TrialState, dict[str, Any]]] = {}
    for row, number, state, key, value in rows:
        attrs = found.setdefault(row, (number, state, {}))[2]
        if key is not None:
            attrs[key] = json.loads(value)
    return found


def insert_waiting(
    conn: sa.Connection, study: optuna.Study, number: int, attrs: dict[str, Any], params: dict[str, Any]
) -> int:
    """Insert a WAITING trial numbered ``number`` with its user attributes and fixed
    parameters, as ``Study.enqueue_trial`` would; returns its row."""
    t = _tables()
    trials, user, system = t.trials, t.trial_user_attributes, t.trial_system_attributes
    inserted = conn.execute(
        sa.insert(trials.table).values(
            {trials.number: number, trials.study_id: study._study_id, trials.state: TrialState.WAITING}
        )
    )
    row = inserted.inserted_primary_key[0]
    if attrs:
        conn.execute(
            sa.insert(user.table),
            [
                {user.trial_id.name: row, user.key.name: k, user.value_json.name: json.dumps(v)}
                for k, v in attrs.items()
            ],
        )
    conn.execute(
        sa.insert(system.table).values(
            {system.trial_id: row, system.key: FIXED_PARAMS, system.value_json: json.dumps(params)}
        )
    )
    return row


def put_user_attr(conn: sa.Connection, row: int, key: str, value: Any) -> None:
    """Set a user attribute (Optuna's encoding: JSON)."""
    delete_user_attr(conn, row, key)
    user = _tables().trial_user_attributes
    conn.execute(sa.insert(user.table).values({user.trial_id: row, user.key: key, user.value_json: json.dumps(value)}))


def delete_user_attr(conn: sa.Connection, row: int, key: str) -> None:
    user = _tables().trial_user_attributes
    conn.execute(sa.delete(user.table).where(user.trial_id == row, user.key == key))


def user_attrs(conn: sa.Connection, row: int, keys: tuple[str, ...]) -> dict[str, Any]:
    """The trial's user attributes among ``keys`` (decoded; absent ones left out)."""
    user = _tables().trial_user_attributes
    found = conn.execute(sa.select(user.key, user.value_json).where(user.trial_id == row, user.key.in_(keys))).all()
    return {key: json.loads(value) for key, value in found}


def oldest_waiting(conn: sa.Connection, study: optuna.Study) -> int | None:
    """The row of the queue's oldest WAITING trial that no other transaction holds, locked for
    this one (PostgreSQL: ``FOR UPDATE SKIP LOCKED``, so processes claiming at once each get a
    different trial instead of queueing on the same row; SQLite, which has no row locks, reads
    it plainly and the conditional update of :func:`change_state` decides). None: none is free."""
    trials = _tables().trials
    return conn.execute(
        sa.select(trials.trial_id)
        .where(trials.study_id == study._study_id, trials.state == TrialState.WAITING)
        .order_by(trials.number)
        .limit(1)
        .with_for_update(skip_locked=True)
    ).scalar()


def change_state(conn: sa.Connection, row: int, from_state: TrialState, to_state: TrialState) -> bool:
    """Move the trial from ``from_state`` to ``to_state`` only if it is still ``from_state``
    (True if it changed): one conditional update, atomic on SQLite and PostgreSQL alike. RUNNING
    sets the start time, a finished state the completion time, WAITING clears the start."""
    trials = _tables().trials
    values: dict[Any, Any] = {trials.state: to_state}
    if to_state == TrialState.RUNNING:
        values[trials.datetime_start] = _utcnow()
    if to_state.is_finished():
        values[trials.datetime_complete] = _utcnow()
    if to_state == TrialState.WAITING:
        values[trials.datetime_start] = None
    changed = conn.execute(
        sa.update(trials.table).where(trials.trial_id == row, trials.state == from_state).values(values)
    ).rowcount
    return changed == 1


def state_of(conn: sa.Connection, row: int) -> TrialState | None:
    """The trial's state (None: no such trial)."""
    trials = _tables().trials
    state = conn.execute(sa.select(trials.state).where(trials.trial_id == row)).scalar()
    return TrialState[state] if isinstance(state, str) else state


def fence(conn: sa.Connection, row: int, owner: str | None, finish: TrialState | None = None) -> bool:
    """The fence: an update that matches only a trial still RUNNING (under ``owner``'s claim, in
    its ``worker`` user attribute, when given). With ``finish`` it moves the trial to that state
    and sets its completion time; without, it changes nothing but still locks the row
    (PostgreSQL) or the database (SQLite) for the rest of the transaction. True when it matched."""
    trials, user = _tables().trials, _tables().trial_user_attributes
    where = [trials.trial_id == row, trials.state == TrialState.RUNNING]
    if owner is not None:
        where.append(sa.exists().where(user.trial_id == row, user.key == WORKER, user.value_json == json.dumps(owner)))
    values: dict[Any, Any] = {trials.state: finish if finish is not None else trials.state}
    if finish is not None:
        values[trials.datetime_complete] = _utcnow()
    return conn.execute(sa.update(trials.table).where(*where).values(values)).rowcount == 1


def same_key_attempts(
    conn: sa.Connection, study: optuna.Study, row: int, key: str, value: Any, attempt_key: str
) -> list[tuple[int, TrialState, int]]:
    """The other trials of the queue whose user attribute ``key`` is ``value`` (the other
    attempts of one trial), as (number, state, attempt: ``attempt_key``'s value, 1 without one)."""
    trials, user = _tables().trials, _tables().trial_user_attributes
    same_key = (
        sa.select(user.trial_id)
        .join(trials.table, trials.trial_id == user.trial_id)
        .where(trials.study_id == study._study_id, user.key == key, user.value_json == json.dumps(value))
    )
    attempt_of = sa.select(user.trial_id, user.value_json).where(user.key == attempt_key).subquery()
    rows = conn.execute(
        sa.select(trials.number, trials.state, attempt_of.c.value_json)
        .select_from(trials.table.outerjoin(attempt_of, attempt_of.c.trial_id == trials.trial_id))
        .where(trials.trial_id.in_(same_key), trials.trial_id != row)
    ).all()
    out = []
    for number, state, attempt_json in rows:
        try:
            attempt = int(json.loads(attempt_json)) if attempt_json is not None else 1
        except (TypeError, ValueError):
            attempt = 1
        out.append((number, TrialState[state] if isinstance(state, str) else state, attempt))
    return out


def put_value(conn: sa.Connection, row: int, value: float) -> None:
    """Store the trial's (single, finite) objective value."""
    values = _tables().trial_values
    conn.execute(sa.delete(values.table).where(values.trial_id == row))
    conn.execute(
        sa.insert(values.table).values(
            {values.trial_id: row, values.objective: 0, values.value: float(value), values.value_type: _finite()}
        )
    )


def stored_value(conn: sa.Connection, row: int) -> float | None:
    values = _tables().trial_values
    return conn.execute(sa.select(values.value).where(values.trial_id == row, values.objective == 0)).scalar()


def beat(conn: sa.Connection, row: int) -> None:
    """Record a heartbeat for the trial now (by the database clock)."""
    beats = _tables().trial_heartbeats
    now = sa.func.current_timestamp()
    if conn.execute(sa.update(beats.table).where(beats.trial_id == row).values({beats.heartbeat: now})).rowcount != 1:
        conn.execute(sa.insert(beats.table).values({beats.trial_id: row, beats.heartbeat: now}))


def first_beat(conn: sa.Connection, row: int) -> None:
    """Replace whatever heartbeat the trial had with one now (a fresh claim)."""
    beats = _tables().trial_heartbeats
    conn.execute(sa.delete(beats.table).where(beats.trial_id == row))
    conn.execute(sa.insert(beats.table).values({beats.trial_id: row, beats.heartbeat: sa.func.current_timestamp()}))


def running_beats(conn: sa.Connection, study: optuna.Study) -> tuple[dt.datetime, list[tuple[int, dt.datetime]]]:
    """The database clock's now, and (row, last heartbeat) of each RUNNING trial of the queue
    that has one (naive datetimes)."""
    trials, beats = _tables().trials, _tables().trial_heartbeats
    now = conn.execute(sa.select(sa.func.current_timestamp())).scalar()
    rows = conn.execute(
        sa.select(trials.trial_id, beats.heartbeat)
        .join(beats.table, beats.trial_id == trials.trial_id)
        .where(trials.study_id == study._study_id, trials.state == TrialState.RUNNING)
    ).all()
    if isinstance(now, str):  # some drivers hand back text
        now = dt.datetime.fromisoformat(now)
    return now.replace(tzinfo=None), [(row, beat) for row, beat in rows if beat is not None]
