"""How long a worker takes to start a trial: from ``run_trial_process`` to the first line of the
trial function, and the trial process's CPU seconds to that line.

The worker is run as ``harness run`` runs one: its main module by name, importing the worker's
module tree (the queue, Optuna, SQLAlchemy), then its trials forked from its forkserver (the
default start). The trial function does nothing but note the time and return, so what is timed is
the start alone. The first trial boots the forkserver and is not counted; the next ``--trials``
are, one after another.

``--beside PATH`` times another checkout's ``harness`` in the same run (a worktree of an earlier
commit: ``git worktree add /tmp/before <commit>``), alternating the two a worker at a time, and
prints this checkout's medians over its.

    python benchmarks/trial_start.py [--trials 8] [--rounds 3] [--beside PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: the worker: imports what a worker imports, then starts the trials and prints their start times
WORKER = """\
    import json
    import sys
    import time
    from pathlib import Path

    import harness.runner.worker  # noqa: F401  (what harness.runner.worker_process imports)
    from harness.algorithms import resolve_algorithm
    from harness.engine.spec import TrialSpec
    from harness.runner.launch import run_trial_process

    if __name__ == "__main__":
        folder, trials = Path(sys.argv[1]), int(sys.argv[2])
        spec = TrialSpec(arm="bench", algorithm=resolve_algorithm("grpo")).model_dump_json()
        rows = []
        for n in range(trials + 1):  # the first boots the forkserver
            began = time.time()
            outcome = run_trial_process(
                spec,
                trial_fn="bench_trial:first_line",
                work_dir=folder / "tmp",
                log_path=folder / "trial.log",
                stem=f"t{n}",
            )
            if outcome.result is None:
                raise SystemExit(f"trial {n} failed: {outcome.reason}")
            entered = json.loads((folder / "entered.json").read_text())
            rows.append({"start_s": entered["at"] - began, "cpu_s": entered["cpu_s"]})
        print(json.dumps(rows[1:]))
    """

#: the trial: its first line notes the time and the process's CPU seconds so far
TRIAL = """\
    import json
    import os
    import time

    from harness.engine.spec import TrialResult


    def first_line(spec):
        at, cpu_s = time.time(), time.process_time()
        with open(os.path.join(os.environ["BENCH_FOLDER"], "entered.json"), "w") as fh:
            json.dump({"at": at, "cpu_s": cpu_s}, fh)
        return TrialResult(trial_id=spec.trial_id)
    """


def one_worker(root: Path, folder: Path, trials: int) -> list[dict[str, float]]:
    """The start times of ``trials`` trials of one worker running ``root``'s harness."""
    run = (
        f"import runpy, sys; sys.path.insert(0, {str(root)!r}); "
        "runpy.run_module('bench_worker', run_name='__main__', alter_sys=True)"  # as module_command runs a worker
    )
    env = {**os.environ, "PYTHONPATH": str(folder), "BENCH_FOLDER": str(folder)}
    env.pop("HARNESS_TRIAL_START", None)
    out = subprocess.run(
        [sys.executable, "-P", "-c", run, str(folder), str(trials)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"the worker running {root} failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=8, help="trials timed per worker")
    parser.add_argument("--rounds", type=int, default=3, help="workers per checkout")
    parser.add_argument("--beside", type=Path, help="another checkout's harness, timed in the same run")
    args = parser.parse_args()
    roots = {"this checkout": REPO}
    if args.beside is not None:
        if not (args.beside / "harness" / "runner" / "launch.py").is_file():
            raise SystemExit(f"--beside {args.beside}: no harness checkout there (harness/runner/launch.py)")
        roots["beside"] = args.beside.resolve()
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in roots}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "bench_worker.py").write_text(textwrap.dedent(WORKER))
        (folder / "bench_trial.py").write_text(textwrap.dedent(TRIAL))
        for _ in range(args.rounds):
            for name, root in roots.items():
                rows[name] += one_worker(root, folder, args.trials)
    medians = {}
    for name, found in rows.items():
        start = statistics.median(r["start_s"] for r in found)
        cpu = statistics.median(r["cpu_s"] for r in found)
        medians[name] = (start, cpu)
        print(f"{name:14s} {roots[name]}: {len(found)} trials, median start {start:.3f} s, trial CPU {cpu:.3f} s")
    if "beside" in medians:
        (start, cpu), (start_b, cpu_b) = medians["this checkout"], medians["beside"]
        print(
            f"this checkout / beside: start {start / start_b:.3f}x ({start - start_b:+.3f} s a trial), "
            f"trial CPU {cpu / cpu_b:.3f}x ({cpu - cpu_b:+.3f} s a trial)"
        )


if __name__ == "__main__":
    main()
