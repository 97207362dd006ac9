"""Time of the no-op probe that `harness validate`, `plan` and `run` apply to every study: a
10-arm study (the RL presets plus one-field ablations), probed from scratch each repetition
(its kept results removed), then checked again from the kept results.

    python benchmarks/noop_probe.py [--repeats 7]

Prints the median and the slowest repetition (target: under a second for 10 arms), the median
check from kept results and, for scale, the time of importing torch and the algorithms the
first time. It runs in a temporary folder, whose ``.cache/harness/probe`` keeps the results.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import textwrap
import time
from pathlib import Path

ARMS = """\
- {name: grpo, algorithm: grpo}
- {name: ppo, algorithm: ppo}
- {name: dr_grpo, algorithm: dr_grpo}
- {name: rloo, algorithm: rloo}
- {name: reinforce_pp, algorithm: reinforce_pp}
- {name: cispo, algorithm: cispo}
- {name: dapo, algorithm: dapo}
- {name: gspo, algorithm: gspo}
- {name: clip_higher, algorithm: grpo, set: {eps_high: 0.28}}
- {name: dual_clip, algorithm: grpo, set: {dual_clip: 3.0}}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    clock = time.perf_counter()
    from harness.algorithms import probe as probe_module
    from harness.study.expand import expand
    from harness.study.load import load_study
    from harness.study.noop import noop_pairs
    from harness.study.probe_cache import PROBE_FOLDER

    import_s = time.perf_counter() - clock
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        path = Path(folder) / "ten.yaml"
        path.write_text("name: ten\ncontrol: grpo\nseeds: 3\narms:\n" + textwrap.indent(ARMS, "  "))
        study = load_study(path)
        kept = Path(expand(study)[0].cache_dir) / PROBE_FOLDER
        times, cached = [], []
        for _ in range(args.repeats):
            shutil.rmtree(kept, ignore_errors=True)
            probe_module._batch.cache_clear()
            clock = time.perf_counter()
            found = noop_pairs(study)
            times.append(time.perf_counter() - clock)
            clock = time.perf_counter()
            noop_pairs(study)
            cached.append(time.perf_counter() - clock)
    print(
        f"no-op probe, 10 arms ({len(found)} no-op pairs found): median {statistics.median(times):.3f} s, "
        f"slowest {max(times):.3f} s over {args.repeats} runs; from kept results {statistics.median(cached):.3f} s; "
        f"first import of torch + algorithms {import_s:.2f} s"
    )


if __name__ == "__main__":
    main()
