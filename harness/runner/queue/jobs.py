"""The trial queue: an Optuna RDB storage used as a work queue shared by any number of workers.

One Optuna study per queue: ``<name>`` holds the comparison trials, ``<name>.tune.<arm>.<space>``
the tuning trials of one arm over one search space. A *job* is one Optuna trial; its ``user_attrs`` carry everything a
worker needs (the trial spec, the attempt number, the retry budget), so a worker on another
machine needs only the storage URL and the study file.

Identity is the trial id (``user_attrs["trial_id"]``; ``slot`` for tuning jobs), not the Optuna
trial: Optuna cannot move a finished trial back to WAITING, so a retry is a new Optuna trial with
the same key and ``attempt + 1``. The *latest* attempt of a key says where that trial stands.

Two departures from plain Optuna, both because several processes share one queue:

- **Atomic claim.** ``Study.ask`` pops a waiting trial with a read followed by a write
  (``SELECT ... FOR UPDATE``, which SQLite ignores), so two processes can both pop the same
  trial. :func:`claim` is one conditional ``UPDATE ... WHERE state = 'WAITING'``: atomic on
  SQLite and PostgreSQL alike; the process that changed the row owns the job. The same
  transaction writes the job's first heartbeat, so a claimed job is never without one.
- **Stale jobs.** Workers record Optuna heartbeats (``trial_heartbeats``) for their jobs; a
  RUNNING job whose heartbeat is older than the grace period belonged to a dead worker.
  :func:`fail_stale` fails it with a conditional update (exactly one process wins) and re-queues
  it, like ``optuna.storages.fail_stale_trials`` with a retry callback, but race-free.
- **Fenced claims.** A claim names its owner (the ``worker`` attribute, written in the claim's
  own transaction). Whatever a worker does with its job afterwards is conditional on still
  holding it: :func:`renew` (a heartbeat that also checks the claim) and :func:`commit` (the
  job's new state, its value or reason, and the copy of its record in the shared
  ``harness_records`` table, all in one transaction that first locks the job's row with an
  ``UPDATE ... WHERE state = 'RUNNING' AND worker = <owner>``). A job failed as stale in the
  meantime, or superseded by a newer attempt of its trial, gives a :class:`Revoked` instead, and
  the transaction changes nothing.
- **Exactly-once enqueue.** Every enqueue (:func:`enqueue_specs`, :func:`enqueue_missing`, the
  retries of :func:`requeue`, the tuning slots) decides what to add and adds it in
  one transaction that first locks the queue's study row (the lock Optuna itself takes to create
  a trial), so processes on any number of machines that find the same trials due at once (a
  sequential study's next look, :mod:`harness.runner.looks`; the failures two re-runs retry; a
  retry a worker queues while a re-run retries the same failure) queue them once, and one that
  dies midway leaves nothing half-queued.
- **Storage outages.** :func:`retry_storage` retries a call while the database is unreachable
  (SQLAlchemy ``OperationalError`` and the like, also when Optuna wraps them), with back-off, for
  a bounded time (``$HARNESS_STORAGE_RETRY_S``, default 60 s), then raises
  :class:`StorageUnavailable`: one line naming the storage, its password masked. The read-only
  queries here (:func:`jobs`, :func:`stale_jobs`, so :func:`has_work` and :func:`count`) and
  :func:`requeue` retry on their own; a worker wraps its other calls.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna
import sqlalchemy as sa
from optuna.storages import RDBStorage
from optuna.storages._rdb import models as _models
from optuna.trial import TrialState

from harness.runner.queue.outages import backend, retried
from harness.tracking.storage import (
    ARM,
    ATTEMPT,
    MAX_ATTEMPT,
    PHASE,
    REASON,
    SEED,
    SLOT,
    SPEC,
    STATE_NAMES,
    TRIAL_ID,
    TRIAL_IDS,
    WORKER,
)

optuna.logging.set_verbosity(optuna.logging.WARNING)


def create_queue(storage: RDBStorage, name: str, direction: str) -> optuna.Study:
    """Create (or load) the Optuna study ``name``; only the process that sets up a study does this."""
    return optuna.create_study(
        storage=storage, study_name=name, direction=direction, load_if_exists=True
    )


def load_queue(storage: RDBStorage, name: str, sampler: optuna.samplers.BaseSampler | None = None):
    """Load an existing Optuna study (None when the storage has no study of that name)."""
    try:
        return optuna.load_study(study_name=name, storage=storage, sampler=sampler)
    except KeyError:
        return None


# --------------------------------------------------------------------------------------------
# the queue's own attributes: what every machine working on it must know

#: the ``--retries`` of the run: the budget of jobs that any machine queues later (the looks)
RETRIES = "retries"
#: a tuned study: the comparison phase is decided (its trials queued, or none will be)
COMPARE_QUEUED = "compare_queued"


@retried("reading the queue")
def queue_attr(study: optuna.Study, key: str, default: Any = None) -> Any:
    return study.user_attrs.get(key, default)


@retried("writing the queue")
def set_queue_attr(study: optuna.Study, key: str, value: Any) -> None:
    study.set_user_attr(key, value)


# --------------------------------------------------------------------------------------------
# jobs


def slot_key(slot: int) -> str:
    """The key of a tuning slot's jobs."""
    return f"slot{int(slot):04d}"


