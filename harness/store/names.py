"""The names the harness gives to what it keeps in Optuna's own tables: the queues of a study
(one Optuna study each), the attributes of a queue, the attributes of a job (one Optuna trial),
and the words a job's state is shown by. Written here once: the runner writes them, the
results and the reports read them, on every machine and in every release that shares the
database (renaming one is a change of what is stored)."""

from __future__ import annotations

from optuna.trial import TrialState

# user_attrs of a job
TRIAL_ID = "trial_id"  # compare jobs: the TrialSpec's trial_id
SLOT = "slot"  # tune jobs: 0..n_trials-1 of the arm's budget
ARM = "arm"
SEED = "seed"
PHASE = "phase"  # "compare" or "tune"
SPEC = "spec"  # compare jobs: TrialSpec.model_dump(mode="json")
ATTEMPT = "attempt"  # 1, 2, ...
MAX_ATTEMPT = "max_attempt"  # a failure is re-queued while attempt < max_attempt
REASON = "reason"  # why the job failed (or was re-queued)
WORKER = "worker"  # who ran it: host/pid and device
TRIAL_IDS = "trial_ids"  # tune jobs: the trial ids of its per-seed runs
EXECUTOR_JOB = "executor_job"  # Slurm or Ray: the scheduler's job of the current attempt (id, name, logs)

# user_attrs of a queue
#: the ``--retries`` of the run: the budget of jobs that any machine queues later (the looks)
RETRIES = "retries"
#: a tuned study: the comparison phase is decided (its trials queued, or none will be)
COMPARE_QUEUED = "compare_queued"
#: ``harness cancel`` was run: the runner that submits this study's scheduler jobs stops submitting
#: and cancels its own (a Ray driver's tasks can be cancelled by it alone); ``harness run`` clears it
CANCEL_REQUESTED = "cancel_requested"

STATE_NAMES = {
    TrialState.COMPLETE: "completed",
    TrialState.RUNNING: "running",
    TrialState.WAITING: "waiting",
    TrialState.FAIL: "failed",
    TrialState.PRUNED: "failed",
}


def compare_study_name(study_name: str) -> str:
    return study_name


def tune_study_name(study_name: str, arm: str, space: str) -> str:
    """The tuning queue of one arm over one search space (``space``: its key): a changed space
    starts a new tuning phase instead of reusing trials drawn from the old one."""
    return f"{study_name}.tune.{arm}.{space}"
