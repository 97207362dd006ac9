"""Start one trial in a child process and wait for it, bounded by a timeout and a stop event.

The worker side of :mod:`harness.runner.child`: the child is forked from a per-worker
*forkserver* (torch and the spec module imported once) or exec'd fresh
(``HARNESS_TRIAL_START=exec``); either way it leads its own process group, which is killed
as a whole on timeout or stop. :func:`run_trial_process` returns an :class:`Outcome`: the
trial's result, or why it failed: the error the trial raised, as the typed record the trial
process wrote (so a caller asks for its ``type``), or what ended the process (a timeout, a
signal, an exit code).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from harness.errors import ErrorRecord
from harness.runner.child import child_main


@dataclass
class Outcome:
    """What came back from a trial process: a result, a failure, or an interruption."""

    result: dict[str, Any] | None = None  # TrialResult fields
    error: ErrorRecord | None = None  # what the trial raised, as its process recorded it
    ended: str | None = None  # what ended a process that recorded no error: a timeout, a signal, an exit code
    interrupted: bool = False
    wall_time_s: float = 0.0

    @property
    def reason(self) -> str | None:
        """Why the trial failed, on one line, as its record says it (``Type: message``)."""
        return self.error.line() if self.error is not None else self.ended


START_ENV = "HARNESS_TRIAL_START"  # "fork" (default where available) or "exec"
_forkserver = None


#: the folder holding the harness package this process runs (its site-packages, or a checkout)
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def module_command(module: str) -> list[str]:
    """``python -m module`` on this process's harness, not whatever ``harness/`` folder comes
    first on the child's path (``-m`` puts the CWD first, and so does an empty PYTHONPATH entry).
    """
    run = (
        f"import runpy, sys; sys.path.insert(0, {_PACKAGE_ROOT!r}); "
        f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    )
    return [sys.executable, "-P", "-c", run]


def _start_method() -> str:
    import multiprocessing

    wanted = os.environ.get(START_ENV, "fork")
    if wanted == "fork" and "forkserver" in multiprocessing.get_all_start_methods():
        return "fork"
    return "exec"


def prestart_forkserver() -> None:
    """Boot the forkserver now, so its imports overlap the worker's own (saves seconds)."""
    if _start_method() == "fork":
        from multiprocessing import forkserver

        _fork_context()
        forkserver.ensure_running()


def _main_module() -> list[str]:
    """What the forkserver imports once so that a trial process need not import it again.

    multiprocessing runs the parent's main module again in every child it starts (as
    ``__mp_main__``, so that what the parent pickled can be found): a worker's trial processes
    each imported the worker's module tree again (the queue, Optuna, SQLAlchemy), about a second
    per trial on 2 cores, before the trial began. A main run by name (``harness.runner.worker_process``)
    is imported in the forkserver; a main run by path (a script, such as the ``harness`` command)
    runs again in the child whatever is preloaded (multiprocessing's ``__main__`` preload never
    receives the path), so the modules it imported are preloaded and its second run finds them
    done. A package's ``__main__`` is never run again, and must not be imported here (it would run).
    """
    main = sys.modules["__main__"]
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if name is not None:
        return [] if name == "__main__" or name.endswith(".__main__") else [name]
    if getattr(main, "__file__", None) is None:
        return []  # python -c: nothing is run again
    imported = {
        value.__name__ if isinstance(value, ModuleType) else getattr(value, "__module__", None)
        for value in vars(main).values()
    }
    return sorted(
        module for module in imported if isinstance(module, str) and module in sys.modules and module != "__main__"
    )


def _fork_context():
    """This worker's forkserver, with the heavy, CUDA-free imports done once."""
    global _forkserver
    if _forkserver is None:
        import importlib.util
        import multiprocessing

        ctx = multiprocessing.get_context("forkserver")
        preload = ["harness.runner.child", "harness.engine.spec", *_main_module()]
        if importlib.util.find_spec("torch") is not None:
            preload.append("torch")  # importing torch never initialises CUDA
        ctx.set_forkserver_preload(preload)
        _forkserver = ctx
    return _forkserver


class _Child:
    """A started trial process, however it was started: wait, kill its group, exit status."""

    def __init__(self, handle, pid: int):
        self.handle, self.pid = handle, pid

    def wait(self, timeout: float) -> bool:
        if isinstance(self.handle, subprocess.Popen):
            try:
                self.handle.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return False
            return True
        self.handle.join(timeout)
        return self.handle.exitcode is not None

    @property
    def returncode(self) -> int | None:
        if isinstance(self.handle, subprocess.Popen):
            return self.handle.returncode
        return self.handle.exitcode

    def kill_group(self, grace_s: float) -> None:
        """SIGTERM the trial's process group, then SIGKILL what is left after ``grace_s``."""
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 30.0)):
            self._signal(sig)
            if self.wait(wait):
                break
        self._signal(signal.SIGKILL, quiet=True)  # stray children left in its group

    def _signal(self, sig: int, quiet: bool = False) -> None:
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            if not quiet and self.returncode is None:  # not yet its own group leader
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, sig)
        except PermissionError:
            pass


