"""The report's tables hold exactly what harness.stats computes on the right slices of data."""

import numpy as np
import pandas as pd
import pytest
from report_fakes import CONTROL, FAILED_ID, FAILED_REASON, PRIMARY  # noqa: E402  (tests/report on sys.path)

from harness import stats
from harness.errors import ConfigError
from harness.report import analyze, compare_pair, noise_floor_table

N_PERM = 2000  # keeps the tests fast; the same value goes to the direct stats calls


def _analyze(res, **kw):
    return analyze(res, n_permutations=N_PERM, **kw)


def _direct(res, vals, cond, *, paired):
    a, b = vals(res, cond), vals(res, CONTROL)
    if paired:
        b = b.reindex(a.index)
    return stats.compare(a.to_numpy(), b.to_numpy(), paired=paired, n_permutations=N_PERM,
                         rng=np.random.default_rng(0))


def test_verdict_table_matches_stats(results, vals):
    an = _analyze(results)
    v = an.verdicts.set_index("condition")
    assert list(v.index) == ["big", "null"]
    big = _direct(results, vals, "big", paired=True)  # seed-matched, same seeds on both sides
    null = _direct(results, vals, "null", paired=False)  # null lost seed 4 -> seeds differ
    for cond, c in (("big", big), ("null", null)):
        row = v.loc[cond]
        assert row["n"] == c.n_arm and row["n_control"] == c.n_control
        for col, attr in [("mean", "mean_arm"), ("mean_control", "mean_control"), ("diff", "diff"),
                          ("ci_low", "ci_low"), ("ci_high", "ci_high"), ("p_value", "p_value"),
                          ("hedges_g", "hedges_g"), ("prob_improvement", "prob_improvement")]:
            assert row[col] == pytest.approx(getattr(c, attr), nan_ok=True), (cond, col)
        assert row["test"] == c.test
    assert bool(v.loc["big", "paired"]) and not bool(v.loc["null", "paired"])
    assert v.loc["big", "pair_correlation"] == pytest.approx(big.pair_correlation)
    assert np.isnan(v.loc["null", "pair_correlation"])
    assert "seeds" in v.loc["null", "reason"]  # says why it is unpaired

    adjusted = stats.adjust_pvalues([big.p_value, null.p_value], method="holm")
    assert v.loc[["big", "null"], "p_adjusted"].to_numpy() == pytest.approx(adjusted)
    expected = stats.verdicts([big, null], method="holm", direction="maximize")
    assert list(v["verdict"]) == [e.label for e in expected]
    assert list(v["seeds_needed"]) == [e.seeds_needed for e in expected]
    # the planted effect clears the noise floor; the null one does not
    assert v.loc["big", "verdict"] == "clears noise floor"
    assert v.loc["null", "verdict"] != "clears noise floor"
    assert v.loc["big", "diff"] == pytest.approx(0.3, abs=0.05)


def test_bh_correction(results, vals):
    an = _analyze(results, correction="bh")
    big = _direct(results, vals, "big", paired=True)
    null = _direct(results, vals, "null", paired=False)
    assert an.verdicts["p_adjusted"].to_numpy() == pytest.approx(
        stats.adjust_pvalues([big.p_value, null.p_value], method="bh"))
    assert an.header["correction"] == "bh"
    with pytest.raises(ConfigError, match="holm"):
        _analyze(results, correction="bonferroni")


def test_robustness_marks_cannot_reject_at_n(make, vals):
    res = make(seeds=(0, 1, 2), failed={})
    an = _analyze(res)
    rob = an.robustness
    direct = _direct(res, vals, "big", paired=True)
    got = rob[rob["condition"] == "big"].set_index("check")
    assert set(got.index) == set(direct.robustness)
    for name, chk in direct.robustness.items():
        assert got.loc[name, "p_value"] == pytest.approx(chk.p_value)
        assert bool(got.loc[name, "can_reject"]) == bool(chk.can_reject)
        assert got.loc[name, "note"] == ("" if chk.can_reject else "cannot reject at n=3")
    assert (~rob["can_reject"]).any(), "at n=3 some check cannot reject (e.g. Mann-Whitney)"
    assert {"mann_whitney", "yuen", "permutation"} <= set(rob["check"])


