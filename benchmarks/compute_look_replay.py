"""Compute looks replayed on the stored baselines: the compute the early design would have spent,
and whether its verdicts match the full run's.

For each folder of ``baselines/`` whose evaluations were stored along the way (``per_prompt.csv.gz``
at several steps, or ``curves.csv.gz``), the study file ``studies/<name>.yaml`` gives the
pre-registered comparison (control, metric, test, min_effect, ``primary_at``), and the stored
trials are replayed with :func:`harness.decide.sequential.compute.replay_compute_looks` under
looks at 25%, 50% and 100% of the budget (O'Brien-Fleming and Pocock spending; the catch-up
allowance is the study's min_effect, the default, or 0 where it has none), against the control,
alpha 0.05 with Bonferroni over the comparisons (the report's defaults).

Where the budget is counted in steps (``primary_at: final``, every baseline but one) a look is
moved to the first stored evaluation at or after its fraction, so it reads an evaluation the
early design would have had, never interpolating towards a later one; looks that land on the same
evaluation are one look, and a baseline whose first evaluation after 0 is the budget has no look
to stop at (its row says so). Where the budget is in FLOPs (compute_matched) the looks read the
curve by the ``primary_at`` interpolation between the evaluations around the point (every 4 steps
there), as the study reads its budget. A stored curve without the primary metric's per-step value
takes the mean over prompts of its per-prompt scores at each evaluation (the same number for a
greedy accuracy; checked against the stored final value).

The full run's verdicts are the fixed design's at the budget (every arm, the whole alpha): the
report's verdicts without the looks. Compute is summed over trials on the budget's axis: a stopped
trial up to its look's point (the first history row at or past it), every other trial to the
budget.

With ``--forecast`` the looks also call verdicts from the fitted curve (``compute_looks.forecast``:
half of each interim look's alpha to the forecast), where a baseline's curves have the
evaluations a forecast needs (3 past the start before the look, and before half of it).

    python benchmarks/compute_look_replay.py [--baselines DIR] [--studies DIR] [--forecast]
"""

from __future__ import annotations

import argparse
import dataclasses
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from harness import stats
from harness.decide.comparisons import arm_scores, study_pairs
from harness.decide.frames import conditions_of
from harness.decide.rules import DecisionRules, ReadOptions
from harness.decide.sequential.compute import replay_compute_looks
from harness.engine.spec import METRIC_RANGES
from harness.study.expand import comparisons
from harness.study.load import load_study
from harness.study.sections import amount
from harness.tracking.study_meta import ComputeLookDesign, StudyMeta

REPO = Path(__file__).resolve().parents[1]
FRACTIONS = (0.25, 0.5, 1.0)
SPENDINGS = ("obrien_fleming", "pocock")


@dataclass
class Stored:
    """A baseline's trials, curves and per-prompt scores, as the decisions read a study's."""

    trials: pd.DataFrame
    curves: pd.DataFrame
    meta: StudyMeta
    prompts: pd.DataFrame | None


def load(folder: Path, study_file: Path) -> tuple[Stored, list[str]]:
    """The baseline as a results object, and notes on how it was read."""
    study = load_study(study_file)
    trials = pd.read_csv(folder / "per_seed.csv")
    prompts = pd.read_csv(folder / "per_prompt.csv.gz") if (folder / "per_prompt.csv.gz").exists() else None
    curves = pd.read_csv(folder / "curves.csv.gz") if (folder / "curves.csv.gz").exists() else None
    metric, notes = study.primary_metric, []
    if curves is None or not (curves["metric"] == metric).any():
        if prompts is None:
            raise ValueError("no per-step curves stored")
        means = prompts[prompts["metric"] == metric].groupby(["trial_id", "arm", "seed", "step"], as_index=False)
        curves = means["value"].mean().assign(metric=metric)[["trial_id", "arm", "seed", "step", "metric", "value"]]
        last = curves.sort_values("step").groupby("trial_id")["value"].last()
        stored = trials.set_index("trial_id")[metric]
        gap = float(np.nanmax(np.abs(last - stored.loc[last.index])))
        notes.append("curve: per-prompt means" + (" (= the stored finals)" if gap < 1e-9 else f" (off by {gap:.1e})"))
    seeds = {c: sorted(trials.loc[trials["arm"] == c, "seed"].astype(int)) for c in trials["arm"].unique()}
    meta = StudyMeta(
        study=study.name,
        primary_metric=metric,
        direction=study.direction,
        min_effect=study.min_effect,
        test=study.test,
        failures=study.failures,
        metric_ranges=dict(METRIC_RANGES),
        control=study.control,
        conditions=list(study.conditions()),
        comparisons=[tuple(c) for c in comparisons(study)],
        seeds=sorted({s for v in seeds.values() for s in v}),  # those run (a sequential study ran part of its pool)
        seed_matched=len({tuple(v) for v in seeds.values()}) <= 1,
        primary_at=study.primary_at.model_dump(),
    )
    return Stored(trials, curves, meta, prompts), notes


