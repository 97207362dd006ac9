"""What looks over compute save: compute spent and error rates, beside the fixed design.

Simulates studies of a control and ``--arms`` arms, ``--seeds`` seeds each, read at compute looks
``--at`` (fractions of the budget), with seed scores of sd 1 (normal, heavy-tailed t with 3 df,
or per-prompt 0/1 means: ``--noise``) whose deviations at successive looks are correlated 0.7.
Some arms are clear losers (trailing the control by ``--gap`` sd at every look), one arm is
better by ``--effect`` sd at the budget (and level with the control before), the rest equal the
control. Two designs read the same scores:

* compute looks (``harness.stats.compute_looks``): an interim look stops an arm whose interval
  against the control (Bonferroni over the arms, the look's share of alpha by the spending
  function on the compute fraction) lies below ``-catch_up``; the budget reads the others with
  the alpha left;
* fixed: every arm to the budget, read at the full alpha there.

Prints, per spending function and number of losers: the compute spent (share of the fixed
design's), the rate at which the equal arms are called worse or better (false claims: any arm in
the study), the rate the better arm is called better (power), the rate the losers are called
worse, and how often the two designs give every arm the same verdict. Target: 40% less compute
to the same verdicts. ``--calibration`` prints the calibration table of README instead (arms
equal to the control, a worse arm, curves that cross within and beyond the allowance).

    python benchmarks/compute_look_savings.py [--reps 20000] [--arms 3] [--losers 1 2] [--seeds 8] [--at 0.25 0.5 1.0]
        [--gap 2.0] [--effect 1.5] [--catch-up 0.25] [--noise normal] [--calibration]
"""

from __future__ import annotations

import argparse

import numpy as np

from harness.stats import label_of, welch_test
from harness.stats.compute_looks import Design, draw_scores, look_alphas, monte_carlo_se, simulate, stop_rate

ALPHA = 0.05
MIN_EFFECT = 0.5  # sd: the equivalence margin of the verdicts at the budget


def units(noise: str) -> tuple[float, float]:
    """(base, scale): 0/1 scores sit around 0.5 with a seed sd of 0.08, so the sd units scale by it."""
    return (0.5, 0.08) if noise == "binary" else (0.0, 1.0)


def fixed_labels(scores: np.ndarray, margin: float) -> np.ndarray:
    """Every arm against the control at the budget, at the full alpha (Bonferroni over the arms)."""
    arms = scores.shape[1] - 1
    t = welch_test(scores[:, 1:, :, -1], scores[:, :1, :, -1], alpha=ALPHA / arms)
    return label_of(t.ci_low, t.ci_high, margin=margin)[0]


def means_of(arms: int, losers: int, looks: int, gap: float, effect: float) -> np.ndarray:
    """True means [control + arms, looks]: the first ``losers`` arms trail by ``gap`` throughout,
    the next one is level until the budget and better by ``effect`` there, the rest equal."""
    means = np.zeros((arms + 1, looks))
    means[1 : 1 + losers] = -gap
    if losers < arms:
        means[1 + losers, -1] = effect
    return means


def savings(args) -> None:
    rng = np.random.default_rng(0)
    looks = len(args.at)
    base, scale = units(args.noise)
    print(
        f"control + {args.arms} arms, {args.seeds} seeds each, {args.noise} seed scores (sd 1), looks at "
        f"{', '.join(f'{f:g}' for f in args.at)} of the budget, losers trail by {args.gap:g} sd throughout, one arm "
        f"better by {args.effect:g} sd at the budget, catch-up {args.catch_up:g} sd, min_effect {MIN_EFFECT:g} sd, "
        f"alpha {ALPHA} (Bonferroni over the arms), {args.reps} studies per row; MC SE of a rate near 0.05: "
        f"{monte_carlo_se(0.05, args.reps):.4f}"
    )
    head = (
        f"{'losers':>6}  {'design':<31}{'compute':>8}{'saved':>7}{'false worse':>12}{'false better':>13}"
        f"{'power':>7}{'losers worse':>13}{'same verdicts':>14}"
    )
    print(head)
    for losers in [n for n in args.losers if 0 < n < args.arms]:
        means = means_of(args.arms, losers, looks, args.gap, args.effect)
        scores = draw_scores(rng, base + scale * means, seeds=args.seeds, reps=args.reps, noise=args.noise, sd=scale)
        fixed = fixed_labels(scores, MIN_EFFECT * scale)
        equal = list(range(losers + 1, args.arms))  # arm indices (0-based over the arms) equal to the control
        better = losers
        rows = [("fixed (every arm to budget)", fixed, np.ones(args.reps))]
        for spending in ("obrien_fleming", "pocock"):
            design = Design(tuple(args.at), ALPHA, spending, args.catch_up * scale, "control", MIN_EFFECT * scale)
            out = simulate(design, scores)
            rows.append((f"compute looks, {spending.replace('_', '-')}", out.labels, out.compute))
        for name, labels, compute in rows:
            eq = labels[:, equal] if equal else np.zeros((args.reps, 0), dtype=object)
            false_worse = f"{(eq == 'worse').any(axis=1).mean():.4f}" if equal else "-"
            false_better = f"{(eq == 'better').any(axis=1).mean():.4f}" if equal else "-"
            power = float((labels[:, better] == "better").mean())
            losers_worse = float((labels[:, :losers] == "worse").all(axis=1).mean())
            same = float((labels == fixed).all(axis=1).mean())
            print(
                f"{losers:>6}  {name:<31}{compute.mean():>8.3f}{1 - compute.mean():>7.1%}{false_worse:>12}"
                f"{false_better:>13}{power:>7.3f}{losers_worse:>13.3f}{same:>14.3f}"
            )
    print(
        "compute: the mean share of the fixed design's compute (every condition's seeds to the budget, "
        "compute proportional to the fraction trained); the control always runs to the budget"
    )


