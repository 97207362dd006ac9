"""The trial queue: the study database (an Optuna RDB storage) used as a work queue shared by any
number of workers on any number of machines.

A *job* is one Optuna trial; its ``user_attrs`` carry everything a worker needs (the trial spec,
the attempt number, the retry budget), so a worker on another machine needs only the storage URL
and the study file. Departures from plain Optuna, all because several processes share one queue:

- **Atomic claim** (:mod:`.claims`): one conditional update, so two processes never both own a job.
- **Fenced claims** (:mod:`.fencing`): whatever a worker does with its job afterwards (a
  heartbeat, its result) is conditional on still holding it, in the same transaction.
- **Exactly-once enqueue** (:mod:`.enqueue`): what to add is decided and added under the
  queue's lock, so machines that find the same trials due at once queue them once.
- **Retries and stale jobs** (:mod:`.retries`): a failure gets its next attempt while its budget
  lasts; a job whose heartbeats stopped belonged to a dead worker and is queued again, once.
- **Storage outages** (:mod:`.outages`): a database that stops answering is retried with back-off
  for a bounded time, then reported in one line.

Every statement on Optuna's own tables, and every private Optuna attribute relied on, is in one
adapter, :mod:`harness.store.optuna_tables`, which declares the layout it expects; opening a
queue (:mod:`.queues`) checks that layout against the installed Optuna and the database first.
The names of a queue's and a job's attributes are :mod:`harness.store.names`.

This package's namespace is the queue's API (``from harness.runner import queue``;
``queue.claim_next(...)``); :mod:`.fencing`, :mod:`.heartbeat` and :mod:`.outages` are used as
modules.
"""

from harness.runner.queue.claims import claim, claim_next, complete, release, set_attr, set_reason, transition
from harness.runner.queue.enqueue import EnqueueReport, enqueue_missing, enqueue_slots, enqueue_specs
from harness.runner.queue.jobs import Counts, Job, attempts, count, has_work, jobs, latest, slot_key
from harness.runner.queue.queues import create_queue, load_queue, queue_attr, set_queue_attr
from harness.runner.queue.retries import SUPERSEDED, StaleJob, fail, fail_stale, requeue, stale_jobs
from harness.store.names import CANCEL_REQUESTED, COMPARE_QUEUED, RETRIES

__all__ = [
    "CANCEL_REQUESTED",
    "COMPARE_QUEUED",
    "RETRIES",
    "Counts",
    "EnqueueReport",
    "Job",
    "attempts",
    "claim",
    "claim_next",
    "complete",
    "SUPERSEDED",
    "StaleJob",
    "count",
    "create_queue",
    "enqueue_missing",
    "enqueue_slots",
    "enqueue_specs",
    "fail",
    "fail_stale",
    "has_work",
    "jobs",
    "latest",
    "load_queue",
    "queue_attr",
    "release",
    "requeue",
    "set_attr",
    "set_queue_attr",
    "set_reason",
    "slot_key",
    "stale_jobs",
    "transition",
]
