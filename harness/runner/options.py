"""How a study is run: workers, storage, tracking, retries, time limits, heartbeats.

:class:`RunOptions` is the one type of a run's options, from the command line to every worker
process. ``harness run`` and ``harness worker`` build it from their flags (a field is its flag:
``grace_period`` is ``--grace-period``), the runner reads it, and each worker process gets the
same model inside its :class:`~harness.runner.worker_config.WorkerConfig`. A field's checks are
its constraints: a value that fails one is a ``ConfigError`` of one line naming the flag, raised
when the options are built, before anything starts.

The storage and tracking URLs may carry passwords, so the type itself keeps them out of every
serialisation (``exclude=True``): a worker process is given them in its environment, under the
variable its field names (``worker_env``), and removes them from there before any trial starts.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TextIO, Union, get_args, get_origin

from pydantic import ConfigDict, Field, SkipValidation, ValidationError, ValidationInfo, field_validator
from pydantic.fields import FieldInfo

from harness.errors import ConfigError
from harness.ground import console
from harness.ground.dotted import check_findable
from harness.ground.strict import StrictModel
from harness.runner.child import DEFAULT_TRIAL_FN
from harness.runner.slots import usable_cores, visible_gpus
from harness.study.resources import EXECUTORS

GRACE_PERIOD_S = 60  # the least grace period by default (and at least 3 heartbeats)


@dataclass(frozen=True)
class Must:
    """What a knob's value must be, as its one-line error says it (``--workers: must be ...``)."""

    text: str


Seconds = Annotated[float, Field(gt=0), Must("a positive, finite number of seconds")]
SecondsOrZero = Annotated[float, Field(ge=0), Must("0 or a positive, finite number of seconds")]
AtLeastOne = Annotated[int, Field(ge=1), Must("at least 1")]
Count = Annotated[int, Field(ge=0), Must("0 or more")]

#: json_schema_extra of a field the command line sets (``harness run`` / ``harness worker``)
FLAG = {"flag": True}
_STORAGE_HELP = "Optuna storage URL (default: sqlite:///<study_dir>/optuna.db); PostgreSQL works for many machines"


def flag_of(name: str) -> str:
    """The command-line spelling of a field that has a flag: ``grace_period`` -> ``--grace-period``."""
    return f"--{name.replace('_', '-')}"


