"""What a study's trials came to: per-trial outcomes, the run summary and ``harness status``.

Read from the Optuna storage (the latest attempt of each trial says where it stands; failed
attempts keep their reasons). Split from :mod:`harness.runner.run` so the runner keeps only the
running.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import store as study_db
from harness.errors import ConfigError
from harness.ground.exit_codes import EXIT_INTERRUPTED, EXIT_OK, EXIT_SOME_FAILED
from harness.ground.urls import redact_url
from harness.runner import queue
from harness.runner.executors.base import GONE
from harness.runner.looks import has_looks, look_lines
from harness.study.design import earlier_design_of, summary_lines
from harness.study.expand import study_dir
from harness.study.load import load_study
from harness.study.search_space import tuning_space_key

# --------------------------------------------------------------------------------------------
# summaries


@dataclass
class TrialOutcome:
    phase: str  # "compare" or "tune"
    key: str  # trial id, or "<arm> #<slot>" for tuning trials
    status: str  # completed / running / waiting / failed / not queued
    attempts: int = 0
    reasons: list[tuple[int, str]] = field(default_factory=list)  # (attempt, why) of failures
    worker: str | None = None
    spec: Any = None  # the queued trial spec (comparison trials)
    earlier: str | None = None  # why the current design does not use it, if it does not
    job: dict[str, str] | None = None  # the scheduler job of its latest attempt (executor, id, name, logs)
    job_state: str | None = None  # that job's state as the scheduler tells it (`harness status`)

    def job_line(self) -> str:
        """``; slurm job 123 RUNNING (logs: ...)`` for a trial a scheduler runs, else nothing. A
        job the scheduler no longer holds (cancelled, ended, lost) is said to be over, with what
        comes next, never shown as if it were the trial's live job."""
        if not self.job:
            return ""
        logs = f" (logs: {self.job['logs']})" if self.job.get("logs") else ""
        what = f"{self.job['executor']} job {self.job['id']}"
        if self.job_state == GONE:
            nxt = (
                "the next `harness run` submits a new one"
                if self.status == "waiting"
                else "the trial goes back to the queue once its heartbeat is stale"
            )
            return f"; its last {what} has ended (cancelled or lost): {nxt}{logs}"
        state = f" {self.job_state}" if self.job_state else ""
        return f"; {what}{state}{logs}"

    @property
    def reason(self) -> str | None:
        return self.reasons[-1][1] if self.reasons else None


@dataclass
class RunSummary:
    study: str
    study_dir: Path
    storage_url: str
    trials: list[TrialOutcome] = field(default_factory=list)
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)  # what is missing (the exit code is then 1)
    looks: list[str] = field(default_factory=list)  # a sequential study: where its looks stand

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return EXIT_INTERRUPTED
        if self.trials and all(t.status == "completed" for t in self.trials) and not self.notes:
            return EXIT_OK
        return EXIT_SOME_FAILED

    def format(self) -> str:
        lines = []
        for phase in ("tune", "compare"):
            trials = [t for t in self.trials if t.phase == phase]
            if not trials:
                continue
            what = "tuning trials" if phase == "tune" else "trials"
            counts = ", ".join(
                f"{n} {status}"
                for status in ("completed", "failed", "running", "waiting", "not queued")
                if (n := sum(t.status == status for t in trials))
            )
            lines.append(f"{self.study}: {len(trials)} {what}: {counts}")
            for t in trials:
                if t.status == "failed":
                    lines.append(f"  failed {t.key} (attempt {t.attempts}): {t.reason}")
        lines.extend(self.looks)
        lines.extend(self.notes)
        if self.interrupted:
            lines.append("interrupted: running trials went back to the queue; run the same command again to resume")
        elif self.exit_code == EXIT_SOME_FAILED and any(t.status == "failed" for t in self.trials):
            lines.append(f"run the same command again to retry the failed trials (logs: {self.study_dir / 'logs'})")
        lines.append(f"records: {self.study_dir / 'records'}")
        return "\n".join(lines)


def trial_outcomes(q, phase: str, keys: list[str] | None = None, label=None) -> list[TrialOutcome]:
    """Where each trial of queue ``q`` stands (its latest attempt), in the order of ``keys``
    (default: every trial the queue holds); ``label`` names a key in the summary."""

    groups = queue.attempts(queue.jobs(q))
    order = keys if keys is not None else sorted(groups)
    out = []
    for key in order:
        tries = groups.get(key)
        if not tries:
            out.append(TrialOutcome(phase, label(key) if label else key, "not queued"))
            continue
        last = tries[-1]
        reasons = [(j.attempt, str(j.reason)) for j in tries if j.status == "failed" and j.reason]
        out.append(
            TrialOutcome(
                phase,
                label(key) if label else key,
                last.status,
                attempts=last.attempt,
                reasons=reasons,
                worker=last.attrs.get(study_db.WORKER),
                spec=last.attrs.get(study_db.SPEC),
                job=last.attrs.get(study_db.EXECUTOR_JOB),
            )
        )
    return out