def job_key(attrs: dict[str, Any], number: int) -> str:
    """A job's identity: its trial id, its tuning slot, or (neither) its Optuna number."""
    if TRIAL_ID in attrs:
        return str(attrs[TRIAL_ID])
    if SLOT in attrs:
        return slot_key(attrs[SLOT])
    return f"optuna{number}"


@dataclass
class Job:
    """One Optuna trial of a queue, as the runner sees it."""

    optuna_id: int
    number: int
    state: TrialState
    attrs: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)
    value: float | None = None
    started: _dt.datetime | None = None
    finished: _dt.datetime | None = None

    @classmethod
    def from_frozen(cls, trial: optuna.trial.FrozenTrial) -> Job:
        return cls(
            optuna_id=trial._trial_id,
            number=trial.number,
            state=trial.state,
            attrs=dict(trial.user_attrs),
            params=dict(trial.params),
            value=trial.value if trial.state == TrialState.COMPLETE else None,
            started=trial.datetime_start,
            finished=trial.datetime_complete,
        )

    @property
    def key(self) -> str:
        return job_key(self.attrs, self.number)

    @property
    def status(self) -> str:
        return STATE_NAMES.get(self.state, self.state.name.lower())

    @property
    def attempt(self) -> int:
        return int(self.attrs.get(ATTEMPT, 1))

    @property
    def max_attempt(self) -> int:
        return int(self.attrs.get(MAX_ATTEMPT, self.attempt))

    @property
    def reason(self) -> str | None:
        return self.attrs.get(REASON)

    @property
    def phase(self) -> str:
        return str(self.attrs.get(PHASE, "compare"))

    @property
    def wall_time_s(self) -> float | None:
        if self.started is None or self.finished is None:
            return None
        return (self.finished - self.started).total_seconds()


@retried("reading the queue")
def jobs(study: optuna.Study, states: Sequence[TrialState] | None = None) -> list[Job]:
    trials = study.get_trials(deepcopy=False, states=tuple(states) if states else None)
    return [Job.from_frozen(t) for t in trials]


def latest(all_jobs: Iterable[Job]) -> dict[str, Job]:
    """The latest attempt of each key (ties: the later Optuna trial)."""
    out: dict[str, Job] = {}
    for job in all_jobs:
        seen = out.get(job.key)
        if seen is None or (job.attempt, job.number) > (seen.attempt, seen.number):
            out[job.key] = job
    return out


def attempts(all_jobs: Iterable[Job]) -> dict[str, list[Job]]:
    """Every attempt of each key, oldest first."""
    out: dict[str, list[Job]] = {}
    for job in sorted(all_jobs, key=lambda j: (j.attempt, j.number)):
        out.setdefault(job.key, []).append(job)
    return out


# --------------------------------------------------------------------------------------------
# enqueue