class RunOptions(StrictModel):
    """The options of one run, as ``harness run`` and ``harness worker`` take them and every
    worker process receives them."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)  # the stream: any text stream

    workers: AtLeastOne | None = Field(
        None, json_schema_extra=FLAG, description="CPU worker processes (default 1); with GPUs: one per GPU"
    )
    storage: str | None = Field(
        None,
        exclude=True,
        json_schema_extra={**FLAG, "env": "HARNESS_STORAGE", "worker_env": "HARNESS_WORKER_STORAGE"},
        description=_STORAGE_HELP,
    )
    tracking_uri: str | None = Field(
        None,
        exclude=True,
        json_schema_extra={**FLAG, "env": "HARNESS_TRACKING_URI", "worker_env": "HARNESS_WORKER_TRACKING"},
        description="MLflow tracking URI (default: sqlite:///<study_dir>/mlflow.db)",
    )
    tracking: bool = Field(
        True,
        json_schema_extra=FLAG,
        description="mirror every record to MLflow (--no-tracking skips it; `harness mirror-to-mlflow` replays it)",
    )
    retries: Count = Field(0, json_schema_extra=FLAG, description="re-queue a failed trial up to N times")
    trial_timeout: Seconds | None = Field(
        None, json_schema_extra=FLAG, description="fail a trial that runs longer than SECONDS"
    )
    trial_fn: str = Field(
        DEFAULT_TRIAL_FN,
        json_schema_extra=FLAG,
        description="the function a trial process calls with the trial's spec, as module:function "
        "(the engine's; tests name fake trials)",
    )
    heartbeat_interval: Seconds = Field(
        10.0, json_schema_extra=FLAG, description="seconds between the heartbeats of a running trial"
    )
    grace_period: Seconds | None = Field(
        None,
        validate_default=True,
        json_schema_extra=FLAG,
        description=f"seconds without a heartbeat before a running trial counts as lost and is queued again "
        f"(default: {GRACE_PERIOD_S}, and at least 3 heartbeats); longer than the heartbeat interval",
    )
    poll_interval: Seconds = Field(1.0, json_schema_extra=FLAG, description="seconds between polls of the queue")
    new_version: bool = Field(
        False,
        json_schema_extra=FLAG,
        description="a sequential study whose file changes the rule fixed at its first look: fix the edited rule "
        "as its next version, on seeds it has not run (the looks start over; earlier trials are kept, "
        "never pooled)",
    )
    kill_grace: SecondsOrZero = Field(
        10.0, json_schema_extra=FLAG, description="seconds a trial process is given to exit between SIGTERM and SIGKILL"
    )
    storage_retry: SecondsOrZero | None = Field(
        None,
        description="seconds a worker retries an unreachable storage before it stops "
        "(default: $HARNESS_STORAGE_RETRY_S, else 60)",
    )
    progress_every: Seconds = Field(30.0, description="seconds between progress lines while nothing changes")
    shutdown_timeout: Seconds = Field(
        60.0, description="seconds after a stop (Ctrl-C) before workers that have not exited are killed"
    )
    executor: Literal[EXECUTORS] | None = Field(  # type: ignore[valid-type]
        None,
        json_schema_extra=FLAG,
        description="where trials run: local (this machine's workers), slurm (one Slurm job per trial) or ray "
        "(one Ray task per trial); default: the study's `executor:`, else local",
    )
    address: str | None = Field(
        None,
        json_schema_extra={**FLAG, "env": "RAY_ADDRESS"},
        description="--executor ray: the Ray cluster's address (default: $RAY_ADDRESS, else the local cluster)",
    )
    gpus: list[str] | None = Field(None, description="the GPUs to run on (default: the visible ones)")
    min_free_mb: float | None = Field(
        None, description="free space (MB) the study folder needs (default: $HARNESS_MIN_FREE_MB, else 100)"
    )
    stream: SkipValidation[TextIO | None] = Field(
        None, exclude=True, description="where progress lines and notices go (default: stderr)"
    )

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as err:
            raise ConfigError(_one_line(type(self), err)) from None

    @field_validator("trial_fn")
    @classmethod
    def _trial_fn_findable(cls, path: str) -> str:
        """Its module can be found (only trial processes import it)."""
        check_findable(path, what=flag_of("trial_fn"))
        return path

    @field_validator("grace_period")
    @classmethod
    def _grace_after_beats(cls, grace: float | None, info: ValidationInfo) -> float | None:
        """The default grace period, and a given one longer than the heartbeat interval."""
        beat = info.data.get("heartbeat_interval")
        if beat is None:  # the heartbeat interval's own error is the one reported
            return grace
        if grace is None:
            return max(GRACE_PERIOD_S, 3 * beat)
        if not grace > beat:
            raise ValueError(f"{flag_of('grace_period')}: must be longer than the heartbeat interval")
        return grace

    # ---- secrets ----------------------------------------------------------------------------

    @classmethod
    def secrets(cls) -> dict[str, str]:
        """The fields never serialised, each with the variable a worker process reads it from."""
        return {
            name: extra["worker_env"]
            for name, field in cls.model_fields.items()
            if "worker_env" in (extra := _extra(field))
        }

    @classmethod
    def secret_env_vars(cls) -> tuple[str, ...]:
        """Every variable a URL may be read from (the command line's and the worker's): a worker
        removes them all from its environment, so no trial process sees a password."""
        return tuple(
            var
            for name in cls.secrets()
            for key in ("env", "worker_env")
            if (var := _extra(cls.model_fields[name]).get(key))
        )

    def secret_env(self) -> dict[str, str]:
        """The environment that gives a worker process its secret fields."""
        return {var: value for name, var in self.secrets().items() if (value := getattr(self, name)) is not None}

    @classmethod
    def from_worker_json(cls, data: Mapping[str, Any], env: Mapping[str, str]) -> RunOptions:
        """The options a worker was given: the serialised fields and, from ``env``, the secret ones."""
        return cls(**{**data, **{name: env.get(var) for name, var in cls.secrets().items()}})

    # ---- output -----------------------------------------------------------------------------

    def out(self) -> TextIO:
        return self.stream or sys.stderr

    def warn_over_capacity(self) -> None:
        """One warning line when ``--workers`` is more than this machine has; the run goes on."""
        warning = self.capacity_warning()
        if warning:
            console.warn(warning, stream=self.out())

    def capacity_warning(self, *, cores: int | None = None) -> str | None:
        """Why ``--workers`` is more than this machine has (its GPUs, else its CPU cores), or None."""
        if self.workers is None:
            return None
        gpus = visible_gpus() if self.gpus is None else self.gpus
        cores = usable_cores() if cores is None else cores
        over, effect = [], []
        if gpus and self.workers > len(gpus):
            over.append(f"the {len(gpus)} GPU{'s' if len(gpus) != 1 else ''}")
            effect.append("several workers share each GPU")
        if self.workers > cores:
            over.append(f"the {cores} CPU core{'s' if cores != 1 else ''}")
            effect.append("the workers share the cores")
        if not over:
            return None
        return (
            f"--workers {self.workers} exceeds {' and '.join(over)} this machine has; "
            f"{' and '.join(effect)}, so each trial runs slower (going on)"
        )


def _extra(field: FieldInfo) -> dict[str, Any]:
    """A field's declared extras: ``flag`` (the command line sets it), ``env`` (the variable the
    command line reads it from), ``worker_env`` (a secret: the variable a worker reads it from)."""
    return field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}


def _must(field: FieldInfo) -> str | None:
    """The :class:`Must` of a field's type (``Seconds``, ``Seconds | None``), if it has one."""
    kinds = [field.annotation]
    if get_origin(field.annotation) in (Union, types.UnionType):
        kinds = list(get_args(field.annotation))
    for item in [*field.metadata, *(m for kind in kinds for m in getattr(kind, "__metadata__", ()))]:
        if isinstance(item, Must):
            return item.text
    return None


def _one_line(model: type[RunOptions], err: ValidationError) -> str:
    """The first problem as one line naming the knob (its flag, when it has one)."""
    first = err.errors(include_url=False)[0]
    if first["type"] == "value_error":  # a validator's own line
        return str(first["ctx"]["error"])
    name = str(first["loc"][0]) if first["loc"] else ""
    field = model.model_fields.get(name)
    if field is None:
        return f"{name}: not a run option"
    knob = flag_of(name) if _extra(field).get("flag") else name
    must = _must(field)
    if must is None:
        return f"{knob}: {first['msg'][:1].lower()}{first['msg'][1:]}, got {first['input']!r}"
    return f"{knob}: must be {must}, got {first['input']!r}"
