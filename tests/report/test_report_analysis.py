"""The report's tables hold exactly what harness.stats computes on the right slices of data."""

import numpy as np
import pandas as pd
import pytest
from report_fakes import (
    CONTROL,
    FAILED_ID,
    FAILED_REASON,
    PRIMARY,
    values,
    with_prompts,
)

from harness import stats
from harness.decide.analysis import analyze, compare_pair
from harness.decide.comparisons import ArmScores
from harness.decide.noise import noise_floor_table, noise_split
from harness.decide.rules import ReadOptions
from harness.errors import ConfigError

N_PERM = 2000  # keeps the tests fast; the same value goes to the direct stats calls


def _analyze(res, **kw):
    return analyze(res, ReadOptions(n_permutations=N_PERM, **kw))


def _paired_on_common(res, vals, cond):
    a, b = vals(res, cond), vals(res, CONTROL)
    common = a.index.intersection(b.index)
    return a.loc[common], b.loc[common]


def _direct(res, vals, cond):
    """The trial-means comparison the report should make: paired on the seeds both completed."""
    a, b = _paired_on_common(res, vals, cond)
    return stats.compare(a.to_numpy(), b.to_numpy(), paired=True, n_permutations=N_PERM, rng=np.random.default_rng(0))


def _difference(res, vals, cond):
    a, b = _paired_on_common(res, vals, cond)
    return stats.trial_means_difference(a.to_numpy(), b.to_numpy(), test="paired_t")


def test_verdict_table_matches_stats(results, vals):
    an = _analyze(results, min_effect=0.05)
    v = an.verdicts.set_index("condition")
    assert list(v.index) == ["big", "null"]
    diffs = [_difference(results, vals, c) for c in ("big", "null")]
    expected = stats.decide(diffs, alpha=0.05, min_effect=0.05, correction="bonferroni")
    for cond, c, d, e in zip(
        ("big", "null"), (_direct(results, vals, "big"), _direct(results, vals, "null")), diffs, expected
    ):
        row = v.loc[cond]
        assert row["n"] == c.n_arm and row["n_control"] == c.n_control
        for col, want in [
            ("mean", c.mean_arm),
            ("mean_control", c.mean_control),
            ("diff", c.diff),
            ("hedges_g", c.hedges_g),
            ("p_value", c.p_value),
            ("ci_low", e.ci_low),
            ("ci_high", e.ci_high),
            ("p_adjusted", e.p_adjusted),
        ]:
            assert row[col] == pytest.approx(want, nan_ok=True), (cond, col)
        assert row["test"] == "paired_t" == d.test
        assert (row["verdict"], row["seeds_needed_null"], row["seeds_needed_effect"]) == (
            e.label,
            e.seeds_needed_null,
            e.seeds_needed_effect,
        )
    # the interval is the Bonferroni one of the family of 2: wider than the unadjusted 95% CI
    assert v.loc["big", "ci_level"] == pytest.approx(0.975)
    big = _direct(results, vals, "big")
    assert v.loc["big", "ci_low"] < big.ci_low and v.loc["big", "ci_high"] > big.ci_high
    assert v.loc["big", "p_adjusted"] == pytest.approx(min(1.0, 2 * big.p_value))
    # null lost seed 4: paired on the 4 seeds both sides completed, and it says so
    assert bool(v.loc["null", "paired"]) and v.loc["null", "n_control"] == 4
    assert "paired on the 4 seeds" in v.loc["null", "reason"].lower()
    assert v.loc["null", "failed"] == 1 and v.loc["null", "failed_control"] == 0
    assert "Failed trials of null: 1, left out" in v.loc["null", "reason"]
    assert v.loc["big", "verdict"] == "better" and v.loc["big", "diff"] == pytest.approx(0.3, abs=0.05)
    assert v.loc["null", "verdict"] in ("equivalent", "inconclusive")


def test_worse_is_not_better_and_minimize_flips_it(make):
    res = make(failed={})
    res.trials.loc[res.trials["arm"] == "big", PRIMARY] -= 0.6  # big now 0.3 below the control
    v = _analyze(res).verdicts.set_index("condition")
    assert v.loc["big", "verdict"] == "worse"
    res.meta["direction"] = "minimize"
    assert _analyze(res).verdicts.set_index("condition").loc["big", "verdict"] == "better"


