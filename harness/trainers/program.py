"""Run a trial's program: its argument list filled from the trial file, no shell, in the trial's
process group, under the trial process as the subreaper of everything it starts (so a child that
detaches into a session of its own is still found: ``harness.ground.processes``); the program
and every process it started end with the trial (when the program exits, on the worker's
timeout or stop, and when the worker is gone). It runs in the harness's working folder (a
relative path in the command reads as the study's other paths do), its output copied line by
line into the trial's log, its environment the contract's (docs/trainers.md) with every
``HARNESS_*`` variable of the trial process left out: the storage and tracking URLs, which may
carry passwords, never reach a program.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path
from typing import Any

from harness.engine.trainer_config import RESERVED_ENV_PREFIX, TrainerConfig
from harness.engine.trial_file import fill
from harness.ground.processes import descendants, end_descendants, set_subreaper
from harness.trainers.faults import ProgramTrialError

#: the shipped TRL adapter, run as a program like any other
TRL_ADAPTER = "harness.trainers.trl_adapter"
#: the last lines of the program's output a failure quotes
TAIL_LINES = 5
#: how long the output is still copied after the program exits (a child it left may hold it open)
DRAIN_S = 5.0
#: the contract's variables, each the trial file field it repeats
CONTRACT_ENV = {
    "HARNESS_TRIAL_FILE": "trial_file",
    "HARNESS_OUTPUT_DIR": "output_dir",
    "HARNESS_CHECKPOINT_DIR": "checkpoint_dir",
    "HARNESS_METRICS_FILE": "metrics_file",
    "HARNESS_SCORES_FILE": "scores_file",
    "HARNESS_SEED": "seed",
    "HARNESS_ARM": "arm",
    "HARNESS_STUDY": "study",
}


def program_argv(trainer: TrainerConfig, document: dict[str, Any]) -> list[str]:
    """The program's arguments, each template filled from the trial file."""
    template = trainer.command if trainer.kind == "command" else [sys.executable, "-m", TRL_ADAPTER, "{trial_file}"]
    return [fill(part, document, f"trainer.command[{i}]") for i, part in enumerate(template)]


def program_env(trainer: TrainerConfig, document: dict[str, Any]) -> dict[str, str]:
    """The trial process's environment without the harness's own variables, plus the contract's
    and the study's ``trainer.env``."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(RESERVED_ENV_PREFIX)}
    env.update({name: str(document[field]) for name, field in CONTRACT_ENV.items()})
    env["CUDA_VISIBLE_DEVICES"] = ",".join(document["devices"])
    env.update({name: fill(text, document, f"trainer.env.{name}") for name, text in trainer.env.items()})
    return env


def _copy_output(stream, tail: deque[str]) -> None:
    """Each line of the program's output into this process's stdout (the trial's log), keeping
    the last few for a failure's reason."""
    for raw in stream:
        sys.stdout.buffer.write(raw)
        sys.stdout.buffer.flush()
        if raw.strip():
            tail.append(raw.decode("utf-8", "replace").strip())


def leads_group() -> bool:
    """Whether this process leads its process group, as a trial process does: only then does it
    end what a program leaves, so that nothing outside the trial is ever touched."""
    return os.getpgid(0) == os.getpid()


def end_stragglers(keep: set[int]) -> None:
    """End what the program left running (a server it started, a child that outlived it, one that
    detached into a session of its own): every descendant of this trial process, which leads its
    group, but ``keep`` (its own, from before the program), and every process of its group."""
    end_descendants(keep)
    group = os.getpid()
    for entry in Path("/proc").glob("[0-9]*"):
        pid = int(entry.name)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if pid != group and os.getpgid(pid) == group:
                os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def ends_on_term(keep: set[int]):
    """While the program runs, SIGTERM (the worker's timeout or stop, or the worker gone) first
    ends every process the program started, wherever it detached to, then this process as the
    signal would have."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    previous = signal.SIG_DFL if previous is None else previous

    def on_term(signum, frame):
        end_descendants(keep)
        signal.signal(signal.SIGTERM, previous)
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_program(trainer: TrainerConfig, document: dict[str, Any]) -> None:
    """Run the trial's program to its end; a ``ProgramTrialError`` quoting the tail of its output
    when it cannot start or exits non-zero."""
    argv = program_argv(trainer, document)
    print(f"trainer: running {' '.join(argv)}", flush=True)
    keep = descendants() if leads_group() else None  # this process's own, from before the program: spared
    subreaper = keep is not None and set_subreaper()
    try:
        _run(trainer, document, argv, keep)
    finally:
        if subreaper:  # for as long as the program runs (a test's process runs programs too)
            set_subreaper(False)


def _run(trainer: TrainerConfig, document: dict[str, Any], argv: list[str], keep: set[int] | None) -> None:
    """Start the program, copy its output, wait for it and end what it left (``keep`` None: this
    process does not lead its group, and touches nothing but the program)."""
    try:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=program_env(trainer, document),
        )
    except OSError as err:
        raise ProgramTrialError(f"the trainer's program {argv[0]!r} cannot start ({err.strerror or err})") from None
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    copier = threading.Thread(target=_copy_output, args=(proc.stdout, tail), name="program-output", daemon=True)
    copier.start()
    with ends_on_term(keep) if keep is not None else contextlib.nullcontext():
        code = proc.wait()
    if keep is not None:
        end_stragglers(keep)
    copier.join(DRAIN_S)
    if code != 0:
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        said = " | ".join(tail) or "(no output)"
        raise ProgramTrialError(f"the trainer's program {how}: {said}")
