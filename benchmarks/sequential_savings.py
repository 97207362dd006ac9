"""What a sequential study saves: trials spent and error rates, beside fixed designs.

Simulates studies of ``--arms`` arms against one control on per-seed scores (sd 1; normal, or
heavy-tailed t with 3 df scaled to sd 1) with min_effect ``--min-effect`` (in sd units), at true
differences of 0, min_effect / 2, min_effect and 2 x min_effect. The maximum is what the
harness's planner asks of a fixed design: the fewest seeds per arm that decide with 80% both at
a true 0 (equivalent) and at min_effect (better). Three designs are read the same way (better /
worse: the interval excludes 0; equivalent: it lies inside +-min_effect; Bonferroni over arms):

* sequential: a look every ``--every`` seeds up to that maximum (or ``--looks``), each undecided
  arm read on its look's repeated interval (``harness.stats.Look``); a decided arm stops, the
  control runs while any arm does;
* fixed, same maximum: every arm at the maximum;
* fixed, same power: the fewest seeds per arm whose power at min_effect is at least the
  sequential design's (found by simulation).

Prints the mean number of trials (arms + control) and the rate of each verdict per design and
effect, and the saving against each fixed design. Target: at least 30% fewer trials on average
over the four effects, with no loss of power at min_effect and the false-positive rate at 0
within alpha.

    python benchmarks/sequential_savings.py [--reps 20000] [--arms 1] [--spending obrien_fleming]
        [--min-effect 1.0] [--every 2 | --looks 4 8 12 ...] [--dist normal]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy import special

from harness.stats import Look, label_of, welch_test

ALPHA = 0.05


def draw(rng, dist: str, shape) -> np.ndarray:
    if dist == "normal":
        return rng.standard_normal(shape)
    return rng.standard_t(3, shape) / math.sqrt(3.0)  # t3 has variance 3


def fixed(rng, dist, reps, arms, n, delta, margin):
    """Labels [reps, arms] of a fixed design at n seeds per arm, and its trials."""
    t = welch_test(draw(rng, dist, (reps, arms, n)) + delta, draw(rng, dist, (reps, 1, n)), alpha=ALPHA / arms)
    return label_of(t.ci_low, t.ci_high, margin=margin)[0], np.full(reps, (arms + 1) * n)


def sequential(rng, dist, reps, arms, looks, spending, delta, margin):
    """Labels [reps, arms] of a sequential design, and the trials each study spent."""
    arm = draw(rng, dist, (reps, arms, looks[-1])) + delta
    control = draw(rng, dist, (reps, 1, looks[-1]))
    label = np.full((reps, arms), "inconclusive", dtype=object)
    stopped = np.full((reps, arms), -1)
    for k, n in enumerate(looks):
        z = Look(tuple(looks[: k + 1]), looks[-1], spending).bound(ALPHA / arms)
        t = welch_test(arm[..., :n], control[..., :n])
        half = special.stdtrit(t.df, special.ndtr(z)) * t.se
        now, _ = label_of(t.diff - half, t.diff + half, margin=margin)
        fresh = (stopped < 0) & (now != "inconclusive")
        label = np.where(fresh, now, label)
        stopped = np.where(fresh, k, stopped)
    seeds = np.where(stopped >= 0, np.asarray(looks)[np.maximum(stopped, 0)], looks[-1])
    return label, seeds.sum(axis=1) + seeds.max(axis=1)


def rates(label) -> dict[str, float]:
    return {name: float(np.mean(label == name)) for name in ("better", "worse", "equivalent", "inconclusive")}


def planned_maximum(rng, dist, reps, arms, margin) -> int:
    """The fewest seeds per arm at which the fixed design decides with 80% at 0 and at min_effect."""
    for n in range(2, 400):
        at_zero = rates(fixed(rng, dist, reps, arms, n, 0.0, margin)[0])["equivalent"]
        at_effect = rates(fixed(rng, dist, reps, arms, n, margin, margin)[0])["better"]
        if min(at_zero, at_effect) >= 0.8:
            return n
    raise SystemExit("no maximum up to 400 seeds per arm: raise --min-effect")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20_000)
    parser.add_argument("--arms", type=int, default=1)
    parser.add_argument("--spending", default="obrien_fleming", choices=["obrien_fleming", "pocock"])
    parser.add_argument("--min-effect", type=float, default=1.0, help="in seed sds")
    parser.add_argument("--every", type=int, default=2, help="seeds per arm between looks")
    parser.add_argument("--looks", type=int, nargs="+", default=None, help="explicit looks (the last: the maximum)")
    parser.add_argument("--dist", default="normal", choices=["normal", "t3"])
    args = parser.parse_args()
    arms, reps, margin = args.arms, args.reps, args.min_effect
    rng = np.random.default_rng(0)
    n_max = args.looks[-1] if args.looks else planned_maximum(rng, args.dist, reps // 4, arms, margin)
    looks = args.looks or sorted({*range(args.every * 2, n_max, args.every), n_max})

    seq_power = rates(sequential(rng, args.dist, reps, arms, looks, args.spending, margin, margin)[0])["better"]
    n_same_power = next(
        n
        for n in range(2, 4 * n_max)
        if rates(fixed(rng, args.dist, reps, arms, n, margin, margin)[0])["better"] >= seq_power
    )
    designs = {
        f"sequential ({args.spending})": lambda d: sequential(
            rng, args.dist, reps, arms, looks, args.spending, d, margin
        ),
        f"fixed, same maximum (n={n_max})": lambda d: fixed(rng, args.dist, reps, arms, n_max, d, margin),
        f"fixed, same power (n={n_same_power})": lambda d: fixed(rng, args.dist, reps, arms, n_same_power, d, margin),
    }
    print(
        f"{arms} arm(s) vs a control, {args.dist} seed scores (sd 1), min_effect {margin:g} sd, maximum {n_max} "
        f"seeds per arm (the fixed design deciding at 0 and at min_effect with 80%), looks {looks}, alpha {ALPHA} "
        f"(Bonferroni), {reps} studies per cell; MC SE of a rate near 0.05: {math.sqrt(0.05 * 0.95 / reps):.4f}"
    )
    print(f"{'true diff':>10}  {'design':<34}{'trials':>8}{'better':>9}{'worse':>8}{'equiv':>8}{'inconcl':>9}")
    spent = {name: [] for name in designs}
    for delta in (0.0, margin / 2, margin, 2 * margin):
        for name, run in designs.items():
            label, trials = run(delta)
            r = rates(label)
            spent[name].append(trials.mean())
            print(
                f"{delta:>10.3f}  {name:<34}{trials.mean():>8.1f}{r['better']:>9.3f}{r['worse']:>8.3f}"
                f"{r['equivalent']:>8.3f}{r['inconclusive']:>9.3f}"
            )
    names = list(designs)
    mean_seq = float(np.mean(spent[names[0]]))
    for name in names[1:]:
        saving = 1 - mean_seq / float(np.mean(spent[name]))
        print(
            f"mean trials over the four effects: sequential {mean_seq:.1f} vs {name} "
            f"{np.mean(spent[name]):.1f}: {saving:.0%} fewer (target >= 30%: {'met' if saving >= 0.3 else 'NOT met'})"
        )
    print(f"power at min_effect: sequential {seq_power:.3f}; the same-power fixed design needs {n_same_power} seeds")


if __name__ == "__main__":
    main()
