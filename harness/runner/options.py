"""How a study is run: workers, storage, tracking, retries, time limits, heartbeats.

``harness run`` and ``harness worker`` fill one ``RunOptions`` from their flags; every part of
the runner reads it.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from typing import TextIO

from harness.errors import ConfigError
from harness.runner.child import DEFAULT_TRIAL_FN

HEARTBEAT_INTERVAL_S = 10
GRACE_PERIOD_S = 60
POLL_S = 1.0
PROGRESS_EVERY_S = 30.0
SHUTDOWN_TIMEOUT_S = 60.0


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
        if self.workers is not None and self.workers < 1:
            raise ConfigError(f"--workers: must be at least 1, got {self.workers}")
        if self.retries < 0:
            raise ConfigError(f"--retries: must be 0 or more, got {self.retries}")
        if self.trial_timeout is not None and not self.trial_timeout > 0:
            raise ConfigError(f"--trial-timeout: must be a positive number of seconds, got {self.trial_timeout}")
        if not self.heartbeat_interval > 0:
            raise ConfigError("--heartbeat-interval: must be positive")
        if not self.grace > self.heartbeat_interval:
            raise ConfigError("--grace-period: must be longer than the heartbeat interval")
        check_trial_fn(self.trial_fn)


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
