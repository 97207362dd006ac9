"""The worker pool of one machine: one worker process per slot, progress lines, Ctrl-C.

``run_pool`` starts ``python -m harness.runner.worker_process CONFIG.json`` per slot (GPU or CPU share),
prints a progress line whenever the counts change and relays SIGINT/SIGTERM: the first stops
the workers cleanly (their running trials go back to the queue), a second one kills them.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import statistics
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from harness.ground.console import say
from harness.runner import queue
from harness.runner.launch import module_command
from harness.runner.options import RunOptions
from harness.runner.secret_pipe import conceal, hand_over
from harness.runner.slots import Slot
from harness.runner.worker_config import WorkerConfig
from harness.study.plan import format_duration

# --------------------------------------------------------------------------------------------
# progress


class Progress:
    """One line per change on a stream: ``done/total, running, failed, waiting, ETA``."""

    def __init__(
        self, label: str, queues: list, *, keys: set[str] | None, workers: int, stream: TextIO, every_s: float
    ):
        self.label, self.queues, self.keys = label, queues, keys
        self.workers, self.stream, self.every_s = max(1, workers), stream, every_s
        self._last: tuple | None = None
        self._last_at = 0.0

    def retarget(self, label: str, queues: list, keys: set[str] | None) -> None:
        self.label, self.queues, self.keys, self._last = label, queues, keys, None

    def counts(self):

        total = queue.Counts()
        for q in self.queues:
            total = total.add(queue.count(q, self.keys))
        return total

    def tick(self, force: bool = False) -> None:
        try:
            c = self.counts()
        except Exception as err:  # noqa: BLE001 - a busy database only delays the display
            if force:
                print(f"[{self.label}] progress unavailable: {type(err).__name__}", file=self.stream)
            return
        state = c.as_tuple()
        now = time.monotonic()
        if not force and state == self._last and now - self._last_at < self.every_s:
            return
        self._last, self._last_at = state, now
        print(self.line(c), file=self.stream, flush=True)

    def line(self, c) -> str:

        text = (
            f"[{self.label}] {c.completed}/{c.total} done, {c.running} running, {c.failed} failed, {c.waiting} waiting"
        )
        if c.durations:
            median = statistics.median(c.durations)
            left = c.running + c.waiting
            text += f"; median {format_duration(median)}/trial"
            if left:
                rounds = math.ceil(left / self.workers)
                text += f", ETA ~{format_duration(rounds * median)}"
        return text


# --------------------------------------------------------------------------------------------
# the worker pool


class Interrupt:
    """SIGINT/SIGTERM while the pool runs: the first stops workers cleanly, a second kills."""

    def __init__(self) -> None:
        self.count = 0
        self.wake = threading.Event()
        self._old: dict[int, Any] = {}

    def __enter__(self) -> Interrupt:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        self.count += 1
        self.wake.set()

    def __exit__(self, *exc) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


def _watch(procs, interrupt: Interrupt, progress, on_tick, opts: RunOptions) -> None:
    """Until every worker has exited: queue phases, show progress, relay Ctrl-C."""
    out = opts.out()
    signalled_at: float | None = None
    killed = False
    while True:
        alive = [p for _, p in procs if p.poll() is None]
        if on_tick is not None and not interrupt.count:
            on_tick()
        if progress is not None:
            progress.tick()
        if not alive:
            return
        if interrupt.count and signalled_at is None:
            say("stopping: terminating running trials and re-queueing them (Ctrl-C again to kill)", stream=out)
            for p in alive:
                with contextlib.suppress(ProcessLookupError):
                    p.send_signal(signal.SIGTERM)
            signalled_at = time.monotonic()
        overdue = signalled_at is not None and time.monotonic() - signalled_at > opts.shutdown_timeout
        if (interrupt.count > 1 or overdue) and not killed:
            for p in alive:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
            killed = True
        interrupt.wake.wait(opts.poll_interval)
        interrupt.wake.clear()


def run_pool(
    *,
    study_file: Path,
    study_dir: Path,
    storage: str,
    queue_names: list[str],
    slots: list[Slot],
    opts: RunOptions,
    progress: Progress | None,
    watch_parent: bool = True,
    hold_file: Path | None = None,
    on_tick: Any = None,
) -> bool:
    """Run one worker process per slot until the queues are drained; True if interrupted.

    Every worker gets ``opts``, with ``storage`` the URL it opens (the default one when none was
    given), in its :class:`WorkerConfig`. While ``hold_file`` exists, idle workers wait for more
    jobs instead of exiting; ``on_tick()`` runs every poll (the runner queues the next phase from
    there).
    """
    config_dir = study_dir / "tmp"
    config_dir.mkdir(parents=True, exist_ok=True)
    procs: list[tuple[Slot, subprocess.Popen]] = []
    out = opts.out()
    # the runner is an ancestor of every trial's program: the URLs leave what /proc shows of it
    conceal(os.environ, RunOptions.secret_env_vars(), opts.secret_env().values())
    with Interrupt() as interrupt:
        run = opts.model_copy(update={"storage": storage})  # the URL the workers open
        for slot in slots:
            config = WorkerConfig(
                name=slot.name,
                device=slot.device,
                study_file=str(study_file),
                study_dir=str(study_dir),
                queues=list(queue_names),
                watch_parent=watch_parent,
                hold_file=str(hold_file) if hold_file is not None else None,
                run=run,
            )
            path = config_dir / f"worker-{os.getpid()}-{slot.name}.json"
            path.write_text(config.to_json(), encoding="utf-8")
            secrets, named = hand_over(config.secret_env())  # a pipe: never the worker's environment
            env = {**os.environ, **slot.env, **named}
            try:
                proc = subprocess.Popen(
                    [*module_command("harness.runner.worker_process"), str(path)], env=env, pass_fds=(secrets,)
                )
            finally:
                os.close(secrets)
            procs.append((slot, proc))
        try:
            _watch(procs, interrupt, progress, on_tick, opts)
        except BaseException:
            for _, p in procs:  # the runner failed: do not leave workers waiting on a hold file
                with contextlib.suppress(ProcessLookupError):
                    p.terminate()
            raise
        for slot, p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=30)
            if p.returncode not in (0, None) and not interrupt.count:
                say(f"worker {slot.name} exited with code {p.returncode}", stream=out)
        for slot in slots:
            (config_dir / f"worker-{os.getpid()}-{slot.name}.json").unlink(missing_ok=True)
        if progress is not None:
            progress.tick()
        return bool(interrupt.count)