def test_the_printed_interval_is_the_one_the_verdict_reads(make):
    # An effect whose unadjusted 95% CI excludes 0 but whose Bonferroni interval (family of 2) does
    # not: the old report printed the first and said "underpowered"; now both say inconclusive.
    res = make(failed={})
    deltas = 0.01 + 0.00912 * np.array([1.0, -1.0, 0.5, -0.5, 0.0])  # paired t = 3.1: between t(4) 2.78 and 3.50
    for seed, delta in enumerate(deltas):
        ctrl = res.trials[(res.trials["arm"] == CONTROL) & (res.trials["seed"] == seed)].index
        arm = res.trials[(res.trials["arm"] == "null") & (res.trials["seed"] == seed)].index
        res.trials.loc[arm, PRIMARY] = res.trials.loc[ctrl, PRIMARY].to_numpy() + delta
    direct = stats.compare(*(v.to_numpy() for v in _paired_on_common(res, values, "null")), paired=True)
    assert direct.ci_low > 0  # unadjusted: excludes 0
    row = _analyze(res).verdicts.set_index("condition").loc["null"]
    assert row["ci_low"] < 0 < row["ci_high"] and row["verdict"] == "inconclusive"
    assert row["p_adjusted"] >= 0.05


def test_seeds_needed_is_prospective_not_post_hoc(make):
    # Same seed noise, observed differences 0 and 0.01: post-hoc power asked for "> 10000" seeds
    # at a difference of exactly 0. Prospective planning at min_effect gives one finite answer.
    res = make(failed={})
    ctrl = res.trials[res.trials["arm"] == CONTROL].sort_values("seed")
    for offset in (0.0, 0.01):
        idx = res.trials[res.trials["arm"] == "null"].sort_values("seed").index
        res.trials.loc[idx, PRIMARY] = ctrl[PRIMARY].to_numpy() + offset + np.array([0.01, -0.01, 0.02, -0.02, 0])
        row = _analyze(res, min_effect=0.05).verdicts.set_index("condition").loc["null"]
        assert row["seeds_needed_effect"] is not None and row["seeds_needed_effect"] < 100
        assert row["seeds_needed_null"] is not None
        assert row["verdict"] == "equivalent"


def test_corrections(results, vals):
    an = _analyze(results, correction="none")
    big = _direct(results, vals, "big")
    row = an.verdicts.set_index("condition").loc["big"]
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((big.ci_low, big.ci_high))  # level 0.95
    assert row["p_adjusted"] == pytest.approx(big.p_value)
    assert an.header["correction"] == "none"
    with pytest.raises(ConfigError, match="bonferroni"):
        _analyze(results, correction="holm")


def test_robustness_drops_checks_identical_to_the_verdict_test(make, vals):
    res = make(seeds=(0, 1, 2), failed={})
    rob = _analyze(res).robustness
    direct = _direct(res, vals, "big")
    got = rob[rob["condition"] == "big"].set_index("check")
    # at 3 seeds a 20% trim cuts nothing (Yuen == Welch) and paired_t is the verdict's own test
    assert set(got.index) == set(direct.robustness) - {"yuen", "paired_t"}
    for name in got.index:
        chk = direct.robustness[name]
        assert got.loc[name, "p_value"] == pytest.approx(chk.p_value)
        assert bool(got.loc[name, "can_reject"]) == bool(chk.can_reject)
        assert got.loc[name, "note"] == ("" if chk.can_reject else "cannot reject at n=3")
    assert (~rob["can_reject"]).any(), "at n=3 some check cannot reject (e.g. Mann-Whitney)"
    five = _analyze(make(failed={})).robustness
    assert "yuen" in set(five["check"])  # at 5 seeds Yuen trims one from each end


def test_too_few_seeds_without_prompt_scores_is_untested_and_outside_the_family(make, vals):
    failed = {f"null-s{s}": "RuntimeError: boom" for s in (1, 2, 3, 4)}
    res = make(failed=failed)
    an = _analyze(res)
    v = an.verdicts.set_index("condition")
    assert np.isnan(v.loc["null", "p_value"]) and np.isnan(v.loc["null", "p_adjusted"])
    assert v.loc["null", "verdict"] == "untested"
    assert "Cannot be tested" in v.loc["null", "reason"] and "null has 1 seed" in v.loc["null", "reason"]
    assert v.loc["null", "failed"] == 4
    # the untestable comparison is not in the family: big's interval is at 95%
    assert v.loc["big", "ci_level"] == pytest.approx(0.95)
    nf = an.noise_floor.set_index("condition")
    assert np.isnan(nf.loc["null", "std"]) and "at least 2" in nf.loc["null", "note"]


def test_failures_worst_scores_failed_trials(make, vals):
    res = make(failed={f"null-s{s}": "RuntimeError: boom" for s in (3, 4)})
    res.meta["failures"] = "worst"
    v = _analyze(res).verdicts.set_index("condition").loc["null"]
    assert v["n"] == 5 and v["failed"] == 2
    assert v["mean"] == pytest.approx((vals(res, "null").sum() + 0.0) / 5)  # two zeros
    assert "scored at the metric's worst value" in v["reason"]