def calibration(args) -> None:
    """The README's calibration table: each scenario's stop and verdict rates, with the bound each
    is checked against and its Monte Carlo SE."""
    rng = np.random.default_rng(1)
    at = tuple(args.at)
    c = args.catch_up
    scenarios = [
        ("3 arms equal to the control", np.zeros((4, len(at)))),
        ("1 arm worse by 1.5 sd throughout", np.array([[0.0] * len(at), [-1.5] * len(at)])),
        (
            f"1 arm crossing within the allowance (-{c:g} sd, then +1 sd at the budget)",
            np.array([[0.0] * len(at), [-c] * (len(at) - 1) + [1.0]]),
        ),
        (
            f"1 arm crossing beyond it (-{4 * c:g} sd, then +1 sd at the budget)",
            np.array([[0.0] * len(at), [-4 * c] * (len(at) - 1) + [1.0]]),
        ),
    ]
    print(
        f"looks at {', '.join(f'{f:g}' for f in at)}, {args.seeds} seeds per arm, catch-up {c:g} sd, alpha {ALPHA}, "
        f"{args.reps} studies per row (binary: 64 prompts, seed sd 0.08 around a mean of 0.5, the scenario's sd "
        "units scaled by 0.08); MC SE of a rate p is sqrt(p(1-p)/reps)"
    )
    print("| scores | spending | scenario | stopped early | worse | better | bound | MC SE |")
    print("|---|---|---|---|---|---|---|---|")
    for noise in ("normal", "t3", "binary"):
        base, scale = units(noise)
        for spending in ("obrien_fleming", "pocock"):
            for name, means in scenarios:
                arms = means.shape[0] - 1
                scores = draw_scores(rng, base + scale * means, seeds=args.seeds, reps=args.reps, noise=noise, sd=scale)
                design = Design(at, ALPHA, spending, c * scale, "control", MIN_EFFECT * scale)
                out = simulate(design, scores)
                stopped = float((out.stopped >= 0).any(axis=1).mean())
                worse, better = out.rate("worse"), out.rate("better")
                if arms > 1:
                    bound, rate = ALPHA / 2, max(worse, better)
                    shown = f"{ALPHA / 2:g} per side"
                elif "within" in name:
                    bound, rate = stop_rate(at, ALPHA, spending, family=arms), stopped
                    shown = f"{bound:.4f}"
                else:
                    bound, rate, shown = None, stopped, "-"
                se = monte_carlo_se(bound if bound is not None else rate, args.reps)
                flag = "" if bound is None or rate <= bound + 3 * se else " EXCEEDS"
                print(
                    f"| {noise} | {spending.replace('_', '-')} | {name} | {stopped:.4f} | {worse:.4f} | "
                    f"{better:.4f} | {shown}{flag} | {se:.4f} |"
                )
    alphas = ", ".join(
        f"{s.replace('_', '-')}: " + " / ".join(f"{a:.2e}" for a in look_alphas(at, ALPHA, s))
        for s in ("obrien_fleming", "pocock")
    )
    print(f"each look's alpha ({alphas})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20_000)
    parser.add_argument("--arms", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--at", type=float, nargs="+", default=[0.25, 0.5, 1.0])
    parser.add_argument("--losers", type=int, nargs="+", default=[1, 2], help="how many arms are clear losers")
    parser.add_argument("--gap", type=float, default=2.0, help="how far the losers trail, in seed sds")
    parser.add_argument("--effect", type=float, default=1.5, help="the better arm's lead at the budget, in seed sds")
    parser.add_argument("--catch-up", type=float, default=0.25, help="the allowance, in seed sds")
    parser.add_argument("--noise", default="normal", choices=["normal", "t3", "binary"])
    parser.add_argument("--calibration", action="store_true", help="print the calibration table instead")
    args = parser.parse_args()
    calibration(args) if args.calibration else savings(args)


if __name__ == "__main__":
    main()