def design_for(results: Stored, spending: str, steps: int, forecast: bool) -> tuple[ComputeLookDesign | None, str]:
    """The 25/50/100% design on the baseline's budget (on steps: each look moved to the first
    evaluation at or after it), or None and why no look can stop an arm."""
    meta = results.meta
    catch_up = meta.min_effect or 0.0
    primary = meta.primary_at
    if primary["point"] != "final":
        at = list(FRACTIONS)
        design = ComputeLookDesign(
            at, spending, catch_up, "control", primary["axis"], primary["budget"], "budget", forecast
        )
        return design, f"looks at {', '.join(f'{f:g}' for f in at)} of {primary['budget']:.1e} on {primary['axis']}"
    evals = np.sort(results.curves.loc[results.curves["metric"] == meta.primary_metric, "step"].unique())
    at = sorted({float(evals[evals >= f * steps][0]) / steps for f in FRACTIONS})
    if len(at) < 2:
        return None, f"no evaluation between 0 and the budget ({steps} steps; evaluations at {evals.tolist()})"
    design = ComputeLookDesign(at, spending, catch_up, "control", "step", float(steps), "budget", forecast)
    return design, f"looks at steps {', '.join(f'{f * steps:g}' for f in at)} of {steps}"


def full_verdicts(results: Stored, rules: DecisionRules) -> dict[str, str]:
    """The fixed design's verdicts at the budget: every arm, the whole alpha."""
    scores = {c: arm_scores(results, c, rules.metric, failures=rules.failures) for c in conditions_of(results)}
    pairs = study_pairs(results, scores, rules)
    verdicts = stats.decide(
        [p.difference for p in pairs],
        alpha=rules.alpha,
        direction=rules.direction,
        min_effect=rules.min_effect,
        correction=rules.correction,
    )
    return {p.condition: v.label for p, v in zip(pairs, verdicts)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baselines", type=Path, default=REPO / "baselines")
    parser.add_argument("--studies", type=Path, default=REPO / "studies")
    parser.add_argument("--forecast", action="store_true", help="the looks also call verdicts from the fitted curve")
    args = parser.parse_args()
    print(
        "| baseline | spending | looks | worse in the full run | stopped (look) | compute spent / full | saved "
        "| verdicts as the full run |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for folder in sorted(p for p in args.baselines.iterdir() if (p / "per_seed.csv").exists()):
        study_file = args.studies / f"{folder.name}.yaml"
        if not study_file.exists() or not (folder / "per_prompt.csv.gz").exists():
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                results, notes = load(folder, study_file)
        except Exception as err:  # noqa: BLE001 - a baseline that cannot be read is a row saying why
            print(f"| {folder.name} | - | cannot be read: {err} | | | | | |")
            continue
        study = load_study(study_file)
        if study.compute_looks is not None:  # its arms stopped at its own looks: nothing ran to the budget
            print(f"| {folder.name} | - | run with compute looks itself: no full run to compare with | | | | | |")
            continue
        steps = int(study.train.steps)
        rules = DecisionRules.of(results.meta, ReadOptions(alpha=0.05))
        full = full_verdicts(results, rules)
        for spending in SPENDINGS:
            label = spending.replace("_", "-") + (", forecasts" if args.forecast else "")
            design, looks = design_for(results, spending, steps, args.forecast)
            if design is None:
                print(f"| {folder.name} | {label} | {looks} | | | | | |")
                continue
            run = dataclasses.replace(results, meta=dataclasses.replace(results.meta, compute_looks=design))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rep = replay_compute_looks(run, rules)
            worse = ", ".join(c for c, v in full.items() if v == "worse") or "none"
            stopped = (
                ", ".join(
                    f"{c} ({s.look}{', forecast: ' + rep.verdicts[c] if s.forecast else ''})"
                    for c, s in rep.stops.items()
                    if s.look is not None
                )
                or "none"
            )
            same = [c for c in full if rep.verdicts.get(c) == full[c]]
            differ = [f"{c}: {full[c]} -> {rep.verdicts.get(c)}" for c in full if rep.verdicts.get(c) != full[c]]
            agree = f"{len(same)} of {len(full)}" + (f" ({'; '.join(differ)})" if differ else "")
            note = f"; {'; '.join(notes)}" if notes else ""
            print(
                f"| {folder.name} | {label} | {looks}, catch-up {design.catch_up:g}{note} | "
                f"{worse} | {stopped} | {amount(rep.spent)} / {amount(rep.full)} | {rep.saving:.1%} | {agree} |"
            )


if __name__ == "__main__":
    main()