def test_noise_floor_table_plans_at_the_verdict_level(results, vals):
    an = _analyze(results, min_effect=0.05)
    level = an.header["ci_level"]
    assert level == pytest.approx(0.975)
    nf = an.noise_floor.set_index("condition")
    for cond in ["grpo", "big", "null"]:
        d = stats.noise_floor(vals(results, cond).to_numpy(), level=level, effect=0.05)
        for col in ["n", "mean", "std", "std_ci_low", "std_ci_high", "sem", "seeds_needed", "normality_p"]:
            assert nf.loc[cond, col] == pytest.approx(getattr(d, col)), (cond, col)
    assert nf.loc["grpo", "std_ci_method"] == "bonett"
    assert nf.loc["null", "n"] == 4 and nf.loc["null", "std_ci_method"].startswith("chi-square")


def test_seed_prompt_analysis_when_prompts_are_recorded(make):
    res = with_prompts(make(failed={}), 32, arm_x_prompt=0.5)
    an = _analyze(res, min_effect=0.05)
    v = an.verdicts.set_index("condition")
    assert set(v["test"]) == {"seed_prompt_binary"}  # 0/1 greedy scores
    p = res.prompts[(res.prompts["step"] == 9)]
    tables = {
        c: p[p["arm"] == c].pivot(index="seed", columns="prompt_id", values="value").sort_index()
        for c in ("grpo", "big", "null")
    }
    want = stats.seed_prompt_difference(tables["big"].to_numpy(), tables["grpo"].to_numpy(), paired=True, binary=True)
    null = stats.seed_prompt_difference(tables["null"].to_numpy(), tables["grpo"].to_numpy(), paired=True, binary=True)
    e = stats.decide(
        [want, null],
        min_effect=0.05,
    )[0]
    assert v.loc["big", "diff"] == pytest.approx(want.diff)
    assert (v.loc["big", "ci_low"], v.loc["big", "ci_high"]) == pytest.approx((e.ci_low, e.ci_high))
    # the trial-means analysis stays as a robustness check
    rob = an.robustness[an.robustness["condition"] == "big"]
    assert "paired_t" in set(rob["check"])
    comps = an.components.set_index("source")
    want_c = stats.variance_components({c: t.to_numpy() for c, t in tables.items()})
    assert comps.loc["arm x prompt", "variance"] == pytest.approx(want_c.arm_x_prompt)
    assert comps["share"].sum() == pytest.approx(1.0)
    assert list(an.budget["option"]) == ["as run", "+1 seed per arm", "2x eval prompts"]  # greedy: no samples
    assert an.budget.set_index("option").loc["2x eval prompts", "se_diff"] < an.budget["se_diff"].iloc[0]
    line = an.header["noise_line"]
    assert line.startswith("Noise floor of eval/accuracy: training-seed sd (component)") and "at 32 prompts" in line
    assert "at 128 prompts" in line  # what 4x the prompts would need


def test_seed_prompt_falls_back_to_trial_means_and_says_so(make):
    res = with_prompts(make(failed={}), 16)
    res.meta["test"] = "seed_prompt"
    res.prompts = res.prompts[res.prompts["trial_id"] != "big-s2"]  # one trial without per-prompt scores
    v = _analyze(res).verdicts.set_index("condition")
    assert v.loc["big", "test"] == "paired_t" and "no per-prompt scores" in v.loc["big", "reason"].lower()
    assert v.loc["null", "test"] == "seed_prompt_binary"


def test_condition_means_match_t_interval(make, vals):
    res = make(failed={f"null-s{s}": "RuntimeError: boom" for s in (1, 2, 3, 4)})
    c = _analyze(res).conditions.set_index("condition")
    for cond in ["grpo", "big"]:
        mean, low, high = stats.curve_band(vals(res, cond).to_numpy()[:, None])
        assert (c.loc[cond, "mean"], c.loc[cond, "ci_low"], c.loc[cond, "ci_high"]) == pytest.approx(
            (mean[0], low[0], high[0])
        )
        assert c.loc[cond, "ci_low"] < c.loc[cond, "mean"] < c.loc[cond, "ci_high"]
    # one seed: its value, no interval
    assert c.loc["null", "n"] == 1 and c.loc["null", "mean"] == pytest.approx(vals(res, "null").iloc[0])
    assert np.isnan(c.loc["null", "ci_low"])


