"""How a study is run: workers, storage, tracking, retries, time limits, heartbeats.

``harness run`` and ``harness worker`` fill one ``RunOptions`` from their flags; every part of
the runner reads it.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from dataclasses import dataclass
from typing import TextIO

from harness.errors import ConfigError
from harness.runner.child import DEFAULT_TRIAL_FN
from harness.runner.slots import usable_cores, visible_gpus

HEARTBEAT_INTERVAL_S = 10
GRACE_PERIOD_S = 60
POLL_S = 1.0
PROGRESS_EVERY_S = 30.0
SHUTDOWN_TIMEOUT_S = 60.0
_POSITIVE = "a positive, finite number of seconds"
_NON_NEGATIVE = "0 or a positive, finite number of seconds"


@dataclass
class RunOptions:
    workers: int | None = None  # CPU workers (default 1); with GPUs: default one per GPU
    storage: str | None = None  # Optuna storage URL; default sqlite in the study folder
    tracking_uri: str | None = None  # MLflow; default sqlite in the study folder
    tracking: bool = True  # mirror records to MLflow
    retries: int = 0
    trial_timeout: float | None = None
    trial_fn: str = DEFAULT_TRIAL_FN
    heartbeat_interval: float = HEARTBEAT_INTERVAL_S
    grace_period: float | None = None  # default: max(GRACE_PERIOD_S, 3 x heartbeat_interval)
    poll_interval: float = POLL_S
    kill_grace: float = 10.0  # SIGTERM -> SIGKILL for a trial process
    progress_every: float = PROGRESS_EVERY_S
    shutdown_timeout: float = SHUTDOWN_TIMEOUT_S
    gpus: list[str] | None = None  # None: detect
    stream: TextIO | None = None  # progress and notices (default stderr)
    min_free_mb: float | None = None  # free space the study folder needs (default: outdir's)

    @property
    def grace(self) -> float:
        if self.grace_period is not None:
            return self.grace_period
        return max(GRACE_PERIOD_S, 3 * self.heartbeat_interval)

    def out(self) -> TextIO:
        return self.stream or sys.stderr

    def check(self) -> None:
        """Refuse options that make no sense (``ConfigError``, one line, before anything starts);
        warn, on one line, about ``--workers`` beyond what this machine has, and go on."""
        if self.workers is not None and self.workers < 1:
            raise ConfigError(f"--workers: must be at least 1, got {self.workers}")
        if self.retries < 0:
            raise ConfigError(f"--retries: must be 0 or more, got {self.retries}")
        if self.trial_timeout is not None:
            _seconds("--trial-timeout", self.trial_timeout, _POSITIVE)
        _seconds("--heartbeat-interval", self.heartbeat_interval, _POSITIVE)
        if self.grace_period is not None:
            _seconds("--grace-period", self.grace_period, _POSITIVE)
        if not self.grace > self.heartbeat_interval:
            raise ConfigError("--grace-period: must be longer than the heartbeat interval")
        _seconds("--poll-interval", self.poll_interval, _POSITIVE)
        _seconds("--kill-grace", self.kill_grace, _NON_NEGATIVE, allow_zero=True)
        _seconds("progress_every", self.progress_every, _POSITIVE)
        _seconds("shutdown_timeout", self.shutdown_timeout, _POSITIVE)
        check_trial_fn(self.trial_fn)
        warning = self.capacity_warning()
        if warning:
            print(f"[harness] warning: {warning}", file=self.out(), flush=True)

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


def _seconds(flag: str, value: float, what: str, *, allow_zero: bool = False) -> None:
    """A finite number of seconds, positive (or 0 with ``allow_zero``); NaN and inf are refused."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{flag}: must be {what}, got {value!r}") from None
    if not math.isfinite(number) or number < 0 or (number == 0 and not allow_zero):
        raise ConfigError(f"{flag}: must be {what}, got {value!r}")


def check_trial_fn(path: str) -> None:
    """``module:function`` whose module can be found (it is imported only by trial processes)."""
    module, sep, attr = path.partition(":")
    if not sep or not module or not attr.isidentifier():
        raise ConfigError(f"--trial-fn: expected 'module:function', got {path!r}")
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise ConfigError(f"--trial-fn: no module named {module!r}")
