"""Start-up time of the commands: ``harness validate studies/quickstart.yaml`` and a one-step
``harness trial``, each from process start, and which heavy modules each imported.

Every command runs in a fresh process in a temporary folder (its own ``.cache/harness`` and
``runs/``). The first run of each warms what a user's second run finds: the no-op probe's
results for validate, the warm start for the trial (a minute of SFT); the next ``--repeats``
runs are timed. The trial's time is to the start of its first RL step (the driver wraps the step
functions of ``harness.engine.trial``, which the command imports anyway); its whole run, the
record and its MLflow mirror included, is printed beside it. Targets on a quiet machine:
validate < 1.5 s, trial to its first step < 4 s. Each figure has its process's CPU time beside it
(all threads; the trial's rollouts use several), steadier than wall time on a shared machine.

Bytecode is cached (``PYTHONDONTWRITEBYTECODE`` is dropped for the commands, so ``harness``'s
own ``__pycache__`` is written as an installed package's is); ``--no-bytecode`` keeps the
environment's setting, which compiles ``harness`` at every start.

``--threads N`` runs the trial with ``--set train.threads=N``: on a machine other work keeps busy,
torch's default threads wait on each other, and one thread times the start more steadily.

    python benchmarks/startup.py [--repeats 5] [--no-bytecode] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "studies" / "quickstart.yaml"
TRIAL = ["trial", "--algorithm", "grpo", "--steps", "1"]
HEAVY = ("torch", "transformers", "peft", "mlflow", "pandas", "scipy", "plotly", "optuna", "sqlalchemy")
MARK = "STARTUP-BENCH "

#: runs ``harness ARGS...`` as the console script does; on stderr, the heavy modules imported at
#: exit and, for a trial, the time and the modules at its first step
DRIVER = f"""
import atexit, json, sys, time
HEAVY = {HEAVY!r}
def loaded():
    return [m for m in HEAVY if m in sys.modules]
def report():
    print({MARK!r} + json.dumps({{"exit": loaded(), "cpu_s": time.process_time()}}), file=sys.stderr, flush=True)
atexit.register(report)
if sys.argv[1] == "trial":
    import harness.engine.trial as trial
    steps = dict(trial.STEPS)
    def first(kind):
        def step(*args, **kwargs):
            report = {{"first_step": time.time(), "first_step_cpu_s": time.process_time(), "modules": loaded()}}
            print({MARK!r} + json.dumps(report), file=sys.stderr, flush=True)
            trial.STEPS.update(steps)
            return steps[kind](*args, **kwargs)
        return step
    trial.STEPS.update({{kind: first(kind) for kind in steps}})
from harness.cli.app import main
sys.argv = ["harness", *sys.argv[1:]]
main()
"""


def run(args: list[str], folder: Path, env: dict[str, str]) -> dict:
    """One ``harness`` command in ``folder``: its wall time and what the driver reported."""
    started = time.time()
    done = subprocess.run([sys.executable, "-c", DRIVER, *args], cwd=folder, env=env, capture_output=True, text=True)
    wall = time.time() - started
    if done.returncode != 0:
        raise SystemExit(f"harness {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    report = {"wall_s": wall}
    for line in done.stderr.splitlines():
        if line.startswith(MARK):
            report.update(json.loads(line.removeprefix(MARK)))
    if "first_step" in report:
        report["to_first_step_s"] = report["first_step"] - started
    return report


def median(runs: list[dict], key: str) -> str:
    return f"{statistics.median(r[key] for r in runs):.2f}"


def modules(names: list[str]) -> str:
    return ", ".join(names) or "none of " + ", ".join(HEAVY)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--no-bytecode", action="store_true", help="keep PYTHONDONTWRITEBYTECODE as the environment sets it"
    )
    parser.add_argument("--threads", type=int, help="torch threads of the trial (train.threads); default: torch's")
    args = parser.parse_args()
    trial = TRIAL if args.threads is None else [*TRIAL, "--set", f"train.threads={args.threads}"]
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    if not args.no_bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory(prefix="startup-bench-") as tmp:
        folder = Path(tmp)
        validate = ["validate", str(QUICKSTART)]
        cold = run(validate, folder, env)
        timed = [run(validate, folder, env) for _ in range(args.repeats)]
        print(
            f"harness validate studies/quickstart.yaml: median {median(timed, 'wall_s')} s "
            f"(CPU {median(timed, 'cpu_s')} s) "
            f"over {args.repeats} runs (target < 1.5 s); imported {modules(timed[-1]['exit'])}"
        )
        print(f"  its first run, probing the arms: {cold['wall_s']:.2f} s, imported {modules(cold['exit'])}")

        print("harness trial: warming the warm-start cache (SFT of the tiny model) ...", flush=True)
        warm = run(trial, folder, env)
        timed = [run(trial, folder, env) for _ in range(args.repeats)]
        print(
            f"harness {' '.join(trial)}: process start to its first step median {median(timed, 'to_first_step_s')} s "
            f"(CPU {median(timed, 'first_step_cpu_s')} s) over {args.repeats} runs (target < 4 s); the whole command "
            f"{median(timed, 'wall_s')} s (CPU {median(timed, 'cpu_s')} s)"
        )
        print(
            f"  imported by the first step: {modules(timed[-1]['modules'])}; by the end: {modules(timed[-1]['exit'])}"
        )
        print(f"  its first run, building the warm start: {warm['wall_s']:.1f} s")


if __name__ == "__main__":
    main()