def _start_child(spec_path: Path, result_path: Path, trial_fn: str, log_path: Path, env) -> _Child:
    if _start_method() == "fork":
        proc = _fork_context().Process(
            target=child_main,
            args=(str(spec_path), str(result_path), trial_fn, str(log_path), os.getpid()),
            name="trial",
            daemon=False,
        )
        proc.start()
        return _Child(proc, proc.pid)
    cmd = [
        *module_command("harness.runner.child"),
        "--spec",
        str(spec_path),
        "--result",
        str(result_path),
        "--trial-fn",
        trial_fn,
    ]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # its own group: Ctrl-C reaches the worker only
        )
    return _Child(proc, proc.pid)


def _signal_reason(returncode: int) -> str:
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    hint = " (out of memory? the kernel's OOM killer sends SIGKILL)" if name == "SIGKILL" else ""
    return f"trial process killed by {name}{hint}"


def _log_tail(log_path: Path, lines: int = 1) -> str:
    try:
        with open(log_path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 4096))
            tail = fh.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(tail[-lines:])


class LogFollower:
    """The lines a trial process appends to its log that start with one of ``prefixes``, handed to
    ``show`` as they come (polled; a partial last line waits for its newline)."""

    def __init__(self, log_path: Path, prefixes: tuple[str, ...], show: Callable[[str], None]):
        self.log_path, self.prefixes, self.show = log_path, prefixes, show
        self.offset = log_path.stat().st_size if log_path.exists() else 0
        self.partial = b""

    def poll(self) -> None:
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except OSError:
            return
        self.offset += len(chunk)
        *lines, self.partial = (self.partial + chunk).split(b"\n")
        for raw in lines:
            line = raw.decode("utf-8", "replace").strip()
            if line.startswith(self.prefixes):
                self.show(line)


#: seconds a trial process that ended without a result gives its worker's stop to arrive: Slurm
#: signals every process of a job (scancel, preemption), so the trial may die of the signal that
#: stops its worker a moment before the worker's handler runs; that trial was interrupted, not failed
STOP_RACE_S = 2.0


def run_trial_process(
    spec_json: str,
    *,
    trial_fn: str,
    work_dir: Path,
    log_path: Path,
    stem: str,
    timeout_s: float | None = None,
    stop: threading.Event | None = None,
    env: dict[str, str] | None = None,
    kill_grace_s: float = 10.0,
    poll_s: float = 0.1,
    header: str = "",
    follow: LogFollower | None = None,
) -> Outcome:
    """Run one trial in a fresh process and wait for it (bounded by ``timeout_s`` and ``stop``);
    ``follow`` is polled meanwhile, to show what the process says in its log as it goes."""
    work_dir.mkdir(parents=True, exist_ok=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    spec_path = work_dir / f"{stem}.{os.getpid()}.spec.json"
    result_path = work_dir / f"{stem}.{os.getpid()}.result.json"
    result_path.unlink(missing_ok=True)
    spec_path.write_text(spec_json, encoding="utf-8")
    if header:
        with open(log_path, "ab") as log:
            log.write(header.encode() + b"\n")
    timed_out = interrupted = False
    try:
        child = _start_child(spec_path, result_path, trial_fn, log_path, env)
        started = time.monotonic()  # after start: a (first) forkserver boot is not trial time
        while not child.wait(poll_s):
            if follow is not None:
                follow.poll()
            if stop is not None and stop.is_set():
                interrupted = True
            elif timeout_s is not None and time.monotonic() - started > timeout_s:
                timed_out = True
            if interrupted or timed_out:
                child.kill_group(kill_grace_s)
                break
        wall = time.monotonic() - started
        if follow is not None:
            follow.poll()
        payload = None
        if result_path.exists():
            try:
                payload = json.loads(result_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                payload = None
        if payload is not None and payload.get("ok"):
            return Outcome(result=payload["result"], wall_time_s=wall)  # finished, even if stopped
        if not interrupted and payload is None and stop is not None and stop.wait(STOP_RACE_S):
            interrupted = True  # killed by the signal that stops its worker too (a scheduler's scancel)
        if interrupted:
            return Outcome(interrupted=True, wall_time_s=wall)
        if timed_out:
            return Outcome(ended=f"timeout: exceeded --trial-timeout {timeout_s:g}s", wall_time_s=wall)
        if payload is not None and isinstance(payload.get("error"), dict):
            return Outcome(error=ErrorRecord.from_dict(payload["error"]), wall_time_s=wall)
        if payload is not None:
            return Outcome(ended="trial failed", wall_time_s=wall)
        code = child.returncode
        if code is not None and code < 0:
            return Outcome(ended=_signal_reason(code), wall_time_s=wall)
        tail = _log_tail(log_path)
        return Outcome(
            ended=f"trial process exited with code {code}" + (f": {tail}" if tail else ""),
            wall_time_s=wall,
        )
    finally:
        spec_path.unlink(missing_ok=True)
        result_path.unlink(missing_ok=True)
