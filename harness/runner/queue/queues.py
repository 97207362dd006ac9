"""A queue is one Optuna study of the study database: ``<name>`` holds the comparison trials,
``<name>.tune.<arm>.<space>`` the tuning trials of one arm over one search space. Opening one
first checks that the database and the installed Optuna are laid out as the queue's statements
expect (:func:`~harness.store.optuna_tables.check_layout`), so no trial runs on a queue
whose exactly-once guarantees a changed layout would break. The queue's own attributes tell
every machine working on it what it must know (their names: :mod:`harness.store.names`).
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.storages import RDBStorage

from harness.runner.queue.outages import retried
from harness.store.optuna_tables import check_layout

optuna.logging.set_verbosity(optuna.logging.WARNING)


def create_queue(storage: RDBStorage, name: str, direction: str) -> optuna.Study:
    """Create (or load) the Optuna study ``name``; only the process that sets up a study does this."""
    check_layout(storage)
    return optuna.create_study(storage=storage, study_name=name, direction=direction, load_if_exists=True)


def load_queue(storage: RDBStorage, name: str, sampler: optuna.samplers.BaseSampler | None = None):
    """Load an existing Optuna study (None when the storage has no study of that name)."""
    check_layout(storage)
    try:
        return optuna.load_study(study_name=name, storage=storage, sampler=sampler)
    except KeyError:
        return None


@retried("reading the queue")
def queue_attr(study: optuna.Study, key: str, default: Any = None) -> Any:
    return study.user_attrs.get(key, default)


@retried("writing the queue")
def set_queue_attr(study: optuna.Study, key: str, value: Any) -> None:
    study.set_user_attr(key, value)