def queue_outcomes(q, phase: str) -> list[TrialOutcome]:
    """Every trial of one queue (tuning slots labelled ``<arm> #<slot>``)."""
    if phase == "tune":
        arm = q.study_name.rsplit(".tune.", 1)[-1].rsplit(".", 1)[0]  # <study>.tune.<arm>.<space>
        return trial_outcomes(q, phase, label=slot_label(arm))
    return trial_outcomes(q, phase)


def slot_label(arm: str):
    """How a tuning slot's key reads in a summary: ``slot0003`` of arm ``a`` -> ``a #3``."""
    return lambda key: f"{arm} #{int(key[4:])}" if key.startswith("slot") else f"{arm} {key}"


# --------------------------------------------------------------------------------------------
# worker (join from anywhere) and status


def existing_queues(study, storage) -> list[tuple[str, Any]]:
    """The study's queues that the storage holds, as (phase, queue): tuning ones first."""

    names = []
    if study.tuning is not None:
        names += [("tune", study_db.tune_study_name(study.name, a.name, tuning_space_key(study))) for a in study.arms]
    names.append(("compare", study_db.compare_study_name(study.name)))
    return [(phase, q) for phase, name in names if (q := queue.load_queue(storage, name)) is not None]


def study_from(ref: str | Path):
    """(study, its folder, its file) from a study file or a study folder holding ``study.yaml``."""

    ref = Path(ref)
    if ref.is_dir():
        if not (ref / "study.yaml").exists():
            raise ConfigError(f"{ref}: no study.yaml here; give the study file or its output folder")
        return load_study(ref / "study.yaml"), ref, (ref / "study.yaml").resolve()
    study = load_study(ref)
    return study, study_dir(study), ref.resolve()


@dataclass
class StatusReport:
    study: str
    study_dir: Path
    storage_url: str
    trials: list[TrialOutcome] = field(default_factory=list)
    started: bool = True
    looks: list[str] = field(default_factory=list)  # a sequential study: where its looks stand

    def format(self) -> str:
        lines = [f"study {self.study} ({self.study_dir}), storage {redact_url(self.storage_url)}"]
        if not self.started:
            lines.append("not started: no trials queued yet (run `harness run` on the study file)")
            return "\n".join(lines)
        for phase in ("tune", "compare"):
            trials = [t for t in self.trials if t.phase == phase and t.earlier is None]
            if not trials:
                continue
            counts = {s: sum(t.status == s for t in trials) for s in ("completed", "running", "waiting", "failed")}
            name = "tuning" if phase == "tune" else "comparison"
            lines.append(f"{name}: {len(trials)} trials: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
            for t in trials:
                if t.status == "running":
                    lines.append(f"  running  {t.key} (attempt {t.attempts}) on {t.worker or '?'}{t.job_line()}")
                elif t.status == "waiting" and t.job:
                    lines.append(f"  waiting  {t.key} (attempt {t.attempts}){t.job_line()}")
            for t in trials:
                if t.status == "failed":
                    lines.append(f"  failed   {t.key} (attempt {t.attempts}): {t.reason}")
                    for attempt, why in t.reasons[:-1]:
                        lines.append(f"           earlier attempt {attempt}: {why}")
                elif t.reasons:
                    lines.append(f"  {t.status:<8} {t.key} (attempt {t.attempts}), earlier failures:")
                    for attempt, why in t.reasons:
                        lines.append(f"           attempt {attempt}: {why}")
        lines += self.looks
        lines += summary_lines(t.earlier for t in self.trials if t.earlier is not None)
        return "\n".join(lines)


def study_status(study_ref: str | Path, storage: str | None = None) -> StatusReport:
    """``harness status``: every trial's state (latest attempt), failure reasons and attempts."""

    study, folder, study_file = study_from(study_ref)
    url = storage or study_db.default_storage_url(folder)
    report = StatusReport(study.name, folder, url)
    if storage is None and not (folder / "optuna.db").exists():
        report.started = False
        return report
    st = study_db.open_storage(url, create=False)
    found = existing_queues(study, st)
    if not found:
        report.started = False
        return report
    for phase, q in found:
        report.trials += queue_outcomes(q, phase)
    for t in report.trials:
        if t.phase == "compare" and t.spec is not None:
            t.earlier = earlier_design_of(study, t.spec, t.key.rsplit("-s", 1)[0])
    if has_looks(study):
        report.looks = look_lines(study, study_file, url)
    scheduler_states(report.trials)
    return report


def scheduler_states(trials: list[TrialOutcome]) -> None:
    """Ask Slurm (``squeue``) for the state of the jobs of waiting and running trials; a Ray
    task's state is its driver's to know (the runner prints it), so it stays unset."""
    from harness.runner.executors.slurm import slurm_states

    asked = [t for t in trials if t.job and t.job.get("executor") == "slurm" and t.status in ("waiting", "running")]
    if asked:
        states = slurm_states([t.job["id"] for t in asked])
        for t in asked:
            t.job_state = states.get(t.job["id"])
