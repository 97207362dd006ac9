"""What a worker process is told (``WorkerConfig``: the run's options and its own place in the
run, passed as a JSON file without secrets) and what it reports back (``WorkerStats``)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import ConfigDict, Field

from harness.ground.strict import StrictModel
from harness.runner.options import RunOptions


class WorkerConfig(StrictModel):
    """One worker process's part of a run, around the run's own :class:`RunOptions`.

    Its JSON never holds the URLs (the options' type excludes them): :meth:`secret_env` is the
    environment that carries them to the worker, and :meth:`from_json` reads them back there."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="the worker's name, in its lines (`[worker NAME]`)")
    device: str = Field("cpu", description="where its trials run: `cuda:N`, or `cpu` (a share of the cores)")
    study_file: str = Field(description="the study snapshot (or file) the worker loads")
    study_dir: str = Field(description="the study folder: records, logs, the trial processes' files")
    queues: list[str] = Field(description="the Optuna studies it takes jobs from, in this order")
    watch_parent: bool = Field(False, description="stop when the process that started this worker dies")
    hold_file: str | None = Field(None, description="while this file exists, an idle worker waits for more jobs")
    run: RunOptions = Field(description="the run's options, as `harness run` or `harness worker` was given them")

    def to_json(self) -> str:
        return self.model_dump_json()

    def secret_env(self) -> dict[str, str]:
        return self.run.secret_env()

    @classmethod
    def from_json(cls, text: str, env: Mapping[str, str] | None = None) -> WorkerConfig:
        data = json.loads(text)
        run = RunOptions.from_worker_json(data.pop("run"), os.environ if env is None else env)
        return cls(**data, run=run)


@dataclass
class WorkerStats:
    completed: int = 0
    failed: int = 0
    skipped: int = 0  # completed records found: told Optuna without running
    released: int = 0  # interrupted jobs put back to WAITING
    requeued_stale: int = 0
    superseded: int = 0  # lost workers' trials whose configuration left the design: failed, not re-queued
    discarded: int = 0  # results of revoked claims, thrown away
    mirrored_late: int = 0  # local records MLflow lacked, mirrored when the worker started
    stopped: str | None = None  # why the worker gave up (storage unreachable, records unwritable)
