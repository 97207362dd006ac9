"""What a queue holds: its jobs (one Optuna trial each), by key and attempt, and their counts.

Identity is the trial id (``user_attrs["trial_id"]``; ``slot`` for tuning jobs), not the Optuna
trial: Optuna cannot move a finished trial back to WAITING, so a retry is a new Optuna trial with
the same key and ``attempt + 1``. The *latest* attempt of a key says where that trial stands.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import TrialState

from harness.runner.queue.outages import retried
from harness.store import (
    ATTEMPT,
    MAX_ATTEMPT,
    PHASE,
    REASON,
    SLOT,
    STATE_NAMES,
    TRIAL_ID,
)
from harness.store.optuna_tables import trial_row


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

    optuna_id: int  # its row in the study database (the queue's statements address it by this)
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
            optuna_id=trial_row(trial),
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
