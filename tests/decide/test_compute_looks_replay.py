"""Compute looks replayed on a hand-made study: three seeds per arm, looks at half the steps and
at the budget; the interval, the stop, the verdict at the budget and the compute saved are
worked out by hand below."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import pytest
from scipy import stats as sps

from harness.decide.rules import DecisionRules, ReadOptions
from harness.decide.sequential.compute import RAN_TO_BUDGET, replay_compute_looks, spent_to
from harness.errors import ConfigError
from harness.tracking.study_meta import ComputeLookDesign, StudyMeta

METRIC = "eval/accuracy"
#: accuracy at steps 0, 2 and 4 for seeds 0, 1, 2
CURVES = {
    "ctl": [[0.1, 0.50, 0.60], [0.1, 0.52, 0.62], [0.1, 0.54, 0.64]],
    "good": [[0.1, 0.48, 0.80], [0.1, 0.50, 0.82], [0.1, 0.52, 0.84]],
    "bad": [[0.1, 0.10, 0.20], [0.1, 0.12, 0.22], [0.1, 0.14, 0.24]],
}


@dataclass
class Results:
    trials: pd.DataFrame
    curves: pd.DataFrame
    meta: StudyMeta
    prompts: pd.DataFrame | None = None


def make(*, against="control", catch_up=0.05, last_step=None, status=None, design=True, sign=1.0, at=(0.5, 1.0)):
    """The study; ``last_step[(arm, seed)]`` cuts a trial's history there (a trial paused at a
    look), ``status[(arm, seed)]`` sets its state."""
    trials, curves = [], []
    for arm, seeds in CURVES.items():
        for seed, values in enumerate(seeds):
            values = [sign * v for v in values]
            tid = f"{arm}-s{seed}"
            end = (last_step or {}).get((arm, seed), 4)
            trials.append(
                {
                    "trial_id": tid,
                    "arm": arm,
                    "seed": seed,
                    "status": (status or {}).get((arm, seed), "completed"),
                    METRIC: values[min(end // 2, 2)],
                }
            )
            curves += [
                {"trial_id": tid, "step": s, "metric": METRIC, "value": v}
                for s, v in zip((0, 2, 4), values)
                if s <= end
            ]
            curves += [{"trial_id": tid, "step": s, "metric": "train/loss", "value": 0.0} for s in range(1, end + 1)]
    looks = ComputeLookDesign(
        at=list(at), spending="pocock", catch_up=catch_up, against=against, axis="step", budget=4.0, point="budget"
    )
    meta = StudyMeta(
        study="cl",
        primary_metric=METRIC,
        direction="maximize" if sign > 0 else "minimize",
        min_effect=0.05,
        test="welch_t",
        control="ctl",
        conditions=list(CURVES),
        seeds=[0, 1, 2],
        primary_at={"point": "final", "axis": "compute/flops", "budget": None},
        compute_looks=looks if design else None,
    )
    return Results(pd.DataFrame(trials), pd.DataFrame(curves), meta)


def rules(results):
    return DecisionRules.of(results.meta, ReadOptions(alpha=0.05))


def interval(diff, alpha):
    se = math.sqrt(2 * 0.02**2 / 3)  # both sides: sd 0.02 over 3 seeds; Welch df = 4
    half = sps.t.ppf(1 - alpha / 2, 4) * se
    return diff - half, diff + half


def test_the_worse_arm_stops_at_half_the_budget_and_the_better_one_is_called_at_the_budget():
    rep = replay_compute_looks(make(), rules(make()))
    alpha_1 = 0.05 * math.log1p((math.e - 1) * 0.5)  # Pocock at t = 0.5: 0.031006
    assert rep.alphas == pytest.approx((alpha_1, 0.05 - alpha_1))
    table = rep.table.set_index(["condition", "look"])
    bad = table.loc[("bad", 1)]
    low, high = interval(-0.40, alpha_1 / 2)  # Bonferroni over the two comparisons
    assert (bad["diff"], bad["ci_low"], bad["ci_high"]) == pytest.approx((-0.40, low, high))
    assert bad["ci_level"] == pytest.approx(1 - alpha_1 / 2)
    assert high < -0.05 and bad["decision"] == "stop" and bad["point"] == 2.0
    good = table.loc[("good", 1)]
    assert good["diff"] == pytest.approx(-0.02) and good["decision"] == "go on"
    final = table.loc[("good", 2)]
    low, high = interval(0.20, (0.05 - alpha_1) / 2)
    assert (final["ci_low"], final["ci_high"], final["verdict"]) == (pytest.approx(low), pytest.approx(high), "better")
    assert ("bad", 2) not in table.index
    assert rep.verdicts == {"good": "better", "bad": "worse"}
    assert (rep.stops["bad"].look, rep.stops["bad"].point) == (1, 2.0)
    assert rep.stops["good"].reason == rep.stops["ctl"].reason == RAN_TO_BUDGET
    # compute on the step axis: bad trains 2 of 4 steps on each of 3 seeds
    assert (rep.compute["bad"].spent, rep.compute["bad"].full, rep.compute["bad"].saving) == (6.0, 12.0, 0.5)
    assert (rep.spent, rep.full) == (30.0, 36.0) and rep.saving == pytest.approx(1 / 6)
    assert rep.finished and rep.after_look(0).go_on == ["ctl", "good"] and rep.after_look(0).stopped == ["bad"]
    assert rep.line() == (
        "compute looks at 0.5 (2), 1 (4) steps (pocock spending, catch-up 0.05, against the control); "
        "stopped: bad at look 1; compute spent 30 of 36 (17% saved)"
    )


def test_a_larger_allowance_keeps_the_worse_arm_running():
    rep = replay_compute_looks(make(catch_up=0.4), rules(make()))
    assert rep.stops["bad"].reason == RAN_TO_BUDGET and rep.verdicts["bad"] == "worse"  # read at the budget
    assert rep.saving == 0.0


def test_against_the_best_guards_every_pair_and_reads_the_best_at_the_look():
    rep = replay_compute_looks(make(against="best"), rules(make()))
    alpha_1 = 0.05 * math.log1p((math.e - 1) * 0.5)
    row = rep.table.set_index(["condition", "look"]).loc[("bad", 1)]
    assert row["reference"] == "ctl"  # 0.52 beats good's 0.50 at step 2
    assert row["ci_level"] == pytest.approx(1 - alpha_1 / 3)  # three pairs among three conditions
    assert rep.stops["bad"].look == 1


def test_trials_paused_at_the_look_are_read_there_and_an_arm_short_of_it_waits():
    paused = {("bad", 2): 2, ("ctl", 0): 2, ("good", 1): 1}
    state = {key: "running" for key in paused}
    results = make(last_step=paused, status=state)
    rep = replay_compute_looks(results, rules(results))
    assert rep.stops["bad"].look == 1  # its paused seed reached step 2
    assert rep.waiting == {"good": 0} and rep.verdicts["good"] == "waiting"
    after = rep.after_look(0)
    assert (after.go_on, after.stopped, after.waiting) == (["ctl"], ["bad"], ["good"])
    assert not rep.finished


def test_the_budget_waits_for_unfinished_trials():
    results = make(last_step={("good", 0): 2}, status={("good", 0): "running"})
    rep = replay_compute_looks(results, rules(results))
    assert rep.waiting == {"good": 1} and rep.stops["bad"].look == 1


def test_spent_reads_the_first_row_at_or_past_the_point():
    import numpy as np

    assert spent_to(np.array([0.0, 10.0, 25.0, 40.0]), 20.0) == 25.0
    assert spent_to(np.array([0.0, 10.0]), 20.0) == 10.0  # short: all it ran
    assert math.isnan(spent_to(np.array([]), 1.0))


def test_a_study_without_compute_looks_is_one_line():
    with pytest.raises(ConfigError, match="no compute_looks"):
        replay_compute_looks(make(design=False), rules(make()))


def test_a_metric_to_minimize_stops_the_same_arm():
    results = make(sign=-1.0)  # every value negated: less is better
    rep = replay_compute_looks(results, rules(results))
    assert rep.verdicts == {"good": "better", "bad": "worse"} and rep.stops["bad"].look == 1
    row = rep.table.set_index(["condition", "look"]).loc[("bad", 1)]
    assert row["diff"] == pytest.approx(0.40) and row["ci_low"] > 0.05


def test_a_look_between_evaluations_reads_the_curve_interpolated_and_spends_to_the_next_row():
    results = make(at=(0.25, 1.0))  # step 1: halfway between the evaluations at steps 0 and 2
    rep = replay_compute_looks(results, rules(results))
    row = rep.table.set_index(["condition", "look"]).loc[("bad", 1)]
    # ctl (0.1 + 0.50..0.54) / 2 = 0.30..0.32, bad (0.1 + 0.10..0.14) / 2 = 0.10..0.12
    assert (row["point"], row["diff"]) == (1.0, pytest.approx(-0.20))
    assert rep.stops["bad"].look == 1 and rep.compute["bad"].spent == 3.0  # one step on each of 3 seeds
