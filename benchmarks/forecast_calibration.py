"""Calibration of the forecast at the budget (harness.stats.forecast), by simulation.

Each scenario draws, for an arm and a control of ``--seeds`` seeds each (independent seeds, analysed
paired by seed as a seed-matched study is), curves at 41 evaluations C = 0, 250, ..., 10000 (the
budget): a seed's curve is R(C) = R0 + (A + u - R0) / (1 + (C_mid / C)^B) plus evaluation noise e,
R0 = 0.4, B = 1.5, u the seed's shift of the ceiling (sd 0.02), e per evaluation (sd 0.01):

* value / value-t3: one arm's own value at the budget (A 0.7, C_mid 3000; normal or t3 noise), no
  verdict read;
* equal / equal-t3 / equal-binary: arm = control (A 0.7, C_mid 3000); normal noise; Student t3
  noise scaled to the same sd; binary-mean scores (each evaluation the mean of 100 Bernoulli draws
  at the curve's value, sd about 0.046, on top of the seed shift);
* equal-prompts / equal-prompts-fixed: arm = control, each evaluation scored on 40 prompts, each
  prompt with its own shift of each arm's ceiling (arm x prompt, sd 0.1: the 40 drawn prompts
  favour one arm by sd 0.1 * sqrt(2 / 40) = 0.022 at the ceiling) and each score with noise sd
  0.05; the same scores forecast with the prompt jackknife, and with the prompts treated as fixed
  (seeds only);
* cross: the arm starts slower and ends higher (arm A 0.8, C_mid 4000; control A 0.7, C_mid 1500):
  the arm is 0.073 behind at 25% of the budget and 0.036 ahead at the budget;
* misspecified-loglinear: curves the family does not fit: R0 + g log(1 + C / 1500) / log(1 + 10000 /
  1500) (no ceiling), arm gain 0.35, control gain 0.3, same seed shift and noise;
* misspecified-decline: the arm follows the control's curve up to 60% of the budget and then loses
  0.05 per 10% of the budget (over-optimisation), which no look before 60% can see.

At looks at 25% and 50% of the budget the arm - control difference at the budget is forecast and
read by ``forecast_verdict`` at alpha 0.05 (one comparison, min_effect 0.02). Coverage: the
forecast interval at 95% contains the true difference at the budget. False verdict: "better" or
"worse" when arm = control; against a true difference beyond min_effect, the opposite sign or
"equivalent". Right call: "equivalent" when arm = control, the true sign otherwise (the early calls
that save compute). Rates are over replicates with a forecast (``given``: the share that had one;
without one the look calls nothing). Monte Carlo SE of a rate p over R replicates:
sqrt(p (1 - p) / R).

    python benchmarks/forecast_calibration.py [--reps 300] [--seeds 3] [--markdown]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from harness.stats import saturating_curve
from harness.stats.forecast import Forecast, forecast_difference, forecast_value, forecast_verdict

C = np.arange(0, 41) * 250.0
BUDGET = 10_000.0
R0, B, SEED_SD, POINT_SD, PROMPTS = 0.4, 1.5, 0.02, 0.01, 100
ALPHA, MIN_EFFECT = 0.05, 0.02
#: per-prompt scenarios: prompts scored, the arm x prompt sd (on the ceiling) and each score's noise sd
SCORED_PROMPTS, ARM_PROMPT_SD, SCORE_SD = 40, 0.1, 0.05
LOOKS = (0.25, 0.5)


def saturating(a: float, c_mid: float):
    return lambda c, u: saturating_curve(c, R0, a + u, B, c_mid)


def loglinear(gain: float):
    return lambda c, u: R0 + (gain + u) * np.log1p(c / 1500.0) / math.log1p(BUDGET / 1500.0)


def declining(base):
    return lambda c, u: base(c, u) - 0.05 * np.maximum(0.0, c - 6000.0) / 1000.0


#: scenario -> (arm curve, control curve, noise); no control: the arm's own value at the budget
SCENARIOS = {
    "value": (saturating(0.7, 3000), None, "normal"),
    "value-t3": (saturating(0.7, 3000), None, "t3"),
    "equal": (saturating(0.7, 3000), saturating(0.7, 3000), "normal"),
    "equal-t3": (saturating(0.7, 3000), saturating(0.7, 3000), "t3"),
    "equal-binary": (saturating(0.7, 3000), saturating(0.7, 3000), "binary"),
    "equal-prompts": (saturating(0.7, 3000), saturating(0.7, 3000), "prompts"),
    "equal-prompts-fixed": (saturating(0.7, 3000), saturating(0.7, 3000), "prompts-fixed"),
    "cross": (saturating(0.8, 4000), saturating(0.7, 1500), "normal"),
    "misspecified-loglinear": (loglinear(0.35), loglinear(0.3), "normal"),
    "misspecified-decline": (declining(saturating(0.7, 3000)), saturating(0.7, 3000), "normal"),
}


def draw(rng: np.random.Generator, curve, noise: str, reps: int, seeds: int) -> np.ndarray:
    """[reps, seeds, evaluations] curves, all replicates at once; per-prompt noise: [reps, seeds,
    evaluations, prompts] scores."""

    def standard(size):
        return rng.standard_t(3, size) / math.sqrt(3.0) if noise == "t3" else rng.normal(size=size)

    mean = curve(C, SEED_SD * standard((reps, seeds, 1)))
    if noise == "binary":
        return rng.binomial(PROMPTS, np.clip(mean, 0.0, 1.0)) / PROMPTS
    if noise.startswith("prompts"):
        arm_by_prompt = ARM_PROMPT_SD * rng.normal(size=(reps, 1, 1, SCORED_PROMPTS))
        shift = SEED_SD * standard((reps, seeds, 1, 1))
        return curve(C[:, None], shift + arm_by_prompt) + SCORE_SD * standard((reps, seeds, C.size, SCORED_PROMPTS))
    return mean + POINT_SD * standard((reps, seeds, C.size))


def mc_se(p: float, reps: int) -> float:
    return math.sqrt(p * (1 - p) / reps) if reps else math.nan


def run(name: str, look: float, reps: int, seeds: int, rng: np.random.Generator) -> dict:
    arm_curve, control_curve, noise = SCENARIOS[name]
    truth = float(arm_curve(BUDGET, 0.0) - (0.0 if control_curve is None else control_curve(BUDGET, 0.0)))
    arms = draw(rng, arm_curve, noise, reps, seeds)
    controls = arms if control_curve is None else draw(rng, control_curve, noise, reps, seeds)
    covered = false = right = given = 0
    if truth == 0:
        wrong, correct = {"better", "worse"}, "equivalent"
    else:
        wrong, correct = {"equivalent", "worse" if truth > 0 else "better"}, "better" if truth > 0 else "worse"
    xs = [C] * seeds
    for arm, control in zip(arms, controls):
        if control_curve is None:
            f = forecast_value(xs, list(arm), look=look * BUDGET, budget=BUDGET, a_bounds=(0, 1))
        elif noise == "prompts":
            means = list(arm.mean(axis=-1)), list(control.mean(axis=-1))
            f = forecast_difference(
                xs,
                means[0],
                xs,
                means[1],
                look=look * BUDGET,
                budget=BUDGET,
                a_bounds=(0, 1),
                arm_prompt_scores=list(arm),
                control_prompt_scores=list(control),
            )
        else:
            if noise == "prompts-fixed":
                arm, control = arm.mean(axis=-1), control.mean(axis=-1)
            f = forecast_difference(
                xs, list(arm), xs, list(control), look=look * BUDGET, budget=BUDGET, a_bounds=(0, 1)
            )
        if not isinstance(f, Forecast):
            continue
        given += 1
        low, high = f.interval(1 - ALPHA)
        covered += low <= truth <= high
        if control_curve is not None:
            label = forecast_verdict([f], alpha=ALPHA, min_effect=MIN_EFFECT)[0].label
            false += label in wrong
            right += label == correct
    n = max(given, 1)
    verdicts = control_curve is not None
    cover, false_rate, right_rate = (
        covered / n,
        false / n if verdicts else math.nan,
        right / n if verdicts else math.nan,
    )
    return {
        "scenario": name,
        "look": look,
        "truth": truth,
        "given": given / reps,
        "coverage": cover,
        "coverage_se": mc_se(cover, given),
        "false": false_rate,
        "false_se": mc_se(false_rate, given),
        "right": right_rate,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--scenarios", nargs="*", default=list(SCENARIOS), choices=list(SCENARIOS))
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = parser.parse_args()
    rng = np.random.default_rng(2026)
    start = time.perf_counter()
    rows = [run(s, look, args.reps, args.seeds, rng) for s in args.scenarios for look in LOOKS]
    if args.markdown:
        print("| scenario | look | truth | given | coverage (95%) +- MC SE | false verdict +- MC SE | right call |")
        print("|---|---|---|---|---|---|---|")
    for r in rows:
        cells = (
            f"{r['scenario']}",
            f"{r['look']:.0%}",
            f"{r['truth']:+.3f}",
            f"{r['given']:.2f}",
            f"{r['coverage']:.3f} +- {r['coverage_se']:.3f}",
            f"{r['false']:.3f} +- {r['false_se']:.3f}" if math.isfinite(r["false"]) else "-",
            f"{r['right']:.3f}" if math.isfinite(r["right"]) else "-",
        )
        print("| " + " | ".join(cells) + " |" if args.markdown else "  ".join(cells))
    print(f"\n{args.reps} replicates per row, {args.seeds} seeds per arm, {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