def test_too_few_seeds_gets_no_p_value(make, vals):
    failed = {f"null-s{s}": "RuntimeError: boom" for s in (1, 2, 3, 4)}
    res = make(failed=failed)
    an = _analyze(res)
    v = an.verdicts.set_index("condition")
    assert np.isnan(v.loc["null", "p_value"]) and np.isnan(v.loc["null", "p_adjusted"])
    assert v.loc["null", "verdict"] == "not tested"
    assert "null has 1 completed seed" in v.loc["null", "reason"]
    assert "at least 2" in v.loc["null", "reason"]
    # the untestable comparison is not in the correction family: big is corrected alone
    big = _direct(res, vals, "big", paired=True)
    assert v.loc["big", "p_adjusted"] == pytest.approx(stats.adjust_pvalues([big.p_value])[0])
    nf = an.noise_floor.set_index("condition")
    assert np.isnan(nf.loc["null", "std"]) and "at least 2" in nf.loc["null", "note"]


def test_noise_floor_table_matches_stats(results, vals):
    nf = noise_floor_table(results).set_index("condition")
    for cond in ["grpo", "big", "null"]:
        d = stats.noise_floor(vals(results, cond).to_numpy())
        for col in ["n", "mean", "std", "std_ci_low", "std_ci_high", "sem", "mde", "seeds_for_1sd"]:
            assert nf.loc[cond, col] == pytest.approx(getattr(d, col)), (cond, col)
    assert nf.loc["null", "n"] == 4  # the failed seed is not counted


def test_condition_means_match_t_interval(make, vals):
    res = make(failed={f"null-s{s}": "RuntimeError: boom" for s in (1, 2, 3, 4)})
    c = _analyze(res).conditions.set_index("condition")
    for cond in ["grpo", "big"]:
        mean, low, high = stats.curve_band(vals(res, cond).to_numpy()[:, None])
        assert (c.loc[cond, "mean"], c.loc[cond, "ci_low"], c.loc[cond, "ci_high"]) == pytest.approx(
            (mean[0], low[0], high[0]))
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
        {"trial_id": FAILED_ID, "arm": "null", "seed": 4, "error": FAILED_REASON}]
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
    done = _analyze(make(failed={})).header
    assert done["state"] == [] and done["complete"]


def test_curves_match_curve_band_and_align(results):
    an = _analyze(results)
    assert set(an.curves) == {(PRIMARY, "step"), (PRIMARY, "tokens"),
                              ("train/reward_mean", "step"), ("train/reward_mean", "tokens")}
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
    row = compare_pair(results, "big", CONTROL, n_permutations=N_PERM)
    full = _analyze(results).verdicts.set_index("condition").loc["big"]
    assert row["pre_registered"] and row["p_adjusted"] == pytest.approx(full["p_adjusted"])
    assert row["verdict"] == full["verdict"]
    # an ad-hoc pair on another metric is tested alone and says so
    adhoc = compare_pair(results, "big", "null", metric="train/reward_mean", n_permutations=N_PERM)
    d = stats.compare(vals(results, "big", "train/reward_mean").to_numpy(),
                      vals(results, "null", "train/reward_mean").to_numpy(),
                      n_permutations=N_PERM, rng=np.random.default_rng(0))
    assert adhoc["p_value"] == pytest.approx(d.p_value) and not adhoc["pre_registered"]
    assert adhoc["p_adjusted"] == pytest.approx(stats.adjust_pvalues([d.p_value])[0])
    assert "not a pre-registered" in adhoc["correction"]
    with pytest.raises(ConfigError, match=r"unknown arm 'bigg'; valid: big, grpo, null"):
        compare_pair(results, "bigg", CONTROL)
    with pytest.raises(ConfigError, match=r"unknown metric 'eval/acc'.*eval/accuracy"):
        compare_pair(results, "big", CONTROL, metric="eval/acc")
    with pytest.raises(ConfigError, match="unknown metric"):
        noise_floor_table(results, "nope")
    assert isinstance(noise_floor_table(results), pd.DataFrame)


def test_labels_are_never_read_as_numbers():
    from harness.report.tables import DASH, fmt

    assert fmt("nan") == "nan" and fmt("1e-3") == "1e-3"
    assert fmt(float("nan")) == DASH and fmt(None) == DASH and fmt("") == DASH
    assert fmt(0.123456) == "0.1235"


def test_seeds_needed_past_the_search_limit_reads_as_more_than_it():
    from harness.report.analysis import SEEDS_SEARCH_LIMIT
    from harness.report.tables import DASH, fmt_seeds

    assert fmt_seeds(SEEDS_SEARCH_LIMIT + 1) == f"> {SEEDS_SEARCH_LIMIT}"
    assert fmt_seeds(17) == "17" and fmt_seeds(None) == DASH