def test_cost_table_and_failed_trials(results):
    an = _analyze(results)
    cost = an.cost.set_index("condition")
    t = results.trials
    assert cost.loc["all", "trials"] == 15 and cost.loc["all", "failed"] == 1
    assert cost.loc["null", "completed"] == 4 and cost.loc["null", "failed"] == 1
    assert cost.loc["big", "wall_time_s"] == pytest.approx(t.loc[t["arm"] == "big", "wall_time_s"].sum())
    assert cost.loc["all", "tokens"] == pytest.approx(t["tokens/total"].sum())
    assert an.failed.to_dict(orient="records") == [
        {"trial_id": FAILED_ID, "arm": "null", "seed": 4, "error": FAILED_REASON}
    ]
    assert len(an.trials) == 15  # nothing dropped from the per-trial table


def test_config_diff_table(make):
    res = make(pending={"null-s4": "waiting"}, failed={})
    params = [c for c in res.trials.columns if c.startswith("param/")]
    res.trials.loc[res.trials["trial_id"] == "null-s4", params] = None  # queued without a spec
    diff = _analyze(res).config_diff.set_index("param")
    assert sorted(diff.index) == ["algorithm.eps_high", "algorithm.loss_agg"]  # lr/steps/arm/seed excluded
    assert list(diff.columns) == ["grpo", "big", "null"]
    assert diff.loc["algorithm.eps_high"].tolist() == ["0.2", "0.28", "0.2"]
    assert diff.loc["algorithm.loss_agg", "null"] == "seq-mean-token-sum-norm"


def test_header_says_still_running(make):
    res = make(pending={"big-s4": "running", "grpo-s4": "waiting"})
    h = _analyze(res).header
    assert h["n_pending"] == 2 and not h["complete"]
    assert any("STILL RUNNING" in s and "2 of 15" in s for s in h["state"])
    assert any("failed" in s for s in h["state"])
    done = _analyze(make(failed={}), min_effect=0.05).header
    assert done["state"] == [] and done["complete"]
    unset = _analyze(make(failed={})).header
    assert len(unset["state"]) == 1 and unset["state"][0].startswith("NO MIN_EFFECT")
    assert unset["min_effect"] is None and unset["planning_effect"] > 0


def test_curves_match_curve_band_and_align(results):
    an = _analyze(results)
    assert set(an.curves) == {
        (PRIMARY, "step"),
        (PRIMARY, "tokens"),
        ("train/reward_mean", "step"),
        ("train/reward_mean", "tokens"),
    }
    curves = results.curves
    done = results.trials.loc[results.trials["status"] == "completed", "trial_id"]
    c = curves[curves["trial_id"].isin(done) & (curves["arm"] == "null")]

    # by step
    y = c[c["metric"] == "train/reward_mean"].pivot(index="trial_id", columns="step", values="value")
    mean, low, high = stats.curve_band(y.to_numpy())
    band = an.curves[("train/reward_mean", "step")]
    band = band[band["condition"] == "null"]
    assert band["x"].tolist() == list(range(10))
    assert band["mean"].to_numpy() == pytest.approx(np.asarray(mean))
    assert band["low"].to_numpy() == pytest.approx(np.asarray(low))
    assert (band["n_seeds"] == 4).all()  # the failed trial's partial curve is left out

    # by tokens processed
    xs, ys = [], []
    for tid in sorted(c["trial_id"].unique()):
        t = c[c["trial_id"] == tid]
        xs.append(t[t["metric"] == "tokens/total"].sort_values("step")["value"].to_numpy())
        ys.append(t[t["metric"] == "train/reward_mean"].sort_values("step")["value"].to_numpy())
    band = an.curves[("train/reward_mean", "tokens")]
    band = band[band["condition"] == "null"]
    grid = band["x"].to_numpy()
    assert grid[0] == pytest.approx(min(x[0] for x in xs)) and grid[-1] == pytest.approx(max(x[-1] for x in xs))
    mean, _, high = stats.curve_band(stats.align_on_grid(xs, ys, grid))
    assert band["mean"].to_numpy() == pytest.approx(np.asarray(mean), nan_ok=True)
    assert band["high"].to_numpy() == pytest.approx(np.asarray(high), nan_ok=True)
    big = an.curves[("train/reward_mean", "tokens")]
    assert big.loc[big["condition"] == "big", "x"].max() > grid[-1]  # big processes more tokens


