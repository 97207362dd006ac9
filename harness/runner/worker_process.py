"""The process a worker runs in: ``python -m harness.runner.worker_process CONFIG.json`` (a
:class:`~harness.runner.worker_config.WorkerConfig`: the run's options without the URLs, which
come through a pipe from the runner, ``harness.runner.secret_pipe``, or, for a scheduler's job, in the
environment). It takes the URLs out of its environment (and out of what ``/proc`` shows of it)
before any trial process is started, stops cleanly on SIGINT and SIGTERM, stops when the runner
that started it is gone, and runs a :class:`~harness.runner.worker.Worker` until the work is done.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from harness.errors import HarnessError
from harness.ground.console import say
from harness.ground.exit_codes import EXIT_BAD_INPUT, EXIT_OK
from harness.runner.launch import prestart_forkserver
from harness.runner.secret_pipe import conceal, take_over
from harness.runner.worker import Worker
from harness.runner.worker_config import WorkerConfig, WorkerStats


def install_stop_handlers(stop: threading.Event) -> None:
    """SIGINT and SIGTERM set ``stop``: the running trial is ended and its job put back."""

    def handler(signum, frame):
        stop.set()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


def watch_parent(stop: threading.Event, poll_s: float = 0.5) -> None:
    """Set ``stop`` when the process that started this one is gone (a thread polls for it)."""
    parent = os.getppid()

    def watch() -> None:
        while not stop.is_set():
            if os.getppid() != parent:
                say("the runner is gone; stopping", prefix="[worker]")
                stop.set()
                return
            time.sleep(poll_s)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.runner.worker_process CONFIG.json``: read the config (and, from the
    environment, the URLs; then remove them there, so no trial process sees them), run a
    :class:`Worker` until it is done or stopped. Exit code 0, or 2 when it stopped early or
    could not start (one line on stderr)."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m harness.runner.worker_process CONFIG.json", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        handed = take_over()  # the URLs, from the runner's pipe
        config = WorkerConfig.from_json(Path(argv[0]).read_text(encoding="utf-8"), {**os.environ, **handed})
    except HarnessError as err:
        say(f"error: {err}", prefix="[worker]")
        return EXIT_BAD_INPUT
    return serve(config, lambda stop: Worker(config, stop).run(), label=f"[worker {config.name}]")


def serve(config: WorkerConfig, work: Callable[[threading.Event], WorkerStats], *, label: str) -> int:
    """What a worker process and a scheduler's one-trial job do around their work: take the URLs
    out of the environment (no trial process sees them), boot the fork server, stop cleanly on
    SIGINT and SIGTERM (and when the runner is gone, if ``config.watch_parent``), then run
    ``work(stop)``. Exit code 0, or 2 when it stopped early or could not start (one line on
    stderr, prefixed ``label``)."""
    conceal(os.environ, config.run.secret_env_vars(), config.secret_env().values())  # no trial sees the URLs
    prestart_forkserver()
    stop = threading.Event()
    install_stop_handlers(stop)
    if config.watch_parent:
        watch_parent(stop)
    try:
        stats = work(stop)
    except HarnessError as err:
        say(f"error: {err}", prefix=label)
        return EXIT_BAD_INPUT
    return EXIT_BAD_INPUT if stats.stopped else EXIT_OK  # stopped early: 2, like a worker that cannot start


if __name__ == "__main__":
    sys.exit(main())
