"""The study database under load: many workers claiming and completing trials of one queue.

Starts a real PostgreSQL on loopback (``tests/local_servers.py``, the fault tests' server, with
``max_connections`` for the largest pool), queues ``--trials`` trials into one study with the
harness's own queue (``queue.enqueue_specs``: real trial specs, the quickstart study's first one
at seeds 0..N-1), then for each pool size in ``--workers`` runs that many worker processes on a
fresh copy of the queued database (``CREATE DATABASE ... TEMPLATE``). Each worker does what
``harness worker`` does around a trial, with an instant fake trial in the middle:
``queue.claim_next`` with its identity, then ``fencing.commit`` of the trial COMPLETE, until
nothing is left to claim. The processes are forked after the imports (and start together on a
signal), so the timing is of the queue, not of Python's start-up.

Prints, per pool size, claims per second over the whole run (first claim to last commit) and
the p50/p99 latency of one ``claim_next``, and checks that no trial ran twice (claims per trial
key, over every worker) and none was lost (every trial COMPLETE exactly once in the database,
no commit refused); it exits 1 if either check fails. Workers and PostgreSQL share the
machine's cores, so on a small machine the figures are a floor.

    python benchmarks/queue_load.py [--trials 10000] [--workers 64 128 256]
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing as mp
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from optuna.trial import TrialState

from harness.errors import one_line
from harness.runner import queue
from harness.runner.queue import fencing
from harness.store import open_storage
from harness.study.expand import expand
from harness.study.load import load_study

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from local_servers import Postgres, ServerUnavailable  # noqa: E402  (the tests' server, not a package)

QUEUE = "load"
TEMPLATE_DB = "queued"
START_TIMEOUT_S = 600.0  # every worker connected and waiting for the start signal


def specs(n: int) -> list:
    """``n`` distinct real trial specs: the quickstart study's first trial at seeds 0..n-1."""
    first = expand(load_study(REPO / "studies" / "quickstart.yaml"))[0]
    out = [first.model_copy(update={"seed": seed}) for seed in range(n)]
    assert len({spec.trial_id for spec in out}) == n
    return out


def work(url: str, owner: str, ready, start, out: Path) -> None:
    """One worker: claim, run nothing, commit COMPLETE, until nothing is waiting; writes what it
    claimed and each claim's latency to ``out``."""
    q = queue.load_queue(open_storage(url), QUEUE)
    ready.release()
    start.wait()
    claimed, latencies, refused = [], [], 0
    while True:
        t0 = time.perf_counter()
        job = queue.claim_next(q, owner)
        if job is None:
            break
        latencies.append(time.perf_counter() - t0)
        claimed.append(job.key)
        if fencing.commit(q, job, owner, state=TrialState.COMPLETE, value=float(job.attrs["seed"])) is not None:
            refused += 1
    out.write_text(json.dumps({"claimed": claimed, "latencies": latencies, "refused": refused, "end": time.time()}))


def run_pool(server: Postgres, size: int, n_trials: int, folder: Path) -> dict:
    """``size`` forked workers on a fresh copy of the queued database; what they did, checked."""
    url = server.create_db(f"load_{size}", template=TEMPLATE_DB)
    ctx = mp.get_context("fork")
    ready, start = ctx.Semaphore(0), ctx.Event()
    outs = [folder / f"w{size}_{i}.json" for i in range(size)]
    gc.freeze()  # the imported modules stay shared with the forked workers
    procs = [ctx.Process(target=work, args=(url, f"load:{i}", ready, start, outs[i])) for i in range(size)]
    for proc in procs:
        proc.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    for _ in procs:
        if not ready.acquire(timeout=max(1.0, deadline - time.monotonic())):
            start.set()
            raise SystemExit(f"queue_load: {size} workers did not all connect within {START_TIMEOUT_S:.0f}s")
    began = time.time()
    start.set()
    for proc in procs:
        proc.join()
    gc.unfreeze()
    failed = [i for i, proc in enumerate(procs) if proc.exitcode != 0]
    if failed:
        raise SystemExit(f"queue_load: {len(failed)} of {size} workers failed (exit codes {procs[failed[0]].exitcode})")
    results = [json.loads(path.read_text()) for path in outs]
    claims = Counter(key for r in results for key in r["claimed"])
    latencies = sorted(x for r in results for x in r["latencies"])
    wall = max(r["end"] for r in results) - began

    study = queue.load_queue(open_storage(url), QUEUE)
    complete = Counter(job.key for job in queue.jobs(study) if job.state == TrialState.COMPLETE)
    return {
        "workers": size,
        "trials": n_trials,
        "wall_s": wall,
        "claims_per_s": sum(claims.values()) / wall,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        "ran_twice": sum(1 for n in claims.values() if n > 1) + sum(1 for n in complete.values() if n > 1),
        "lost": n_trials - len(complete),  # a trial left WAITING or RUNNING, or never queued
        "refused": sum(r["refused"] for r in results),  # commits whose claim no longer held
    }


def machine() -> str:
    cores = os.cpu_count()
    with open("/proc/meminfo") as meminfo:
        mem_gb = int(meminfo.readline().split()[1]) / 1024**2
    return f"{platform.machine()}, {cores} cores, {mem_gb:.0f} GiB RAM, PostgreSQL on the same machine"


def commit_id() -> str:
    out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[64, 128, 256])
    args = parser.parse_args()
    if args.trials < 1 or min(args.workers) < 1:
        raise SystemExit("queue_load: --trials and --workers must be at least 1")

    sizes = " ".join(map(str, args.workers))
    print(f"command: python benchmarks/queue_load.py --trials {args.trials} --workers {sizes}")
    print(f"commit {commit_id()}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {machine()}")
    try:
        server = Postgres(max_connections=2 * max(args.workers) + 50)
    except ServerUnavailable as err:
        raise SystemExit(f"queue_load: {err}") from None
    try:
        server.start()
        url = server.create_db(TEMPLATE_DB)
        storage = open_storage(url, create=True)
        t0 = time.perf_counter()
        report = queue.enqueue_specs(
            queue.create_queue(storage, QUEUE, "maximize"), specs(args.trials), phase="compare", retries=0
        )
        print(f"queued {report} in {time.perf_counter() - t0:.0f} s")
        storage.engine.dispose()  # a template database takes no connections; the workers open their own
        rows = []
        with tempfile.TemporaryDirectory(prefix="queue-load-") as folder:
            for size in args.workers:
                row = run_pool(server, size, args.trials, Path(folder))
                rows.append(row)
                print(
                    f"  {size} workers: {row['claims_per_s']:.0f} claims/s, p50 {row['p50_ms']:.1f} ms, "
                    f"p99 {row['p99_ms']:.1f} ms, ran twice {row['ran_twice']}, lost {row['lost']}",
                    flush=True,
                )
    except (RuntimeError, OSError) as err:
        raise SystemExit(f"queue_load: {one_line(err)}") from None
    finally:
        server.stop()

    print()
    print("| workers | trials | wall s | claims/s | claim p50 ms | claim p99 ms | ran twice | lost |")
    print("|--:|--:|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        print(
            f"| {r['workers']} | {r['trials']} | {r['wall_s']:.1f} | {r['claims_per_s']:.0f} | {r['p50_ms']:.1f} "
            f"| {r['p99_ms']:.1f} | {r['ran_twice']} | {r['lost']} |"
        )
    bad = [r["workers"] for r in rows if r["ran_twice"] or r["lost"] or r["refused"]]
    if bad:
        raise SystemExit(f"queue_load: trials ran twice, were lost or refused with {', '.join(map(str, bad))} workers")


if __name__ == "__main__":
    main()