@dataclass
class EnqueueReport:
    added: int = 0  # keys never queued before
    requeued: int = 0  # keys whose latest attempt had failed: queued again, with a fresh budget
    cancelled: int = 0  # waiting keys no longer part of the design

    @classmethod
    def of(cls, queued: list[dict[str, Any]]) -> EnqueueReport:
        """The report of the jobs queued (their user attributes): first attempts, and retries."""
        first = sum(attrs[ATTEMPT] == 1 for attrs in queued)
        return cls(added=first, requeued=len(queued) - first)

    def __str__(self) -> str:
        parts = [f"{self.added} new"]
        if self.requeued:
            parts.append(f"{self.requeued} failed re-queued")
        if self.cancelled:
            parts.append(f"{self.cancelled} no longer in the design")
        return ", ".join(parts)


def _spec_attrs(spec: Any, *, phase: str, attempt: int, retries: int) -> dict[str, Any]:
    """The user attributes of a comparison job: everything a worker anywhere needs to run it."""
    return {
        TRIAL_ID: spec.trial_id,
        ARM: spec.arm,
        SEED: getattr(spec, "seed", None),
        PHASE: phase,
        ATTEMPT: attempt,
        MAX_ATTEMPT: attempt + retries,
        SPEC: spec.model_dump(mode="json"),
    }


@dataclass(frozen=True)
class Held:
    """Where one key stands in the queue: its latest attempt and that attempt's state."""

    attempt: int
    state: TrialState


#: the user attributes that say which key a job is and which attempt (not its spec: the lock is held)
_IDENTITY = (TRIAL_ID, SLOT, ATTEMPT)

#: what to queue, decided under the queue's lock from what it holds: (user attrs, fixed params) per job
Due = Callable[[dict[str, Held]], list[tuple[dict[str, Any], dict[str, Any]]]]


def _enqueue_locked(study: optuna.Study, due: Due) -> list[dict[str, Any]]:
    """Queue what ``due`` asks for, given what the queue holds, exactly once across processes.

    One transaction: a no-op update of the queue's study row first takes the lock Optuna takes
    to create a trial (a row lock in PostgreSQL, the write lock in SQLite), so every other
    enqueue and Optuna trial creation on this queue waits; then it reads the latest attempt of
    every key the queue holds (in any state) and inserts a WAITING job, numbered as Optuna
    numbers trials, for each entry ``due`` returns. A second process that found the same jobs
    due waits for the lock, then finds them queued and adds nothing; a process that dies before
    the commit leaves nothing behind (the next one to look queues them). Returns the user
    attributes of the jobs added.
    """
    trials = _models.TrialModel.__table__
    studies = _models.StudyModel.__table__
    user = _models.TrialUserAttributeModel.__table__
    system = _models.TrialSystemAttributeModel.__table__
    sid = study._study_id
    with backend(study).engine.begin() as conn:
        conn.execute(sa.update(studies).where(studies.c.study_id == sid).values(study_name=studies.c.study_name))
        rows = conn.execute(
            sa.select(trials.c.trial_id, trials.c.number, trials.c.state, user.c.key, user.c.value_json)
            .join(user, sa.and_(user.c.trial_id == trials.c.trial_id, user.c.key.in_(_IDENTITY)), isouter=True)
            .where(trials.c.study_id == sid)
        ).all()
        found: dict[int, tuple[int, TrialState, dict[str, Any]]] = {}
        for trial_id, number, state, key, value in rows:
            attrs = found.setdefault(trial_id, (number, state, {}))[2]
            if key is not None:
                attrs[key] = json.loads(value)
        newest: dict[str, tuple[int, int, TrialState]] = {}
        for number, state, attrs in found.values():
            key, attempt = job_key(attrs, number), int(attrs.get(ATTEMPT, 1))
            if key not in newest or (attempt, number) > newest[key][:2]:
                newest[key] = (attempt, number, state)
        number = len(found)
        added = []
        for attrs, params in due({key: Held(a, state) for key, (a, _, state) in newest.items()}):
            row = conn.execute(sa.insert(trials).values(number=number, study_id=sid, state=TrialState.WAITING))
            number += 1
            trial_id = row.inserted_primary_key[0]
            conn.execute(sa.insert(user), [{"trial_id": trial_id, "key": k, "value_json": json.dumps(v)}
                                           for k, v in attrs.items()])
            conn.execute(sa.insert(system).values(trial_id=trial_id, key="fixed_params", value_json=json.dumps(params)))
            added.append(attrs)
    return added


