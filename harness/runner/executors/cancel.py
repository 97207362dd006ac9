"""``harness cancel STUDY``: stop a study's scheduler jobs and leave its queue resumable.

It first marks the study's queues ``cancel_requested`` (a ``harness run`` still submitting jobs
stops submitting, cancels the jobs it owns and exits), then cancels every Slurm job that a waiting
or running trial records (``scancel``), and puts the running trials back to WAITING. Their
attempts were never recorded, so the next ``harness run`` runs them again; a job killed in the
middle of its commit loses its claim first (fencing), so nothing is recorded twice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from optuna.trial import TrialState

from harness import store as study_db
from harness.ground.urls import redact_url
from harness.runner import queue
from harness.runner.executors.base import Executor, JobHandle
from harness.runner.outcomes import existing_queues, study_from

#: seconds between the two cancelling passes (a job a runner submitted as the flag was set)
SECOND_PASS_S = 2.0


@dataclass
class CancelReport:
    study: str
    cancelled: dict[str, list[str]] = field(default_factory=dict)  # executor -> job ids
    released: list[str] = field(default_factory=list)  # trials put back to WAITING
    asked: int = 0  # Ray tasks left for their driver to cancel

    def lines(self) -> list[str]:
        out = [
            f"cancelled {len(ids)} {executor} job(s): {' '.join(ids)}"
            for executor, ids in self.cancelled.items()
            if ids
        ]
        if self.asked:
            out.append(f"asked the `harness run` that owns them to cancel {self.asked} Ray task(s)")
        if self.released:
            out.append(f"put {len(self.released)} running trial(s) back in the queue: {' '.join(self.released)}")
        if not out:
            out.append(f"{self.study}: no scheduler job was waiting or running")
        out.append("the queue is resumable: `harness run` on the study runs what is left")
        return out


def scheduled(queues: list) -> list[tuple[object, queue.Job, JobHandle]]:
    """The latest waiting or running attempts that record a scheduler job, with that job."""
    found = []
    for q in queues:
        for job in queue.latest(queue.jobs(q)).values():
            attr = job.attrs.get(study_db.EXECUTOR_JOB)
            if attr and job.state in (TrialState.WAITING, TrialState.RUNNING):
                found.append((q, job, JobHandle.from_attr(attr)))
    return found


def cancel_jobs(executor: Executor, queues: list, report: CancelReport) -> None:
    """Cancel this executor's jobs of these queues and put their running trials back."""
    mine = [(q, job, h) for q, job, h in scheduled(queues) if h.executor == executor.name]
    ids = executor.cancel([h for _, _, h in mine])
    report.cancelled.setdefault(executor.name, []).extend(i for i in ids if i not in report.cancelled[executor.name])
    for q, job, _ in mine:
        if job.state == TrialState.RUNNING and queue.release(q, job) and job.key not in report.released:
            report.released.append(job.key)


def cancel_study(study_ref: str | Path, storage: str | None = None) -> CancelReport:
    """``harness cancel``: see the module doc."""
    from harness.runner.executors.slurm import SlurmExecutor

    study, folder, _ = study_from(study_ref)
    url = storage or study_db.default_storage_url(folder)
    st = study_db.open_storage(url, create=False)
    queues = [q for _, q in existing_queues(study, st)]
    if not queues:
        raise study_db.StorageError(f"no study {study.name!r} in {redact_url(url)}; nothing to cancel")
    for q in queues:
        queue.set_queue_attr(q, queue.CANCEL_REQUESTED, True)
    report = CancelReport(study.name)
    for attempt in range(2):  # the second pass: a job submitted while the flag was being set
        if attempt:
            time.sleep(SECOND_PASS_S)
        executors = {h.executor for _, _, h in scheduled(queues)}
        if "slurm" in executors:
            cancel_jobs(SlurmExecutor(folder / "slurm"), queues, report)
        report.asked = sum(h.executor == "ray" for _, _, h in scheduled(queues))
    return report
