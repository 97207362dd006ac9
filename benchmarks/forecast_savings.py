"""What forecasts at compute looks save: compute spent and error rates, beside the stop rule alone
and the fixed design, on simulated curves read by the harness's own replay.

Each replicate is a study of a control and three arms, ``--seeds`` seed-matched seeds each, whose
curves are evaluated at 41 points C = 0, 250, ..., 10000 (the budget) of a compute axis: a seed's
curve is R(C) = R0 + (A + u - R0) / (1 + (C_mid / C)^B) plus evaluation noise, R0 = 0.4, B = 1.5,
u the seed's shift of the ceiling (sd 0.02), noise sd 0.01 (the forecast calibration's curves).
The control has A 0.7, C_mid 3000; ``better`` a higher ceiling (``--lead``), ``equal`` the
control's curve, ``worse`` a lower ceiling (``--lag``). Each replicate is built as a results frame
and read by ``harness.decide.sequential.compute.replay_compute_looks`` three times, under the same
decision settings (alpha 0.05, Bonferroni over the 3 comparisons, paired t, min_effect
``--min-effect``, catch-up = min_effect):

* fixed: every arm to the budget, read there at the full alpha (one look, at the budget);
* stop rule: compute looks at ``--at``, an arm stopped when decided worse by more than the
  catch-up allowance, the others read at the budget with the alpha left;
* forecasts: the same looks, each interim look's share of alpha split evenly between the stop
  rule and a forecast at the budget of every arm still running, called early where the forecast
  interval decides it (``compute_looks.forecast: true``).

Compute: each arm trains to its stop (the look's fraction) or the budget; the control trains as
far as its furthest arm (it stops once no arm compared with it goes on, as the runner stops it);
the share is the mean over the four conditions, against the fixed design's 1. Printed per
spending function: the compute share and what it saves; false claims (``equal`` called better or
worse); ``better`` called better and ``worse`` called worse; wrong calls (``better`` called worse
or equivalent, ``worse`` called better or equivalent); the share of replicates whose every verdict
is the fixed design's; and the share of arms called early by a forecast. Monte Carlo SE of a rate
p over R replicates: sqrt(p (1 - p) / R).

    python benchmarks/forecast_savings.py [--reps 200] [--seeds 5] [--at 0.25 0.5 1.0] [--lead 0.05]
        [--lag 0.05] [--min-effect 0.02]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pandas as pd

from harness import stats
from harness.decide.comparisons import arm_scores, compare_scores
from harness.decide.rules import DecisionRules, ReadOptions
from harness.decide.sequential.compute import replay_compute_looks
from harness.stats import saturating_curve
from harness.tracking.study_meta import StudyMeta

C = np.arange(0, 41) * 250.0
BUDGET, R0, B, C_MID, CEILING, SEED_SD, POINT_SD = 10_000.0, 0.4, 1.5, 3000.0, 0.7, 0.02, 0.01
PRIMARY, AXIS, ALPHA = "eval/accuracy", "compute/generated_tokens", 0.05
CONTROL = "control"


class Frame:
    """A study's results as the replay reads them (trials, curves, prompts, meta)."""

    def __init__(self, trials: pd.DataFrame, curves: pd.DataFrame, meta: StudyMeta):
        self.trials, self.curves, self.meta, self.prompts = trials, curves, meta, None


def draw(rng: np.random.Generator, ceilings: dict[str, float], seeds: int) -> dict[str, np.ndarray]:
    """condition -> [seeds, evaluations] curves."""
    return {
        name: saturating_curve(C, R0, a + SEED_SD * rng.normal(size=(seeds, 1)), B, C_MID)
        + POINT_SD * rng.normal(size=(seeds, C.size))
        for name, a in ceilings.items()
    }


def frame(curves: dict[str, np.ndarray], meta: StudyMeta) -> Frame:
    trials, rows = [], []
    for name, table in curves.items():
        for seed, curve in enumerate(table):
            tid = f"{name}-s{seed}"
            trials.append({"trial_id": tid, "arm": name, "seed": seed, "status": "completed", PRIMARY: curve[-1]})
            for step, (x, y) in enumerate(zip(C, curve)):
                rows += [(tid, name, seed, step, PRIMARY, float(y)), (tid, name, seed, step, AXIS, float(x))]
    columns = ["trial_id", "arm", "seed", "step", "metric", "value"]
    return Frame(pd.DataFrame(trials), pd.DataFrame(rows, columns=columns), meta)


def meta_of(conditions: list[str], seeds: int, at: list[float], spending: str, forecast: bool, min_effect: float):
    looks = {
        "at": at,
        "spending": spending,
        "catch_up": min_effect,
        "against": "control",
        "axis": AXIS,
        "budget": BUDGET,
        "point": "budget",
        "forecast": forecast,
    }
    return StudyMeta.from_dict(
        {
            "study": "forecast_savings",
            "primary_metric": PRIMARY,
            "direction": "maximize",
            "control": CONTROL,
            "conditions": conditions,
            "comparisons": [(c, CONTROL) for c in conditions if c != CONTROL],
            "seeds": list(range(seeds)),
            "seed_matched": True,
            "min_effect": min_effect,
            "metric_ranges": {PRIMARY: (0.0, 1.0)},
            "primary_at": {"point": "budget", "axis": AXIS, "budget": BUDGET},
            "compute_looks": looks,
        }
    )


