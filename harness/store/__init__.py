"""The study database: one SQL database per study (an Optuna RDB storage; SQLite by default,
PostgreSQL on many machines) that holds the study's trial queues in Optuna's tables and the
harness's own tables next to them. This package owns everything in it:

- opening it (:mod:`.database`) and what its errors say (:mod:`.errors`);
- the harness's own tables and their layout version, checked at open and migrated in place from
  an earlier release's (:mod:`.schema`): the copies of the trial records (:mod:`.records`) and
  the sequential studies' fixed rules (:mod:`.rules`);
- the names the harness writes in Optuna's tables: queue names and the attributes of a queue and
  of a job (:mod:`.names`);
- every statement on Optuna's own tables, with the layout they expect (:mod:`.optuna_tables`).

What the rows mean is other packages' business: the queue's protocol is the runner's
(:mod:`harness.runner.queue`), a trial record is :mod:`harness.tracking.records`'s. This package
imports no other part of the harness but the ground floor.

Its namespace is the opening API and the names (``from harness import store as study_db``;
``study_db.open_storage(url)``, ``study_db.WORKER``); the tables are used as modules
(``from harness.store import records``).
"""

from harness.store.database import default_storage_url, is_sqlite, open_storage
from harness.store.errors import StorageError, StorageUnreadable, disk_full, error_line
from harness.store.names import (
    ARM,
    ATTEMPT,
    CANCEL_REQUESTED,
    COMPARE_QUEUED,
    EXECUTOR_JOB,
    MAX_ATTEMPT,
    PHASE,
    REASON,
    RETRIES,
    SEED,
    SLOT,
    SPEC,
    STATE_NAMES,
    TRIAL_ID,
    TRIAL_IDS,
    WORKER,
    compare_study_name,
    tune_study_name,
)

__all__ = [
    "ARM",
    "ATTEMPT",
    "CANCEL_REQUESTED",
    "COMPARE_QUEUED",
    "EXECUTOR_JOB",
    "MAX_ATTEMPT",
    "PHASE",
    "REASON",
    "RETRIES",
    "SEED",
    "SLOT",
    "SPEC",
    "STATE_NAMES",
    "TRIAL_ID",
    "TRIAL_IDS",
    "WORKER",
    "StorageError",
    "StorageUnreadable",
    "compare_study_name",
    "default_storage_url",
    "disk_full",
    "error_line",
    "is_sqlite",
    "open_storage",
    "tune_study_name",
]
