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
    """The README's calibration table, one row per kind of score and spending function: the false
    claims on three arms equal to the control (bound alpha/2 per side, for the family), the stop
    rate of an arm crossing within the allowance (bound: ``stop_rate``) and beyond it (no bound),
    and a worse arm's stops and verdicts; each bound with 3 Monte Carlo SE beside it."""
    rng = np.random.default_rng(1)
    at, c, reps = tuple(args.at), args.catch_up, args.reps
    flat = [0.0] * len(at)
    equal, worse_arm = np.zeros((4, len(at))), np.array([flat, [-1.5] * len(at)])
    within = np.array([flat, [-c] * (len(at) - 1) + [1.0]])
    beyond = np.array([flat, [-4 * c] * (len(at) - 1) + [1.0]])
    print(
        f"looks at {', '.join(f'{f:g}' for f in at)}, {args.seeds} seeds per arm, catch-up {c:g} sd, alpha {ALPHA} "
        f"(Bonferroni over the arms), {reps} studies per cell; crossing arms trail by {c:g} sd (within) or "
        f"{4 * c:g} sd (beyond) at the interim looks and lead by 1 sd at the budget; the worse arm trails by 1.5 sd "
        "throughout; binary: 64 prompts per seed, seed sd 0.08 around 0.5, every sd unit scaled by 0.08"
    )
    print(
        "| scores | spending | equal arms: false worse / better (bound) | crossing within: stopped (bound) "
        "| crossing beyond: stopped | worse arm: stopped early / called worse |"
    )
    print("|---|---|---|---|---|---|")
    for noise in ("normal", "t3", "binary"):
        base, scale = units(noise)
        for spending in ("obrien_fleming", "pocock"):
            design = Design(at, ALPHA, spending, c * scale, "control", MIN_EFFECT * scale)

            def run(means, design=design, base=base, scale=scale, noise=noise):
                scores = draw_scores(rng, base + scale * means, seeds=args.seeds, reps=reps, noise=noise, sd=scale)
                return simulate(design, scores)

            null, cross, late, loser = run(equal), run(within), run(beyond), run(worse_arm)
            side = ALPHA / 2
            stop_bound = stop_rate(at, ALPHA, spending, family=1)
            print(
                f"| {noise} | {spending.replace('_', '-')} | {null.rate('worse'):.4f} / {null.rate('better'):.4f} "
                f"(<= {side:g} + {3 * monte_carlo_se(side, reps):.4f}) | {cross.stopped_rate(0):.4f} "
                f"(<= {stop_bound:.4f} + {3 * monte_carlo_se(stop_bound, reps):.4f}) | {late.stopped_rate(0):.4f} "
                f"| {loser.stopped_rate(0):.3f} / {loser.rate('worse', 0):.3f} |"
            )
    alphas = "; ".join(
        f"{s.replace('_', '-')} " + " / ".join(f"{a:.3g}" for a in look_alphas(at, ALPHA, s))
        for s in ("obrien_fleming", "pocock")
    )
    print(f"each look's alpha: {alphas}")


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
