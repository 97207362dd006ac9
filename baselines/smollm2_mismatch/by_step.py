"""The sampler-trainer mismatch and the staleness reached, by arm and step, from the stored curves.

Reads ``curves.csv.gz`` beside this file (``harness results studies/smollm2_mismatch.yaml
--curves-csv``, gzipped: one row per trial, step and metric) and prints, per arm and RL step, the
mean over the arm's seeds of each ``mismatch/*`` and ``rollout/staleness_*`` metric, of the share
of tokens the correction truncated or masked (``train/mismatch_frac``; "-" for no correction) and
of ``time/weight_sync_s`` (how many seeds logged the step in the last column), as a Markdown table.

    python baselines/smollm2_mismatch/by_step.py [--curves PATH]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

#: the columns, in order: the metric and its header
COLUMNS = {
    "rollout/staleness_mean": "staleness mean",
    "rollout/staleness_max": "staleness max",
    "mismatch/abs_logp_mean": "mean abs dlogp",
    "mismatch/abs_logp_max": "max abs dlogp",
    "mismatch/kl_k3": "KL k3",
    "mismatch/ratio_p05": "ratio p05",
    "mismatch/ratio_p50": "ratio p50",
    "mismatch/ratio_p95": "ratio p95",
    "train/mismatch_frac": "share corrected",
    "time/weight_sync_s": "sync s",
}


def by_step(curves: pd.DataFrame) -> pd.DataFrame:
    """Per (arm, step): the seeds' mean of every metric of ``COLUMNS`` present, and the seeds."""
    wanted = curves[curves["metric"].isin(COLUMNS)]
    if wanted.empty:
        raise SystemExit("by_step: no mismatch/*, rollout/staleness_* or time/weight_sync_s values in the curves")
    table = wanted.pivot_table(index=["arm", "step"], columns="metric", values="value", aggfunc="mean")
    seeds = wanted.groupby(["arm", "step"])["seed"].nunique().rename("seeds")
    ordered = [m for m in COLUMNS if m in table.columns]
    return table[ordered].rename(columns=COLUMNS).join(seeds)


def markdown(table: pd.DataFrame) -> str:
    headers = ["arm", "step", *table.columns]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for (arm, step), row in table.iterrows():
        cells = ["-" if pd.isna(v) else f"{v:.3g}" for v in row]
        lines.append("| " + " | ".join([str(arm), str(int(step)), *cells]) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--curves", type=Path, default=Path(__file__).with_name("curves.csv.gz"))
    args = parser.parse_args()
    if not args.curves.is_file():
        raise SystemExit(f"by_step: no curves file at {args.curves}; write one with harness results --curves-csv")
    print(markdown(by_step(pd.read_csv(args.curves))))


if __name__ == "__main__":
    main()
