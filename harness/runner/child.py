"""One trial in its own process.

The worker starts a process for every trial, so a crash, an out-of-memory kill, a NaN or a hang
ends that process only. Two ways to start it, same behaviour:

- ``fork`` (default on Linux/macOS): :func:`child_main` in a process forked from the worker's
  multiprocessing *forkserver*, which has ``harness.engine.spec`` and torch imported already (never
  CUDA: the server only imports), so a trial does not pay seconds of imports;
- ``exec``: ``python -m harness.runner.child --spec S --result R --trial-fn M:F`` (a fresh
  interpreter; set ``HARNESS_TRIAL_START=exec``).

Either way the child is the leader of its own process group (the worker kills the whole group).
It loads the spec, names the trial's own folder in ``$HARNESS_TRIAL_DIR`` (``<stem>`` beside its
spec file: where a program trainer's files go), calls the trial function and writes a small JSON result file:
``{"ok": true, "result": TrialResult}``, or ``{"ok": false, "error": {"type", "message"}}`` (an
:class:`~harness.errors.ErrorRecord`, whose ``line()`` is the trial's failure reason); the worker
turns that into the trial record and tells Optuna. stdout/stderr go to the trial's log file.

It imports nothing heavy of its own (no Optuna, no MLflow): the trial function brings what it
needs. If the worker dies, the trial ends too (it watches the worker's pid).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

from harness.engine.spec import TrialResult, TrialSpec
from harness.errors import ErrorRecord
from harness.ground.dotted import resolve
from harness.ground.files import atomic_write
from harness.ground.processes import end_descendants, process_gone
from harness.trainers.trial_dir import CHECKPOINTS_ENV, TRIAL_DIR_ENV

THREADS_ENV = "HARNESS_TRIAL_THREADS"
DEFAULT_TRIAL_FN = "harness.trainers.dispatch:run_trial"
SPEC_SUFFIX = ".spec.json"
#: beside the spec files (the study's work folder): the trials' pause checkpoints, one folder per trial
CHECKPOINTS_FOLDER = "checkpoints"


def _end_trial() -> None:
    """Exit at once, taking along every process of the trial's group when this process leads it,
    and every descendant, wherever it detached to (a trainer's program and whatever it started
    must not outlive a worker that is gone)."""
    if os.getpgid(0) == os.getpid():
        end_descendants()
        os.killpg(os.getpid(), signal.SIGKILL)
    os._exit(1)


def _die_with_parent(worker_pid: int | None = None) -> None:
    """End this process when the worker that started it is gone (never leave orphans running).

    A forked trial's parent is the worker's forkserver, not the worker, and the forkserver
    outlives a killed worker for as long as its children run (they hold its liveness pipe), so
    such a trial watches the worker's pid itself (``worker_pid``). The kernel's signal on the
    parent's death is SIGTERM: it ends the process as SIGKILL would, unless a program trainer's
    is running, whose handler first ends every process the program started
    (``harness.trainers.program``).
    """
    parent = os.getppid()
    watched = worker_pid if worker_pid is not None else parent
    if sys.platform.startswith("linux"):
        try:  # the kernel ends us with the parent (PR_SET_PDEATHSIG = 1)
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)
        except (OSError, AttributeError):
            pass

    def dead() -> bool:
        return os.getppid() != parent or (watched != parent and process_gone(watched))

    def watch() -> None:
        while True:
            if dead():
                _end_trial()
            time.sleep(0.5)

    if dead():  # the parent (or the worker) died before prctl took effect
        _end_trial()
    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _set_threads() -> None:
    threads = os.environ.get(THREADS_ENV)
    if threads and "torch" in sys.modules:  # only when the trial function uses torch
        sys.modules["torch"].set_num_threads(int(threads))


def run(spec_path: Path, result_path: Path, trial_fn: str) -> int:
    """Run the trial of ``spec_path`` with ``trial_fn`` and write its result file; the exit code
    (0 when the trial returned a result). Every failure, whatever it raised, becomes the
    result file's error record and a traceback in the log."""
    try:
        os.environ[TRIAL_DIR_ENV] = str(spec_path.with_name(spec_path.name.removesuffix(SPEC_SUFFIX) + ".trial"))
        os.environ[CHECKPOINTS_ENV] = str(spec_path.with_name(CHECKPOINTS_FOLDER))
        spec = TrialSpec.model_validate_json(spec_path.read_text(encoding="utf-8"))
        fn = resolve(trial_fn, what="trial function")
        _set_threads()
        started = time.perf_counter()
        result = fn(spec)
        if isinstance(result, dict):
            result = TrialResult.model_validate(result)
        if not isinstance(result, TrialResult):
            raise TypeError(f"{trial_fn} returned {type(result).__name__}, not a TrialResult")
        if not result.wall_time_s:
            result.wall_time_s = time.perf_counter() - started
        # NaN/inf survive the JSON round trip (allow_nan): the worker decides what they mean.
        payload, code = {"ok": True, "result": result.model_dump(mode="python")}, 0
    except BaseException as err:  # noqa: BLE001 - every failure becomes the trial's reason
        traceback.print_exc()
        payload, code = {"ok": False, "error": ErrorRecord.of(err).to_dict()}, 1
    atomic_write(result_path, json.dumps(payload, allow_nan=True, default=str))
    return code


def child_main(spec_path: str, result_path: str, trial_fn: str, log_path: str, worker_pid: int | None = None) -> None:
    """Entry of a forked trial process: own session, output to the log, then :func:`run`."""
    os.setsid()
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    _die_with_parent(worker_pid)
    code = run(Path(spec_path), Path(result_path), trial_fn)
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)


def main(argv: list[str] | None = None) -> int:
    """Entry of an exec'd trial process (``python -m harness.runner.child``): :func:`run`."""
    parser = argparse.ArgumentParser(prog="python -m harness.runner.child")
    parser.add_argument("--spec", required=True, type=Path)
    parser.add_argument("--result", required=True, type=Path)
    parser.add_argument("--trial-fn", default=DEFAULT_TRIAL_FN)
    args = parser.parse_args(argv)
    _die_with_parent()
    code = run(args.spec, args.result, args.trial_fn)
    sys.stdout.flush()
    sys.stderr.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
