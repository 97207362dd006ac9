"""What one trial asks its executor for: GPUs, CPU cores, memory, a time limit, and where a
scheduler should put it (``resources:`` in a study, study-wide and per arm).

The study-wide ``resources`` is every arm's default; an arm's own ``resources`` overrides it key by
key (:meth:`Resources.over`), ``extra`` merged the same way. The local executor reads ``gpus``
(each trial gets that many visible devices of its own); Slurm reads every key (``extra`` is passed
to ``sbatch`` as ``--KEY=VALUE``); Ray reads ``gpus``, ``cpus`` and ``memory``.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator

from harness.ground.strict import StrictModel

#: where trials can run (``harness run --executor``, ``executor:`` in a study)
EXECUTORS = ("local", "slurm", "ray")

_MEMORY = re.compile(r"(\d+)([KMGT]?)B?", re.IGNORECASE)
_UNIT = {"": 1024**2, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}  # Slurm: a bare number is MB
_TIME = re.compile(r"(?:(\d+)-)?(?:(\d+):)?(\d+)(?::(\d+))?")
_SLURM_NAME = re.compile(r"[a-z][a-z0-9-]*")


class Resources(StrictModel):
    """One trial's resources; a key left out is the study-wide value (or the executor's default)."""

    gpus: int | None = Field(None, ge=0, description="GPUs per trial (the local executor gives each its own set)")
    cpus: int | None = Field(None, ge=1, description="CPU cores per trial")
    memory: str | None = Field(None, description="memory per trial, Slurm style: 16G, 512M (a bare number is MB)")
    time: str | int | None = Field(
        None, description="a trial's time limit on a scheduler, Slurm style: MINUTES, H:MM:SS or D-HH:MM:SS"
    )
    partition: str | None = Field(None, description="Slurm partition")
    account: str | None = Field(None, description="Slurm account")
    qos: str | None = Field(None, description="Slurm quality of service")
    constraint: str | None = Field(None, description="Slurm node features the trial needs (--constraint)")
    extra: dict[str, str | int] = Field(
        default_factory=dict, description="any other sbatch option, as name: value (e.g. exclude: node3)"
    )

    @field_validator("memory")
    @classmethod
    def _memory(cls, v: str | None) -> str | None:
        if v is not None and not _MEMORY.fullmatch(v.strip()):
            raise ValueError(f"expected a size such as 16G or 512M, got {v!r}")
        return None if v is None else v.strip().upper().removesuffix("B")

    @field_validator("time")
    @classmethod
    def _time(cls, v: str | int | None) -> str | None:
        if v is not None and not _TIME.fullmatch(str(v).strip()):
            raise ValueError(f"expected MINUTES, H:MM:SS or D-HH:MM:SS, got {v!r}")
        return None if v is None else str(v).strip()

    @field_validator("extra")
    @classmethod
    def _extra(cls, v: dict[str, Any]) -> dict[str, Any]:
        for name in v:
            if not _SLURM_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not an sbatch option name (lower case, e.g. exclude, gres)")
        return v

    def over(self, base: Resources) -> Resources:
        """These resources on top of ``base``: every key given here wins, ``extra`` merged."""
        given = self.model_dump(exclude_none=True, exclude={"extra"})
        return base.model_copy(update={**given, "extra": {**base.extra, **self.extra}})

    @property
    def memory_bytes(self) -> int | None:
        if self.memory is None:
            return None
        number, unit = _MEMORY.fullmatch(self.memory).groups()
        return int(number) * _UNIT[unit.upper()]

    @property
    def time_minutes(self) -> int | None:
        """The time limit in whole minutes (rounded up), as submitit takes it."""
        if self.time is None:
            return None
        days, first, second, third = _TIME.fullmatch(self.time).groups()
        if first is None and third is None:  # MINUTES, or D-HH
            seconds = int(second) * 60 if days is None else int(second) * 3600
        elif third is None:  # MM:SS or D-HH:MM
            seconds = int(first) * 60 + int(second) if days is None else int(first) * 3600 + int(second) * 60
        else:  # H:MM:SS
            seconds = int(first) * 3600 + int(second) * 60 + int(third)
        seconds += int(days or 0) * 86400
        return max(1, -(-seconds // 60))

    def describe(self) -> str:
        """One line for ``harness plan``: ``2 GPUs, 8 CPUs, 64G, time limit 4:00:00 (240 min), partition gpu``."""
        parts = []
        if self.gpus is not None:
            parts.append(f"{self.gpus} GPU{'s' if self.gpus != 1 else ''}")
        if self.cpus is not None:
            parts.append(f"{self.cpus} CPU{'s' if self.cpus != 1 else ''}")
        if self.memory is not None:
            parts.append(self.memory)
        if self.time is not None:
            minutes = f"{self.time_minutes} min"
            parts.append(f"time limit {minutes}" if self.time.isdigit() else f"time limit {self.time} ({minutes})")
        parts += [f"{k} {v}" for k in ("partition", "account", "qos", "constraint") if (v := getattr(self, k))]
        parts += [f"--{k}={v}" for k, v in self.extra.items()]
        return ", ".join(parts) or "executor defaults"
