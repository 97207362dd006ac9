"""A NaN loss, an exception and a trial past --trial-timeout: each fails with its reason, the
others complete, and the report lists the failures."""

from __future__ import annotations

import pytest
from faults_helpers import NO_DEATHS_GRACE_S, Machine, calls, fast, queue_jobs, trial_ids, write_study
from optuna.trial import TrialState
from slowness import slowness

from harness.runner import queue
from harness.tracking.records import read_records

HANG_S = 600  # how long a ``hang*`` fake trial sleeps (fake_trials)


def reasons(timeout_s: int) -> dict[str, str]:
    return {
        "nanloss": "NonFiniteError: loss is nan at step 3",  # what the trainer raises on a NaN loss
        "raise": "RuntimeError: boom in raise-s",
        "hang": f"timeout: exceeded --trial-timeout {timeout_s}s",
    }


def _failed_section(summary: str) -> list[str]:
    """The rows of the '## Failed trials' table of summary.md."""
    lines = summary.splitlines()
    start = lines.index("## Failed trials")
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if line.startswith("|") and not set(line) <= set("|-: "):
            rows.append(line)
    return rows[1:]  # without the header


@pytest.mark.slow
def test_nan_raise_and_timeout_fail_with_reasons_others_complete_report_lists_them(tmp_path, fault_env, pg_url):
    a = Machine(tmp_path, "machine_a")
    study = write_study(a.dir, "faulty", ["ok", "nanloss", "raise", "hang"], seeds=2)
    ids = trial_ids(study)
    # a loaded 2-core machine can take 2 s to start a healthy trial process (on an idle machine;
    # stretched by the measured slowness, so no healthy trial meets the limit on a busy one)
    timeout_s = round(5 * slowness())
    reason = reasons(timeout_s)
    code, out, err = a.run(
        "run",
        study.name,
        "--storage",
        pg_url,
        "--workers",
        "2",
        "--trial-timeout",
        str(timeout_s),
        "--kill-grace",
        "1",
        *fast(NO_DEATHS_GRACE_S * slowness()),  # no worker dies here: a late heartbeat is not a lost trial
        label="run",
    )
    assert code == 1, out + err  # some failed
    # mirrored to the study's own MLflow store (sqlite): MLflow's INFO lines stay out of the output
    assert (a.study_dir("faulty") / "mlflow.db").is_file()
    assert "INFO mlflow" not in err and "Creating initial MLflow database tables" not in err, err

    by_id = {r.trial_id: r for r in read_records(a.study_dir("faulty"))}
    assert sorted(by_id) == sorted(ids)  # every trial has its record, failed or not
    latest = queue.latest(queue_jobs(pg_url, "faulty"))
    for tid in ids:
        arm = tid.split("-")[0]
        record, job = by_id[tid], latest[tid]
        assert len(calls(fault_env, tid)) == 1, tid  # ran once (no retries asked)
        if arm == "ok":
            assert record.status == "completed" and job.state == TrialState.COMPLETE
            assert job.value == record.final["eval/accuracy"]
            continue
        assert record.status == "failed" and job.state == TrialState.FAIL, tid
        assert record.error.startswith(reason[arm]), record.error
        assert job.reason == record.error
        assert f"failed {tid} (attempt 1): {record.error}" in out
    assert "faulty: 8 trials: 2 completed, 6 failed" in out
    hang_wall = [by_id[t].wall_time_s for t in ids if t.startswith("hang-")]
    assert all(timeout_s <= w < HANG_S for w in hang_wall), hang_wall  # stopped at the limit, not at its end

    code, out, err = a.run("report", "runs/faulty", "--out", "report", "--storage", pg_url, label="report")
    assert code == 0, out + err
    summary = (a.dir / "report" / "summary.md").read_text()
    assert "- **Trials:** 2 completed, 6 failed, 0 running/waiting, 8 in all" in summary
    rows = _failed_section(summary)
    assert len(rows) == 6
    for tid in ids:
        arm = tid.split("-")[0]
        if arm == "ok":
            assert not any(tid in row for row in rows)
        else:
            row = next(row for row in rows if tid in row)
            assert reason[arm] in row and f"| {arm} |" in row, row