def enqueue_specs(study: optuna.Study, specs: Sequence[Any], *, phase: str, retries: int,
                  add_new: bool = True) -> EnqueueReport:
    """Queue every spec whose trial is not queued, running or completed already (idempotent, and
    exactly once across processes: :func:`_enqueue_locked`).

    A trial whose latest attempt failed is queued again with a fresh retry budget: re-running a
    study retries its failures. Waiting jobs whose trial id is not in ``specs`` (the study file
    changed) are failed with a reason, so workers do not run trials that left the design.
    ``add_new=False`` leaves out the trials never queued (a sequential study queues those look by
    look, with :func:`enqueue_missing`): only the retries and the cancellations are done.
    """

    def due(held: dict[str, Held]):
        out = {}
        for spec in specs:
            job = held.get(spec.trial_id)
            if job is None and add_new:
                out[spec.trial_id] = _spec_attrs(spec, phase=phase, attempt=1, retries=retries)
            elif job is not None and job.state == TrialState.FAIL:
                out[spec.trial_id] = _spec_attrs(spec, phase=phase, attempt=job.attempt + 1, retries=retries)
        return [(attrs, {}) for attrs in out.values()]

    report = EnqueueReport.of(_enqueue_locked(study, due))
    wanted = {spec.trial_id for spec in specs}
    for key, job in latest(jobs(study)).items():
        if job.state == TrialState.WAITING and TRIAL_ID in job.attrs and key not in wanted:
            set_reason(study, job, "no longer in the study design")
            if transition(study, job, TrialState.WAITING, TrialState.FAIL):
                report.cancelled += 1
    return report


def enqueue_slots(study: optuna.Study, *, arm: str, n_trials: int, retries: int) -> EnqueueReport:
    """Queue the tuning budget of one arm: exactly ``n_trials`` slots, whatever ran before, and
    exactly once across processes (:func:`_enqueue_locked`).

    A slot whose latest attempt failed is queued again with its parameters fixed (a retry of the
    same configuration), with a fresh retry budget.
    """
    tried = latest(jobs(study))  # the failed attempts' parameters, read before the lock

    def due(held: dict[str, Held]):
        out = []
        for slot in range(n_trials):
            key = slot_key(slot)
            job = held.get(key)
            if job is None:
                attempt, params = 1, {}
            elif job.state == TrialState.FAIL and key in tried and tried[key].attempt == job.attempt:
                attempt, params = job.attempt + 1, tried[key].params
            else:
                continue
            out.append(({SLOT: slot, ARM: arm, PHASE: "tune", ATTEMPT: attempt, MAX_ATTEMPT: attempt + retries},
                        params))
        return out

    return EnqueueReport.of(_enqueue_locked(study, due))


@retried("queueing the next look")  # safe to repeat: what the queue holds is skipped
def enqueue_missing(study: optuna.Study, specs: Sequence[Any], *, phase: str, retries: int) -> list[str]:
    """Queue the specs whose trial id the queue has never held, exactly once across processes
    (:func:`_enqueue_locked`; a sequential study's looks). Returns the trial ids added."""

    def due(held: dict[str, Held]):
        fresh = {spec.trial_id: spec for spec in specs if spec.trial_id not in held}
        return [(_spec_attrs(spec, phase=phase, attempt=1, retries=retries), {}) for spec in fresh.values()]

    return [attrs[TRIAL_ID] for attrs in _enqueue_locked(study, due)]