def rules_of(results: Frame) -> DecisionRules:
    return DecisionRules.of(results.meta, ReadOptions(alpha=ALPHA))


def fixed(results: Frame) -> tuple[dict[str, str], float, int]:
    """The fixed design: every arm read at the budget at the full alpha, as the compute-look
    replay reads its last look (the same scores, test and Bonferroni family)."""
    rules = rules_of(results)
    scores = {c: arm_scores(results, c, rules.metric, failures=rules.failures) for c in results.meta.conditions}
    arms = [c for c in results.meta.conditions if c != CONTROL]
    pairs = [
        compare_scores(
            scores[a],
            scores[CONTROL],
            a,
            CONTROL,
            rules.metric,
            seed_matched=True,
            test=rules.test,
            failures=rules.failures,
            robustness=False,
        ).difference
        for a in arms
    ]
    verdicts = stats.decide(
        pairs,
        alpha=ALPHA,
        direction=rules.direction,
        min_effect=rules.min_effect,
        correction=rules.correction,
        family_size=len(arms),
    )
    return {a: v.label for a, v in zip(arms, verdicts)}, 1.0, 0


def looked(results: Frame) -> tuple[dict[str, str], float, int]:
    """The verdicts, the compute share (each arm to its stop, the control to its furthest arm's)
    and how many arms a forecast called."""
    rep = replay_compute_looks(results, rules_of(results))
    at = rep.design.at
    trained = {c: at[s.look - 1] if s.look is not None else 1.0 for c, s in rep.stops.items() if c != CONTROL}
    share = (sum(trained.values()) + max(trained.values())) / (len(trained) + 1)
    return rep.verdicts, share, sum(s.forecast for s in rep.stops.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--at", type=float, nargs="+", default=[0.25, 0.5, 1.0])
    parser.add_argument("--lead", type=float, default=0.05, help="the better arm's ceiling above the control's")
    parser.add_argument("--lag", type=float, default=0.05, help="the worse arm's ceiling below the control's")
    parser.add_argument("--min-effect", type=float, default=0.02)
    args = parser.parse_args()
    ceilings = {CONTROL: CEILING, "better": CEILING + args.lead, "equal": CEILING, "worse": CEILING - args.lag}
    gap = 1 / (1 + (C_MID / BUDGET) ** B)  # the share of a ceiling's difference reached at the budget
    print(
        f"control + 3 arms (better by {args.lead * gap:.3f} at the budget, equal, worse by {args.lag * gap:.3f}), "
        f"{args.seeds} seed-matched seeds each, 41 evaluations per curve, looks at {', '.join(map(str, args.at))} "
        f"of the budget, min_effect = catch-up {args.min_effect:g}, alpha {ALPHA:g} (Bonferroni over the 3 "
        f"comparisons), {args.reps} studies per row; MC SE of a rate near 0.5: {math.sqrt(0.25 / args.reps):.3f}"
    )
    designs = [("fixed (every arm to budget)", "obrien_fleming", False, fixed)]
    for spending in ("obrien_fleming", "pocock"):
        name = spending.replace("_", "-")
        designs += [(f"stop rule, {name}", spending, False, looked), (f"forecasts, {name}", spending, True, looked)]
    rng = np.random.default_rng(20261205)
    replicates = [draw(rng, ceilings, args.seeds) for _ in range(args.reps)]
    conditions = list(ceilings)
    fixed_verdicts = []
    print(
        f"{'design':30} {'compute':>7} {'saved':>6} {'false claim':>11} {'better':>7} {'worse':>7} "
        f"{'wrong call':>10} {'same verdicts':>13} {'forecast calls':>14} {'s':>5}"
    )
    for label, spending, forecast, read in designs:
        meta = meta_of(conditions, args.seeds, args.at, spending, forecast, args.min_effect)
        start = time.perf_counter()
        out = [read(frame(curves, meta)) for curves in replicates]
        seconds = time.perf_counter() - start
        verdicts = [v for v, _, _ in out]
        if not fixed_verdicts:
            fixed_verdicts = verdicts
        share = float(np.mean([s for _, s, _ in out]))
        false = np.mean([v["equal"] in ("better", "worse") for v in verdicts])
        power = np.mean([v["better"] == "better" for v in verdicts])
        worse = np.mean([v["worse"] == "worse" for v in verdicts])
        wrong = np.mean(
            [v["better"] in ("worse", "equivalent") or v["worse"] in ("better", "equivalent") for v in verdicts]
        )
        same = np.mean([v == f for v, f in zip(verdicts, fixed_verdicts)])
        calls = np.mean([n for _, _, n in out]) / 3
        print(
            f"{label:30} {share:7.3f} {1 - share:6.1%} {false:11.3f} {power:7.3f} {worse:7.3f} {wrong:10.3f} "
            f"{same:13.3f} {calls:14.3f} {seconds:5.0f}"
        )
    print(
        "compute: the mean share of the fixed design's (each arm to its stop, the control to its furthest arm's); "
        "better / worse: the rate each is called so; forecast calls: the share of arms a forecast called early"
    )


if __name__ == "__main__":
    main()
