"""What a worker process is told: its study, storage, slot and timings (``WorkerConfig``, passed
as JSON without secrets), and what it reports back (``WorkerStats``)."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass

from harness.runner.child import DEFAULT_TRIAL_FN


@dataclass
class WorkerConfig:
    name: str
    study_file: str  # the study snapshot (or file) to load
    study_dir: str
    storage_url: str | None
    queues: list[str]  # Optuna study names, worked through in this order
    trial_fn: str = DEFAULT_TRIAL_FN
    tracking_uri: str | None = None
    tracking: bool = True
    trial_timeout: float | None = None
    device: str = "cpu"
    heartbeat_interval: float = 10.0
    grace_period: float = 60.0
    poll_interval: float = 1.0
    kill_grace: float = 10.0
    watch_parent: bool = False  # stop when the process that started this worker dies
    hold_file: str | None = None  # while this file exists, an idle worker waits for more jobs
    storage_retry: float | None = None  # seconds a storage outage is retried (None: $HARNESS_STORAGE_RETRY_S or 60)

    # URLs may carry credentials: they travel in the environment, never in the config file
    _SECRETS = {"storage_url": "HARNESS_WORKER_STORAGE", "tracking_uri": "HARNESS_WORKER_TRACKING"}

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        for key in self._SECRETS:
            data.pop(key)
        return json.dumps(data)

    def secret_env(self) -> dict[str, str]:
        return {var: getattr(self, key) for key, var in self._SECRETS.items() if getattr(self, key) is not None}

    @classmethod
    def from_json(cls, text: str, env: dict[str, str] | None = None) -> WorkerConfig:
        env = os.environ if env is None else env
        data = json.loads(text)
        for key, var in cls._SECRETS.items():
            data[key] = env.get(var)
        return cls(**data)


@dataclass
class WorkerStats:
    completed: int = 0
    failed: int = 0
    skipped: int = 0  # completed records found: told Optuna without running
    released: int = 0  # interrupted jobs put back to WAITING
    requeued_stale: int = 0
    discarded: int = 0  # results of revoked claims, thrown away
    mirrored_late: int = 0  # local records MLflow lacked, mirrored when the worker started
    stopped: str | None = None  # why the worker gave up (storage unreachable, records unwritable)
