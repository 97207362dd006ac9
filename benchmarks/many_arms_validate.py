"""`harness validate` of a study with many arms: time against the number of arms, and the no-op
check beside the all-pairs loop it replaced.

The study's arms differ in their learning rate (what a sweep of thousands of arms looks like).
For each size the study is loaded once (``load_study``, linear), then the no-op check runs both
ways on it: ``noop_pairs`` (groups the conditions by what the probe cannot see, then compares only
within a group) and the old loop over every pair (kept below as the baseline, ``every_pair``).
Prints the CPU seconds of each and the ratio of each to the previous size: about 2 per doubling is
linear, about 4 quadratic. Issue 37 measured 1.7 / 3.1 / 9.2 s for 250 / 500 / 1,000 arms and
more than 120 s for 10,000.

    python benchmarks/many_arms_validate.py [--sizes 250 500 1000 2000] [--skip-baseline-over 1000]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from harness.algorithms.probe_result import UNPROBED, differing_fields
from harness.study import noop
from harness.study.load import load_study


def write_study(folder: Path, arms: int) -> Path:
    path = folder / f"arms{arms}.yaml"
    lines = [f"name: arms{arms}", "control: a0", "seeds: 3", f"output_dir: {folder / 'out'}", "arms:"]
    lines += [f"  - {{name: a{i}, algorithm: grpo, set: {{lr: {1e-4 * (1 + i / arms):.12g}}}}}" for i in range(arms)]
    path.write_text("\n".join(lines) + "\n")
    return path


def every_pair(study) -> int:
    """The old check's loop: every pair of conditions compared (no probe runs for these arms)."""
    specs = noop._condition_specs(study)
    names, found = list(specs), 0
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            a, b = specs[first], specs[second]
            if a.train != b.train:
                continue
            fields = differing_fields(a.algorithm, b.algorithm)
            if fields and not set(fields) & (UNPROBED - {"name"}):
                found += 1
    return found


def cpu(work, *args) -> tuple[float, object]:
    """The CPU seconds of ``work(*args)`` and what it returned."""
    start = time.process_time()
    out = work(*args)
    return time.process_time() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[250, 500, 1000, 2000])
    parser.add_argument("--skip-baseline-over", type=int, default=1000, help="the all-pairs loop is quadratic")
    args = parser.parse_args()
    print(f"{'arms':>6} {'load s':>8} {'noop_pairs s':>13} {'x prev':>7} {'every pair s':>13} {'x prev':>7}")
    previous: tuple[float, float] | None = None
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            load_s, study = cpu(load_study, write_study(Path(tmp), size))
            new_s, lines = cpu(noop.noop_pairs, study)
            assert lines == []
            old_s = float("nan")
            if size <= args.skip_baseline_over:
                old_s, found = cpu(every_pair, study)
                assert found == 0
            ratios = ("", "") if previous is None else (f"{new_s / previous[0]:.1f}", f"{old_s / previous[1]:.1f}")
            print(f"{size:>6} {load_s:>8.2f} {new_s:>13.3f} {ratios[0]:>7} {old_s:>13.3f} {ratios[1]:>7}")
            previous = (new_s, old_s)


if __name__ == "__main__":
    main()