def test_compare_pair_and_unknown_names(results, vals):
    row = compare_pair(results, "big", CONTROL, options=ReadOptions(n_permutations=N_PERM))
    full = _analyze(results).verdicts.set_index("condition").loc["big"]
    assert row["pre_registered"] and row["p_adjusted"] == pytest.approx(full["p_adjusted"])
    assert row["verdict"] == full["verdict"] and row["ci_low"] == pytest.approx(full["ci_low"])
    # an ad-hoc pair on another metric is tested alone (a family of one) and says so
    adhoc = compare_pair(results, "big", "null", metric="train/reward_mean", options=ReadOptions(n_permutations=N_PERM))
    a, b = vals(results, "big", "train/reward_mean"), vals(results, "null", "train/reward_mean")
    common = a.index.intersection(b.index)
    d = stats.compare(a.loc[common].to_numpy(), b.loc[common].to_numpy(), paired=True)
    assert adhoc["p_value"] == pytest.approx(d.p_value) and not adhoc["pre_registered"]
    assert adhoc["p_adjusted"] == pytest.approx(d.p_value) and adhoc["ci_level"] == pytest.approx(0.95)
    assert "not a pre-registered" in adhoc["correction"]
    with pytest.raises(ConfigError, match=r"unknown arm 'bigg'; valid: big, grpo, null"):
        compare_pair(results, "bigg", CONTROL)
    with pytest.raises(ConfigError, match=r"unknown metric 'eval/acc'.*eval/accuracy"):
        compare_pair(results, "big", CONTROL, metric="eval/acc")
    with pytest.raises(ConfigError, match="unknown metric"):
        noise_floor_table(results, "nope")
    with pytest.raises(ConfigError, match="min_effect must be a finite number > 0"):
        compare_pair(results, "big", CONTROL, options=ReadOptions(min_effect=-1))
    assert isinstance(noise_floor_table(results), pd.DataFrame)


def test_compare_pair_selects_the_pair_not_just_the_arm(results, vals):
    # comparisons [(big, grpo), (big, null)]: compare_pair(big, null) used to return big vs grpo
    results.meta["comparisons"] = [("big", CONTROL), ("big", "null")]
    row = compare_pair(results, "big", "null", options=ReadOptions(n_permutations=N_PERM))
    a, b = vals(results, "big"), vals(results, "null")
    common = a.index.intersection(b.index)
    direct = stats.compare(a.loc[common].to_numpy(), b.loc[common].to_numpy(), paired=True)
    assert row["pre_registered"] and row["control"] == "null"
    assert row["diff"] == pytest.approx(direct.diff) and row["p_value"] == pytest.approx(direct.p_value)
    vs_control = compare_pair(results, "big", CONTROL, options=ReadOptions(n_permutations=N_PERM))
    assert vs_control["diff"] != pytest.approx(row["diff"])


def test_labels_are_never_read_as_numbers():
    from harness.report.cells import DASH, fmt

    assert fmt("nan") == "nan" and fmt("1e-3") == "1e-3"
    assert fmt(float("nan")) == DASH and fmt(None) == DASH and fmt("") == DASH
    assert fmt(0.123456) == "0.1235"


def test_seeds_needed_past_the_search_limit_reads_as_more_than_it():
    from harness.decide.comparisons import SEEDS_SEARCH_LIMIT
    from harness.report.cells import DASH, fmt_seeds

    assert fmt_seeds(SEEDS_SEARCH_LIMIT + 1) == f"> {SEEDS_SEARCH_LIMIT}"
    assert fmt_seeds(17) == "17" and fmt_seeds(None) == DASH


def _scores(rows: np.ndarray) -> ArmScores:
    table = pd.DataFrame(rows, columns=[f"p{i}" for i in range(rows.shape[1])])
    return ArmScores(values=table.mean(axis=1), failed=0, table=table)


def test_the_noise_line_says_when_the_seed_sd_is_below_what_the_seeds_can_measure():
    rng = np.random.default_rng(0)
    base = (rng.random((1, 64)) < 0.6).astype(float)
    alike = {c: _scores(np.repeat(base, 3, axis=0)) for c in ("a", "b")}  # every seed the same: nothing to see
    line = noise_split("eval/accuracy", alike, level=0.95, effect=None, margin=None, power=0.8).line
    assert "training-seed sd (component) 0 (at 3 seeds" in line and "estimated, not known to be 0" in line
    offsets = np.array([[0.0], [0.3], [0.6]])  # seeds far apart: a seed component well above the noise
    apart = {c: _scores(np.clip(rng.random((3, 64)) + offsets, 0, 1.5)) for c in ("a", "b")}
    line = noise_split("eval/accuracy", apart, level=0.95, effect=None, margin=None, power=0.8).line
    assert line.startswith("Noise floor of eval/accuracy: training-seed sd (component) 0.")
    assert "estimated, not known" not in line