@retried("queueing the next attempt", nested=True)  # after the FAIL: the retry must not get lost
def requeue(study: optuna.Study, job: Job, *, fresh_budget: bool = False) -> None:
    """Queue the next attempt of a failed job (same key, same spec, same tuning parameters),
    unless the queue holds a later attempt already (a re-run retried it first)."""
    attrs = {k: v for k, v in job.attrs.items() if k not in (REASON, WORKER, TRIAL_IDS)}
    attrs[ATTEMPT] = job.attempt + 1
    attrs[MAX_ATTEMPT] = job.max_attempt + 1 if fresh_budget else job.max_attempt
    _enqueue_locked(study, lambda held: [] if held[job.key].attempt > job.attempt else [(attrs, job.params)])


# --------------------------------------------------------------------------------------------
# atomic state changes


def _utcnow() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None)


def _put_attr(conn, trial_id: int, key: str, value: Any) -> None:
    """Set a user attribute inside the caller's transaction (Optuna's own encoding: JSON)."""
    attrs = _models.TrialUserAttributeModel.__table__
    conn.execute(sa.delete(attrs).where(attrs.c.trial_id == trial_id, attrs.c.key == key))
    conn.execute(sa.insert(attrs).values(trial_id=trial_id, key=key, value_json=json.dumps(value)))



def claim(study: optuna.Study, job: Job, owner: str | None = None) -> bool:
    """Atomically move ``job`` from WAITING to RUNNING and record its first heartbeat (and, with
    ``owner``, the ``worker`` attribute that fences the claim: see :func:`commit`).

    True when this process now owns the job; False when another process claimed it first.
    """
    trials = _models.TrialModel.__table__
    beats = _models.TrialHeartbeatModel.__table__
    with backend(study).engine.begin() as conn:
        changed = conn.execute(
            sa.update(trials)
            .where(trials.c.trial_id == job.optuna_id, trials.c.state == TrialState.WAITING)
            .values(state=TrialState.RUNNING, datetime_start=_utcnow())
        ).rowcount
        if changed != 1:
            return False
        conn.execute(sa.delete(beats).where(beats.c.trial_id == job.optuna_id))
        conn.execute(
            sa.insert(beats).values(trial_id=job.optuna_id, heartbeat=sa.func.current_timestamp())
        )
        if owner is not None:
            _put_attr(conn, job.optuna_id, WORKER, owner)
    if owner is not None:
        job.attrs[WORKER] = owner
    return True


def claim_next(study: optuna.Study, owner: str | None = None) -> Job | None:
    """Claim the oldest waiting job of the queue, or None when nothing is waiting."""
    for job in jobs(study, states=(TrialState.WAITING,)):
        if claim(study, job, owner):
            job.state = TrialState.RUNNING
            return job
    return None


def transition(study: optuna.Study, job: Job, from_state: TrialState, to_state: TrialState) -> bool:
    """Change the job's state only if it is still ``from_state`` (atomic; True if it changed)."""
    trials = _models.TrialModel.__table__
    values: dict[str, Any] = {"state": to_state}
    if to_state.is_finished():
        values["datetime_complete"] = _utcnow()
    if to_state == TrialState.WAITING:
        values["datetime_start"] = None
    with backend(study).engine.begin() as conn:
        changed = conn.execute(
            sa.update(trials)
            .where(trials.c.trial_id == job.optuna_id, trials.c.state == from_state)
            .values(**values)
        ).rowcount
    if changed == 1:
        job.state = to_state
    return changed == 1


def heartbeat(study: optuna.Study, job: Job) -> None:
    backend(study).record_heartbeat(job.optuna_id)


def set_attr(study: optuna.Study, job: Job, key: str, value: Any) -> bool:
    """Set a user attribute (False when the job was finished meanwhile: attrs are then frozen)."""
    try:
        study._storage.set_trial_user_attr(job.optuna_id, key, value)
    except optuna.exceptions.UpdateFinishedTrialError:
        return False
    job.attrs[key] = value
    return True


def set_reason(study: optuna.Study, job: Job, reason: str) -> bool:
    return set_attr(study, job, REASON, reason)


def complete(study: optuna.Study, job: Job, value: float) -> bool:
    """Tell Optuna the job completed with ``value`` (False if it was finished meanwhile)."""
    if not math.isfinite(value):
        raise ValueError(f"cannot complete a trial with a non-finite value {value!r}")
    try:
        study.tell(job.number, value)
    except (ValueError, RuntimeError, optuna.exceptions.UpdateFinishedTrialError):
        return False
    job.state, job.value = TrialState.COMPLETE, value
    return True


