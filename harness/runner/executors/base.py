"""What every scheduler executor offers the runner: submit one trial's job, read the jobs' states,
cancel them, and check that a trial's resources fit the cluster at all.

A job's body is always ``python -m harness.runner.one_trial CONFIG.json KEY`` (an argument
list); the storage URL, which may carry a password, goes in ``JobRequest.secret_env``, which an
executor puts in the job's environment only (never its argv, script, pickled files or logs).
"""

from __future__ import annotations

import contextlib
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from harness.study.resources import Resources

#: a job's state once the scheduler no longer holds it
GONE = "GONE"


@dataclass(frozen=True)
class JobRequest:
    """One trial's job: its name (``study/arm/seedN``), its command, its resources."""

    name: str
    argv: list[str]
    resources: Resources
    secret_env: Mapping[str, str] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class JobHandle:
    """A submitted job, as the trial's ``executor_job`` attribute records it."""

    executor: str
    id: str
    name: str
    logs: tuple[str, ...] = ()

    def as_attr(self) -> dict[str, str]:
        return {"executor": self.executor, "id": self.id, "name": self.name, "logs": " ".join(self.logs)}

    @classmethod
    def from_attr(cls, attr: Mapping[str, str]) -> JobHandle:
        logs = tuple(part for part in str(attr.get("logs", "")).split(" ") if part)
        return cls(str(attr["executor"]), str(attr["id"]), str(attr.get("name", "")), logs)


class Executor(ABC):
    """A scheduler that runs one job per trial."""

    name: str

    @abstractmethod
    def check(self, needs: Mapping[str, Resources]) -> None:
        """Raise ``ConfigError`` (one line) when an arm's trial can never fit on one node."""

    @abstractmethod
    def submit(self, request: JobRequest) -> JobHandle: ...

    @abstractmethod
    def states(self, handles: list[JobHandle]) -> dict[str, str]:
        """The scheduler's state of each job by id (``GONE`` once it is no longer held)."""

    @abstractmethod
    def cancel(self, handles: list[JobHandle]) -> list[str]:
        """Cancel these jobs; the ids it cancelled."""

    def close(self) -> None:  # noqa: B027 - only a Ray driver holds a connection
        """Let go of the scheduler (the Ray driver disconnects)."""


def too_many_gpus(needs: Mapping[str, Resources], most: int, where: str) -> str | None:
    """The one-line error for the first arm whose trials ask for more GPUs than ``most``."""
    for arm, resources in needs.items():
        if (resources.gpus or 0) > most:
            return (
                f"arm {arm}: resources.gpus is {resources.gpus} per trial, but {where} has at most {most}; "
                "lower it or run where such nodes exist"
            )
    return None


@contextlib.contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` in this process's environment for the block (what a submitted job inherits)."""
    saved = {var: os.environ.get(var) for var in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for var, old in saved.items():
            if old is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = old