def fail(study: optuna.Study, job: Job, reason: str, *, retry: bool = True) -> bool:
    """Fail the job with ``reason``; re-queue it while its retry budget lasts.

    Returns True when a next attempt was queued.
    """
    set_reason(study, job, reason)
    if not transition(study, job, TrialState.RUNNING, TrialState.FAIL):
        return False  # someone else finished or failed it (e.g. as stale) and handled the retry
    if retry and job.attempt < job.max_attempt:
        requeue(study, job)
        return True
    return False


def release(study: optuna.Study, job: Job) -> bool:
    """Put a claimed job back to WAITING (an interrupted worker): the next worker resumes it."""
    return transition(study, job, TrialState.RUNNING, TrialState.WAITING)


# --------------------------------------------------------------------------------------------
# stale jobs


@retried("looking for stale jobs")
def stale_jobs(study: optuna.Study, grace_period_s: float) -> list[Job]:
    """RUNNING jobs whose last heartbeat is older than ``grace_period_s`` (by the database clock)."""
    trials = _models.TrialModel.__table__
    beats = _models.TrialHeartbeatModel.__table__
    with backend(study).engine.connect() as conn:
        now = conn.execute(sa.select(sa.func.current_timestamp())).scalar()
        rows = conn.execute(
            sa.select(trials.c.trial_id, beats.c.heartbeat)
            .join(beats, beats.c.trial_id == trials.c.trial_id)
            .where(trials.c.study_id == study._study_id, trials.c.state == TrialState.RUNNING)
        ).all()
    if isinstance(now, str):  # some drivers hand back text
        now = _dt.datetime.fromisoformat(now)
    now = now.replace(tzinfo=None)
    stale_ids = {tid for tid, beat in rows if beat is not None and (now - beat).total_seconds() > grace_period_s}
    if not stale_ids:
        return []
    return [j for j in jobs(study, states=(TrialState.RUNNING,)) if j.optuna_id in stale_ids]


def fail_stale(study: optuna.Study, grace_period_s: float) -> list[Job]:
    """Fail the jobs of dead workers and queue them again; returns the jobs this process handled.

    A lost worker is not the trial's fault, so the re-queued attempt keeps its retry budget.
    """
    handled = []
    for job in stale_jobs(study, grace_period_s):
        reason = f"worker lost: no heartbeat for more than {grace_period_s:g}s"
        # Attributes are frozen once a trial is finished: the reason goes first.
        if set_reason(study, job, reason) and transition(
            study, job, TrialState.RUNNING, TrialState.FAIL
        ):
            requeue(study, job, fresh_budget=True)
            handled.append(job)
    return handled


# --------------------------------------------------------------------------------------------
# counts


@dataclass
class Counts:
    completed: int = 0
    running: int = 0
    waiting: int = 0
    failed: int = 0
    durations: list[float] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.completed + self.running + self.waiting + self.failed

    def add(self, other: Counts) -> Counts:
        return Counts(
            self.completed + other.completed,
            self.running + other.running,
            self.waiting + other.waiting,
            self.failed + other.failed,
            self.durations + other.durations,
        )

    def as_tuple(self) -> tuple[int, int, int, int]:
        return (self.completed, self.running, self.waiting, self.failed)


def count(study: optuna.Study, keys: set[str] | None = None) -> Counts:
    """Trials by the state of their latest attempt (only ``keys`` when given)."""
    out = Counts()
    for key, job in latest(jobs(study)).items():
        if keys is not None and key not in keys:
            continue
        setattr(out, job.status, getattr(out, job.status) + 1)
        if job.state == TrialState.COMPLETE and job.wall_time_s is not None:
            out.durations.append(job.wall_time_s)
    return out


def has_work(study: optuna.Study) -> bool:
    """Whether any job is waiting or running (a running one may still fail and be retried)."""
    return bool(jobs(study, states=(TrialState.WAITING, TrialState.RUNNING)))
